"""The dpkg lock held by another process (`dpkg-lock`: an unattended-upgrade holding it, as apt
would): the package task waits `lock_timeout`, then fails naming the holder's PID; the holder is
left alone, and the other hosts finish."""
from __future__ import annotations

import pytest

from tests.figures import inject_fault
from tests.reliability.helpers import gpuconf, no_traceback, node_file, write_inventory, write_playbook

HOLDER_PID_FILE = "/run/gpuconf-lab/faults-dpkg-lock.pid"
MARKER = "/var/tmp/gpuconf-rel/dpkg-lock-marker"
PLAYBOOK = f"""\
- hosts: all
  gather_facts: false
  tasks:
    - name: marker
      file: {{path: {MARKER}, content: "here\\n"}}
    - name: dkms installed
      package: {{name: dkms, lock_timeout: 3}}
      when: inventory_hostname == 't4-01'
    - name: after the package
      file: {{path: {MARKER}-after, content: "after\\n"}}
"""


def installed(lab, node: str, package: str) -> bool:
    rc, out, _ = lab.exec(node, ["dpkg-query", "-W", "-f=${db:Status-Abbrev}", package])
    return rc == 0 and out.startswith("ii")


def alive(lab, node: str, pid: str) -> bool:
    return lab.exec(node, ["kill", "-0", pid])[0] == 0


@pytest.fixture
def locked_t4(lab):
    """t4-01 with its dpkg locks held; a fresh node again afterwards (the lock holder gone with it)."""
    assert not installed(lab, "t4-01", "dkms")
    for node in ("t4-01", "a100-01"):
        lab.exec(node, ["mkdir", "-p", "/var/tmp/gpuconf-rel"])
    rc, out, err = inject_fault(lab, "t4-01", "dpkg-lock")
    assert rc == 0, out + err
    pid = (node_file(lab, "t4-01", HOLDER_PID_FILE) or "").strip()
    assert pid.isdigit(), "the fault wrote no holder PID"
    yield pid
    lab.reset("t4-01")
    lab.exec("a100-01", ["rm", "-rf", "/var/tmp/gpuconf-rel"])


def test_a_held_dpkg_lock_fails_the_package_task_naming_the_holder_and_leaves_it_running(lab, tmp_path, locked_t4):
    holder = locked_t4
    inventory = write_inventory(lab, tmp_path / "hosts.yml", ["t4-01", "a100-01"])
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    run = gpuconf("apply", playbook, inventory)
    no_traceback(run)
    assert run.code == 4, run.stdout + run.stderr
    assert "dkms installed" in run.tasks("t4-01"), run.stdout
    task = run.tasks("t4-01")["dkms installed"]
    assert task["status"] == "failed", task
    error = task["error"]
    assert f"held by process {holder} (unattended-upgr)" in error, error
    assert "waited 3 s (lock_timeout)" in error and "left it alone" in error, error
    assert "after the package" not in run.statuses("t4-01")   # a failed task stops that host's play
    assert not installed(lab, "t4-01", "dkms")
    for node in ("t4-01", "a100-01"):
        lab.exec(node, ["mkdir", "-p", "/var/tmp/gpuconf-rel"])
    assert alive(lab, "t4-01", holder), "gpuconf killed the lock holder"
    # the other host finished its play
    assert run.statuses("a100-01") == {"marker": "changed", "dkms installed": "skipped",
                                       "after the package": "changed"}
    assert node_file(lab, "a100-01", f"{MARKER}-after") == "after\n"
    assert "t4-01" in run.stdout and f"process {holder}" in run.stdout

    # once the holder has gone, the same run converges: the lock was the only thing in the way
    lab.fault("t4-01", "clear", "dpkg-lock")
    assert not alive(lab, "t4-01", holder)
    again = gpuconf("apply", playbook, inventory, "--limit", "t4-01")
    no_traceback(again)
    assert again.code == 0, again.stdout + again.stderr
    assert again.statuses("t4-01")["dkms installed"] == "changed"
    assert installed(lab, "t4-01", "dkms")
