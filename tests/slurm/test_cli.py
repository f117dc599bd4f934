"""`gpuconf lab up --slurm`, `lab slurm -- ...` and `lab down` leaving no Slurm daemon behind."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gpuconf_lab.runtime import LabPaths, read_pid
from tests.lab.test_cli import cli
from tests.lab.test_cli import subreaper as subreaper  # the fixture, used by name
from tests.lab_fixtures import lab_traces, slurm_unavailable

NAME = "labclislurm"
DAEMONS = {"slurmctld", "slurmd", "munged"}


def lab_daemons(paths: LabPaths) -> list[tuple[int, str]]:
    """(pid, name) of every Slurm or munge daemon on the machine that sees this lab's mounts:
    the controller's namespace and every node's."""
    _, seeing = lab_traces(paths)
    found = []
    for pid in seeing:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if name in DAEMONS:
            found.append((int(pid), name))
    return found


@pytest.mark.usefixtures("subreaper")
def test_up_slurm_runs_client_commands_and_down_leaves_no_daemon():
    why = slurm_unavailable()
    if why:
        pytest.skip(why)
    paths = LabPaths(NAME)
    cli("down", "--name", NAME)
    up = cli("up", "--name", NAME, "--profile", "t4", "--nodes", "2", "--slurm", "--slurm-conf",
             "HealthCheckNodeState=IDLE")
    try:
        assert up.returncode == 0, up.stderr
        sinfo = cli("slurm", "--name", NAME, "--", "sinfo", "--noheader", "-N", "-o", "%N %T")
        assert (sinfo.returncode, sinfo.stdout) == (0, "t4-01 idle\nt4-02 idle\n"), sinfo.stderr
        config = cli("slurm", "--name", NAME, "--", "scontrol", "show", "config")
        assert re.search(r"^HealthCheckNodeState\s*=\s*IDLE$", config.stdout, re.M), config.stdout
        missing = cli("slurm", "--name", NAME, "--", "scontrol", "show", "node", "t4-99")
        assert missing.returncode == 1 and "Node t4-99 not found" in missing.stdout + missing.stderr
        # slurmctld and munged for the controller; munged and slurmd in each node (at least: a
        # daemon may have a short-lived child of its own name at any moment)
        daemons = [name for _, name in lab_daemons(paths)]
        assert {name: daemons.count(name) >= wanted for name, wanted in
                (("slurmctld", 1), ("munged", 3), ("slurmd", 2))} == dict.fromkeys(DAEMONS, True), daemons
        pids = [pid for pid, _ in lab_daemons(paths)]
        launcher = read_pid(paths.root / "slurm" / "launcher.pid")
    finally:
        down = cli("down", "--name", NAME)
    assert down.returncode == 0, down.stderr
    for pid in [launcher, *pids]:
        try:
            os.waitpid(pid, 0)   # the launcher is orphaned to us; the rest are reaped in their namespaces
        except ChildProcessError:
            pass
        assert not Path(f"/proc/{pid}").exists()
    assert lab_daemons(paths) == []
    assert lab_traces(paths) == ([], [])
    assert not paths.root.exists()
