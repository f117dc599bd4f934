"""The retry file: the hosts a run left failed or unreachable, one name a line,
so that the next run can take `--limit @FILE` (Ansible's convention).

It lies next to the playbook by default (`site.yml` -> `site.retry`). A run
speaks only for the hosts it ran: it drops those that converged, adds those
that failed, and keeps the hosts it did not run (a `--limit` run that fixes one
host leaves the others listed). A file left with no host is removed, so it
never names hosts that have since converged. Ansible, by contrast, overwrites
the file with the run's failed hosts alone and never removes one, so a
`--limit` run there forgets the hosts outside it. An interrupted run leaves the
file as it was: it did not get far enough to say which hosts are fine.
"""
from __future__ import annotations

from pathlib import Path

from gpuconf.files.bounded import write_atomic
from gpuconf.results import RunResult


def default_path(playbook: str | Path) -> Path:
    path = Path(playbook)
    if path.suffix in (".yml", ".yaml"):
        return path.with_suffix(".retry")
    return path.with_name(path.name + ".retry")


def hosts_to_retry(run: RunResult) -> list[str]:
    """Failed (a task failed or its state is unknown; under --strict, warned) and unreachable hosts,
    in inventory order: the hosts behind exit bits 4 and 8."""
    return list(run.failed_hosts())


def update(run: RunResult, path: Path) -> Path | None:
    """Write (or remove) the retry file at `path`; returns it when it now lists hosts.
    Raises OSError when the file cannot be written or removed."""
    if run.interrupted:
        return None
    failed = hosts_to_retry(run)
    try:
        before = path.read_text().split()
    except FileNotFoundError:
        before = []
    except UnicodeDecodeError:   # not a retry file: it is replaced, as it would be without one
        before = []
    kept = [name for name in dict.fromkeys(before) if name not in run.hosts]  # hosts this run did not run
    hosts = kept + failed
    if hosts:
        write_atomic(path, "".join(f"{name}\n" for name in hosts))
        return path
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    return None
