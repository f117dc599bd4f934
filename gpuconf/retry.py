"""The retry file: the hosts a run left failed or unreachable, one name a line,
so that the next run can take `--limit @FILE` (Ansible's convention).

It lies next to the playbook by default (`site.yml` -> `site.retry`). A run
with nothing to retry removes a stale one, so the file never names hosts that
have since converged. An interrupted run leaves it as it was: it did not get
far enough to say which hosts are fine.
"""
from __future__ import annotations

from pathlib import Path

from gpuconf.report.jsonreport import write_atomic
from gpuconf.results import RunResult


def default_path(playbook: str | Path) -> Path:
    path = Path(playbook)
    if path.suffix in (".yml", ".yaml"):
        return path.with_suffix(".retry")
    return path.with_name(path.name + ".retry")


def hosts_to_retry(run: RunResult) -> list[str]:
    """Failed (a task failed or its state is unknown) and unreachable hosts, in inventory order."""
    return [name for name, host in run.hosts.items() if host.unreachable or host.failed]


def update(run: RunResult, path: Path) -> Path | None:
    """Write (or remove) the retry file at `path`; returns it when it now lists hosts.
    Raises OSError when the file cannot be written or removed."""
    if run.interrupted:
        return None
    hosts = hosts_to_retry(run)
    if hosts:
        write_atomic(path, "".join(f"{name}\n" for name in hosts))
        return path
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    return None
