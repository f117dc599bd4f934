"""`gpuconf lab` on the command line, and `lab down` leaving nothing behind."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuconf_lab.runtime import LabPaths, read_pid
from tests.lab_fixtures import lab_traces, lab_unavailable

PROJECT = Path(__file__).resolve().parents[2]
PR_SET_CHILD_SUBREAPER = 36
NAME = "labclitest"


def cli(*args: str, cwd: Path = PROJECT, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PROJECT), str(PROJECT / "lab")]))
    return subprocess.run([*prefix, sys.executable, "-m", "gpuconf_lab", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def subreaper():
    """Orphans (the launchers, once `lab up` has exited) become ours, as under a reaping init."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def test_up_status_exec_down_from_the_command_line_leaves_nothing_behind(tmp_path, subreaper):
    why = lab_unavailable()
    if why:
        pytest.skip(why)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "sub").mkdir()
    paths = LabPaths(NAME)
    cli("down", "--name", NAME)

    up = cli("up", "--name", NAME, "--profile", "t4", "--nodes", "1", cwd=tmp_path / "sub")
    assert up.returncode == 0, up.stderr
    inventory = tmp_path / "inventories" / NAME / "hosts.yml"   # in the project root above the cwd
    assert inventory.is_file() and "t4-01:" in inventory.read_text()
    status = cli("status", "--name", NAME)
    assert status.returncode == 0 and status.stdout.splitlines()[1].split()[:5] == [
        "t4-01", "t4", "127.77." + status.stdout.split("127.77.")[1].split()[0], "up", "up"]
    assert cli("exec", "--name", NAME, "t4-01", "--", "sh", "-c", "exit 3").returncode == 3
    assert cli("exec", "--name", NAME, "t4-01", "--", "hostname").stdout == "t4-01\n"

    node = paths.node("t4-01")
    pids = [read_pid(node.launcher_pid_file), read_pid(node.pid_file)]
    processes, mounts = lab_traces(paths)
    assert processes and mounts and all(pids)   # the check below can see a running lab

    down = cli("down", "--name", NAME)
    assert down.returncode == 0, down.stderr
    for pid in pids:
        try:
            os.waitpid(pid, 0)   # the launcher was orphaned to us; PID 1 was reaped by it
        except ChildProcessError:
            pass
        assert not Path(f"/proc/{pid}").exists()
    assert lab_traces(paths) == ([], [])
    assert not paths.root.exists()
    assert not inventory.parent.exists()


def test_up_refuses_without_root_in_one_clear_line():
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("needs root to become an unprivileged user")
    result = cli("up", "--name", "labnobody", prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "gpuconf lab: error: gpuconf lab up needs root (it mounts overlays and creates namespaces): run it with sudo"]


def test_up_refuses_a_lab_that_is_already_up(lab):
    result = cli("up", "--name", lab.name)
    assert result.returncode == 1
    assert f"lab '{lab.name}' is already up" in result.stderr


def test_a_command_for_a_lab_that_is_not_up_names_the_labs_that_are(lab):
    result = cli("status", "--name", "labnothere")
    assert result.returncode == 1 and lab.name in result.stderr
