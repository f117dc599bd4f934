"""Drive the real `gpuconf` command against lab nodes, and read what it reports.

Every run is a subprocess (`python -m gpuconf`), as a user or a cron job would
start it, so that signals, exit codes and stderr are the real ones. Check runs
go through `check_run`, which digests the nodes before and after: a check that
changed a node is counted (tests/figures.py) and fails the test.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.figures import count_check

GPUCONF = [sys.executable, "-m", "gpuconf"]
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    report: dict | None

    def host(self, name: str) -> dict:
        assert self.report is not None, self.stderr
        return self.report["hosts"][name]

    def tasks(self, name: str) -> dict[str, dict]:
        return {t["task"]: t for t in self.host(name)["tasks"]}

    def statuses(self, name: str) -> dict[str, str]:
        return {t["task"]: t["status"] for t in self.host(name)["tasks"]}


def write_inventory(lab, path: Path, nodes: list[str], **common) -> Path:
    """An inventory of these lab nodes, in this order, reached as the lab's own inventory does."""
    hosts = {name: {"address": lab.node(name).address} for name in nodes}
    variables = {"port": lab.node(nodes[0]).port, "user": "gpuadmin", "become": True,
                 "ssh_key": str(lab.client_key), "known_hosts_file": str(lab.known_hosts),
                 "connect_timeout": 3, "connect_retries": 1, **common}
    path.write_text(yaml.safe_dump({"all": {"vars": variables, "hosts": hosts}}, sort_keys=False))
    return path


def write_playbook(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def command(verb: str, playbook: Path, inventory: Path, report: Path, *args: str) -> list[str]:
    return [*GPUCONF, verb, str(playbook), "-i", str(inventory), "--report", str(report), *args]


def read_report(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def gpuconf(verb: str, playbook: Path, inventory: Path, *args: str, timeout: float = 180,
            env: dict | None = None) -> Run:
    report = playbook.with_name(f"{playbook.stem}-{verb}-{time.monotonic_ns()}.json")
    proc = subprocess.run(command(verb, playbook, inventory, report, *args), capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)
    return Run(proc.returncode, proc.stdout, proc.stderr, read_report(report))


def start(verb: str, playbook: Path, inventory: Path, *args: str, env: dict | None = None
          ) -> tuple[subprocess.Popen, Path]:
    """A run in the background; `finish` collects it."""
    report = playbook.with_name(f"{playbook.stem}-{verb}-{time.monotonic_ns()}.json")
    proc = subprocess.Popen(command(verb, playbook, inventory, report, *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    return proc, report


def finish(proc: subprocess.Popen, report: Path, timeout: float = 180) -> Run:
    out, err = proc.communicate(timeout=timeout)
    return Run(proc.returncode, out, err, read_report(report))


def check_run(lab, nodes: list[str], playbook: Path, inventory: Path, *args: str, timeout: float = 180) -> Run:
    """`gpuconf check`, proven read-only: every node's digest is the same after as before."""
    before = {node: lab.digest(node) for node in nodes}
    run = gpuconf("check", playbook, inventory, *args, timeout=timeout)
    changed = [node for node in nodes if lab.digest(node) != before[node]]
    count_check(bool(changed))
    assert not changed, f"check changed the filesystem of {changed}"
    return run


def wait_for(predicate, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def node_file(lab, node: str, path: str) -> str | None:
    """A file's content read inside the node (as root, not over SSH), or None if it is absent."""
    rc, out, _ = lab.exec(node, ["cat", path])
    return out if rc == 0 else None


def no_traceback(run: Run) -> None:
    assert "Traceback" not in run.stdout + run.stderr, run.stderr


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCONF_")}
    env.update(extra)
    return env
