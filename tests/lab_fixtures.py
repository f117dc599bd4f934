"""Lab fixtures: one lab per test session, started by the test process itself.

The nodes are children of the pytest process, so they are reaped when the session ends even on a
machine whose PID 1 does not reap orphans. Tests reach nodes the way gpuconf does: over real SSH
(paramiko) with the lab's key and strictly pinned host keys.

Nodes have roles so that tests do not disturb each other: a100-01 for reads and harmless writes,
a100-02 for reboots, t4-01 for faults and resets (tests put it back with `lab.reset`).
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko
import pytest

from gpuconf_lab.fleet import Lab
from gpuconf_lab.runtime import LabError, LabPaths, require_el9_tools, require_tools
from gpuconf_lab.slurm_cluster import require_slurm_tools

# GPUCONF_TEST_LAB: another name, so that two sessions on one machine do not take down each other's lab;
# each pytest-xdist worker (PYTEST_XDIST_WORKER: gw0, gw1, ...) has labs of its own (tests/parallel.py)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
LAB_NAME = os.environ.get("GPUCONF_TEST_LAB", "labtest") + (f"-{_WORKER}" if _WORKER else "")
LAB_PROFILES = {"a100": 2, "t4": 1}
# The EL 9 lab: one Rocky Linux 9.4 node with the real rpm and dnf, a100-el9-01.
EL9_LAB_NAME = f"{LAB_NAME}-el9"[:31]
EL9_NODE = "a100-el9-01"
# The Slurm lab: six t4 nodes, a real slurmctld on the machine and a real slurmd in each node.
SLURM_LAB_NAME = f"{LAB_NAME}-slurm"[:31]
SLURM_LAB_PROFILES = {"t4": 6}
_fresh_digests: dict[str, str] = {}


def lab_unavailable() -> str | None:
    if not sys.platform.startswith("linux"):
        return "the lab needs Linux"
    if os.geteuid() != 0:
        return "the lab needs root (make test runs as root)"
    try:
        require_tools()
    except LabError as exc:
        return str(exc)
    return None


def unavailable_with(require: Callable[[], None]) -> str | None:
    """Why a lab that also needs `require`'s tools cannot start here: what lab_unavailable says,
    or what `require` raises."""
    why = lab_unavailable()
    if why is None:
        try:
            require()
        except LabError as exc:
            why = str(exc)
    return why


def el9_unavailable() -> str | None:
    """Why an EL 9 lab cannot start here (no lab, or the missing rpm/dnf tools)."""
    return unavailable_with(require_el9_tools)


def slurm_unavailable() -> str | None:
    """Why a Slurm lab cannot start here (no lab, or missing Slurm programs)."""
    return unavailable_with(require_slurm_tools)


def start_lab(name: str, profiles: dict[str, int], *,
              unavailable: Callable[[], str | None] = lab_unavailable, **up: Any) -> Lab:
    """A fresh lab for a session or module fixture: the tests skip with the reason `unavailable`
    gives when it cannot start here; a lab of that name left by an interrupted session is taken
    down first. `up` goes to Lab.up (slurm=True, ...). The fixture takes it down at its end."""
    why = unavailable()
    if why:
        pytest.skip(why)
    lab = Lab(name, boot_delay=0.5)
    if lab.exists():
        lab.down()
    lab.up(profiles, **up)
    return lab


@pytest.fixture(scope="session")
def lab():
    """The session's lab (2 × a100, 1 × t4), torn down at the end of the session."""
    session_lab = start_lab(LAB_NAME, LAB_PROFILES)
    _fresh_digests.update({info.name: session_lab.digest(info.name) for info in session_lab.nodes})
    yield session_lab
    session_lab.down()


@pytest.fixture(scope="session")
def el9_lab():
    """The session's EL 9 lab (1 × a100 on Rocky Linux 9.4), torn down at the end of the session.
    Tests that change its node put it back with `el9_lab.reset(EL9_NODE)`."""
    session_lab = start_lab(EL9_LAB_NAME, {"a100@el9": 1}, unavailable=el9_unavailable)
    yield session_lab
    session_lab.down()


@pytest.fixture(scope="session")
def slurm_lab():
    """The session's Slurm lab (6 × t4 with slurmd, slurmctld on the machine; docs/lab-slurm.md),
    torn down at the end of the session. A test that drains, reboots or runs jobs on a node puts
    it back (idle, no jobs, no drain) before it ends: `slurm_idle(lab, node)` waits for that."""
    session_lab = start_lab(SLURM_LAB_NAME, SLURM_LAB_PROFILES, unavailable=slurm_unavailable, slurm=True)
    yield session_lab
    session_lab.down()


def slurm_node_state(lab: Lab, node: str) -> str:
    """The node's state as `sinfo -N -o %T` prints it (idle, draining, drained, mixed, down*, ...).

    All nodes are listed and the node's line picked: Slurm 22.05.8's `sinfo -n ONE_NODE` (a
    single-node query) can keep showing a job's CPUs as allocated ("mixed") long after the job
    ended when the node rebooted meanwhile, while the full listing and `scontrol show node` say idle."""
    result = lab.slurm(["sinfo", "--noheader", "-N", "-o", "%N %T"])
    assert result.returncode == 0, result.stderr
    states = dict(line.split(None, 1) for line in result.stdout.splitlines() if " " in line)
    return states.get(node, "unknown")


def slurm_idle(lab: Lab, node: str, timeout: float = 60.0) -> None:
    """Cancel the node's jobs, resume it if it is drained or down, and wait until it is idle."""
    lab.slurm(["scancel", "--full", "-w", node])
    if slurm_node_state(lab, node) not in ("idle", "allocated", "mixed"):
        lab.slurm(["scontrol", "update", f"NodeName={node}", "State=RESUME"])
    assert wait_until(lambda: slurm_node_state(lab, node) == "idle", timeout, 0.2), slurm_node_state(lab, node)


@pytest.fixture(scope="session")
def fresh_digests(lab) -> dict[str, str]:
    """Upper-dir digests of every node right after `up`, before any test touched it."""
    return dict(_fresh_digests)


def ssh_client(lab: Lab, name: str, *, user: str = "gpuadmin", known_hosts: str | None = None,
               timeout: float = 10.0) -> paramiko.SSHClient:
    """An SSH client that trusts only the pinned host keys (unknown keys are rejected)."""
    info = lab.node(name)
    client = paramiko.SSHClient()
    client.load_host_keys(known_hosts or str(lab.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(info.address, info.port, username=user, key_filename=str(lab.client_key),
                   look_for_keys=False, allow_agent=False, timeout=timeout, banner_timeout=timeout,
                   auth_timeout=timeout)
    return client


def ssh_run(client: paramiko.SSHClient, command: str, timeout: float = 60.0) -> tuple[int, str, str]:
    """Run a non-pty command; returns (exit status, stdout, stderr)."""
    _, stdout, stderr = client.exec_command(command, timeout=timeout)
    out, err = stdout.read().decode(), stderr.read().decode()
    return stdout.channel.recv_exit_status(), out, err


@pytest.fixture
def ssh(lab):
    """`ssh(node, command)` over a fresh connection as gpuadmin; closed after the test."""
    clients: list[paramiko.SSHClient] = []

    def run(name: str, command: str, timeout: float = 60.0) -> tuple[int, str, str]:
        client = ssh_client(lab, name)
        clients.append(client)
        return ssh_run(client, command, timeout)

    yield run
    for client in clients:
        client.close()


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def lab_traces(paths: LabPaths) -> tuple[list[str], list[str]]:
    """Processes whose command line names the lab, and processes that see any mount of it
    (mountinfo of every process covers the nodes' own mount namespaces)."""
    root = str(paths.root)
    processes, mounts = [], []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            mountinfo = Path(f"/proc/{entry}/mountinfo").read_text()
        except OSError:
            continue
        if root in cmdline:
            processes.append(f"{entry}: {cmdline}")
        if root in mountinfo:
            mounts.append(entry)
    return processes, mounts
