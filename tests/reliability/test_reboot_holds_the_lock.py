"""Two applies on one host, the first ending in a reboot (issue 31, defect 2): the reboot keeps
the host's run lock until the host is down, and the waiting apply sees the reboot pending. It
waits for the new boot and installs the driver there, or, when the host does not come back
within its --lock-wait, fails saying so. No package transaction is started that the reboot
cuts: the node ends with a loaded driver and a clean `dpkg --audit`."""
from __future__ import annotations

import pytest

from tests.figures import inject_fault, record_fault
from tests.reliability.helpers import (
    finish,
    no_traceback,
    node_file,
    start,
    wait_for,
    write_inventory,
    write_playbook,
)

NODE = "t4-01"
DIR = "/var/tmp/gpuconf-rel/reboot-lock"
REBOOTING = f"""\
- hosts: all
  gather_facts: false
  tasks:
    - name: held here
      shell: {{cmd: "touch {DIR}/started; while [ ! -e {DIR}/release ]; do sleep 0.1; done", timeout: 120}}
    - name: reboot
      reboot: {{timeout: REBOOT_TIMEOUT}}
"""
DRIVER = f"""\
- hosts: all
  vars: {{nvidia_driver_branch: 580, nvidia_driver_version: "580.95.05"}}
  pre_tasks:
    - name: the boot it starts on
      shell: {{cmd: "cat /proc/sys/kernel/random/boot_id > {DIR}/driver-boot"}}
  roles: [nouveau, nvidia_driver, reboot]
"""
STACK = "One driver stack at the pinned version and flavour, held"


def lock_holders(lab) -> int:
    """gpuconf lock holders on the node: holding the run lock, or waiting for it."""
    _, out, _ = lab.exec(NODE, ["ps", "-eo", "comm=,args="])
    return sum(1 for line in out.splitlines()
               if line.startswith("python3") and "gpuconf.lock" in line and "fcntl.flock" in line)


@pytest.fixture
def node(lab):
    lab.exec(NODE, ["mkdir", "-p", DIR])
    yield NODE
    lab.fault(NODE, "clear")
    lab.reset(NODE)


def start_both(lab, tmp_path, reboot_timeout: int, lock_wait: str):
    """The rebooting apply, held in its first task; then the driver apply, waiting on its lock."""
    inventory = write_inventory(lab, tmp_path / "hosts.yml", [NODE])
    first = start("apply", write_playbook(tmp_path / "reboot.yml",
                                          REBOOTING.replace("REBOOT_TIMEOUT", str(reboot_timeout))),
                  inventory, "--lock-wait", "300")
    assert wait_for(lambda: node_file(lab, NODE, f"{DIR}/started") is not None, 60), "the first apply never started"
    second = start("apply", write_playbook(tmp_path / "driver.yml", DRIVER), inventory, "--lock-wait", lock_wait)
    assert wait_for(lambda: lock_holders(lab) >= 2, 60), "the second apply never waited on the lock"
    record_fault("concurrent-run")
    return first, second


def test_an_apply_waiting_on_a_rebooting_run_waits_for_the_new_boot_and_ends_with_a_loaded_driver(
        lab, tmp_path, node):
    first, second = start_both(lab, tmp_path, reboot_timeout=300, lock_wait="300")
    boot_before = node_file(lab, NODE, "/proc/sys/kernel/random/boot_id")
    try:
        lab.exec(NODE, ["touch", f"{DIR}/release"])
        rebooted = finish(*first, timeout=600)
        driver = finish(*second, timeout=600)
    finally:
        for proc, _ in (first, second):
            proc.kill()
            proc.wait()
    no_traceback(rebooted)
    no_traceback(driver)
    assert rebooted.code == 0, rebooted.stdout + rebooted.stderr
    assert rebooted.statuses(NODE) == {"held here": "changed", "reboot": "changed"}
    assert driver.code == 0, driver.stdout + driver.stderr
    assert driver.statuses(NODE)[STACK] == "changed"
    # the driver apply began only once the first run's reboot was done
    assert node_file(lab, NODE, f"{DIR}/driver-boot") not in (None, boot_before)
    # the driver is loaded, from a package dpkg finished configuring
    version = node_file(lab, NODE, "/proc/driver/nvidia/version")
    assert version is not None and "580.95.05" in version, version
    rc, audit, err = lab.exec(NODE, ["dpkg", "--audit"])
    assert rc == 0 and audit == "", audit + err
    _, status, _ = lab.exec(NODE, ["dpkg-query", "-W", "-f=${db:Status-Abbrev}", "nvidia-dkms-580-open"])
    assert status.strip() in ("ii", "hi"), status


def test_an_apply_waiting_on_a_reboot_that_never_comes_back_fails_saying_so(lab, tmp_path, node):
    inject_fault(lab, NODE, "reboot-hang")
    first, second = start_both(lab, tmp_path, reboot_timeout=10, lock_wait="20")
    try:
        lab.exec(NODE, ["touch", f"{DIR}/release"])
        rebooted = finish(*first, timeout=300)
        driver = finish(*second, timeout=300)
    finally:
        for proc, _ in (first, second):
            proc.kill()
            proc.wait()
    no_traceback(driver)
    assert rebooted.tasks(NODE)["reboot"]["status"] == "failed", rebooted.stdout
    assert driver.code & 4, driver.stdout + driver.stderr
    [connect] = driver.host(NODE)["tasks"]
    error = connect["error"]
    assert connect["status"] == "failed", connect
    assert f"{NODE}: a reboot started by another gpuconf run (gpuconf apply reboot.yml" in error, error
    assert "is pending" in error and "did not come back within 20 s (--lock-wait" in error, error
    assert "a reboot started by another gpuconf run" in driver.stdout
