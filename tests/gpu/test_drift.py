"""Acceptance 3: drift made on a converged lab node is found by check and repaired by apply.

Each scenario breaks one thing the way it breaks on a real node (with the node's own tools, or
a lab fault), then: check exits 2 naming the drifted task and leaves the node byte for byte
unchanged (Converged.checked compares the overlay digests), apply exits 0, and a second check
exits 0. Each leaves its node converged again for the next.
"""
from __future__ import annotations

import json

from tests.gpu.conftest import USER_DAEMON_JSON
from tests.lab_fixtures import wait_until


def drifted(run, host: str) -> dict[str, str]:
    return {t["task"]: t["message"] for t in run.host_tasks(host) if t["status"] == "would_change"}


def detect_and_repair(converged, profile: str, host: str, tasks: set[str]) -> dict[str, str]:
    """The drift report of `host` (task -> message), after asserting check/apply/check."""
    check = converged.checked(profile, "--limit", host)
    assert check.rc == 2, check.stdout[-3000:] + check.stderr
    found = drifted(check, host)
    assert tasks <= set(found), f"drift not reported for {tasks - set(found)}: {found}"
    apply = converged.run("apply", profile, "--limit", host)
    assert apply.rc == 0, apply.stdout[-3000:] + apply.stderr
    final = converged.checked(profile, "--limit", host)
    assert final.rc == 0, final.stdout[-3000:]
    return found


def sh(converged, host: str, command: str) -> str:
    rc, out, err = converged.lab.exec(host, command, timeout=300)
    assert rc == 0, f"{command}: {out}{err}"
    return out


def reboot(converged, host: str) -> None:
    lab = converged.lab
    boots = lab.node_state(host)["boots"]
    lab.reboot(host)
    assert wait_until(lambda: lab.node_state(host).get("boots") == boots + 1
                      and lab.node_state(host).get("state") == "up", timeout=60)
    lab.wait_ssh(host, 60)


def test_a_kernel_upgrade_without_a_dkms_build(converged):
    rc, out, err = converged.lab.fault("t4-01", "kernel-upgrade", "6.1.0-21-amd64")
    assert rc == 0, out + err
    reboot(converged, "t4-01")
    assert sh(converged, "t4-01", "uname -r").strip() == "6.1.0-21-amd64"
    assert "6.1.0-21-amd64" not in sh(converged, "t4-01", "dkms status")
    found = detect_and_repair(converged, "t4", "t4-01", {"DKMS module built for every installed kernel"})
    assert "6.1.0-21-amd64" in found["DKMS module built for every installed kernel"]
    assert "nvidia/580.178.04, 6.1.0-21-amd64, x86_64: installed" in sh(converged, "t4-01", "dkms status")
    assert sh(converged, "t4-01", "cat /sys/module/nvidia/version").strip() == "580.178.04"


def test_apt_get_install_cuda_is_blocked_by_the_pin(converged):
    before = sh(converged, "t4-01", "dpkg-query -W 'cuda-toolkit-*'")
    rc, out, err = converged.lab.exec("t4-01", "DEBIAN_FRONTEND=noninteractive apt-get install -y cuda",
                                      timeout=300)
    assert rc != 0, "apt-get install cuda went through the pin:\n" + out
    assert sh(converged, "t4-01", "dpkg-query -W 'cuda-toolkit-*'") == before
    check = converged.checked("t4", "--limit", "t4-01")
    assert check.rc == 0, check.stdout[-3000:]


def test_fabric_manager_stopped(converged):
    sh(converged, "a100-02", "systemctl stop nvidia-fabricmanager")
    found = detect_and_repair(converged, "a100", "a100-02", {"Fabric manager enabled and active"})
    assert "inactive" in found["Fabric manager enabled and active"]
    assert sh(converged, "a100-02", "systemctl is-active nvidia-fabricmanager").strip() == "active"


def test_fabric_manager_at_a_mismatched_version(converged):
    sh(converged, "a100-02", "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "
                             "--allow-change-held-packages nvidia-fabricmanager-580=580.105.08-1")
    task = "Fabric manager at the driver's version, held"
    found = detect_and_repair(converged, "a100", "a100-02", {task})
    assert "580.105.08" in found[task] and "580.178.04" in found[task], found[task]
    assert sh(converged, "a100-02", "dpkg-query -W -f '${Version}' nvidia-fabricmanager-580") == "580.178.04-1"


def test_persistenced_disabled_then_a_reboot(converged):
    sh(converged, "t4-01", "systemctl disable --now nvidia-persistenced")
    reboot(converged, "t4-01")
    modes = sh(converged, "t4-01", "nvidia-smi --query-gpu=persistence_mode --format=csv,noheader")
    assert set(modes.split()) == {"Disabled"}, modes
    detect_and_repair(converged, "t4", "t4-01", {
        "nvidia-persistenced enabled and running, so persistence survives reboots",
        "Persistence mode on every GPU now"})
    modes = sh(converged, "t4-01", "nvidia-smi --query-gpu=persistence_mode --format=csv,noheader")
    assert set(modes.split()) == {"Enabled"}, modes


def test_daemon_json_edited_by_hand(converged):
    edited = dict(USER_DAEMON_JSON, debug=True)   # the nvidia runtime gone, one more key of the user's
    converged.lab.exec("t4-01", "cat > /etc/docker/daemon.json", input=json.dumps(edited, indent=2))
    detect_and_repair(converged, "t4", "t4-01", {"Docker has the nvidia runtime (merged, other keys kept)"})
    config = json.loads(sh(converged, "t4-01", "cat /etc/docker/daemon.json"))
    assert {k: config[k] for k in edited} == edited
    assert config["default-runtime"] == "nvidia" and "nvidia" in config["runtimes"]
    assert "nvidia" in sh(converged, "t4-01", "docker info")   # the handler restarted docker


def test_the_initramfs_rebuilt_without_the_blacklist(converged):
    sh(converged, "t4-01", "rm /etc/modprobe.d/blacklist-nouveau.conf && update-initramfs -u")
    release = sh(converged, "t4-01", "uname -r").strip()
    assert "blacklist-nouveau.conf" not in sh(converged, "t4-01", f"lsinitramfs /boot/initrd.img-{release}")
    detect_and_repair(converged, "t4", "t4-01", {"Blacklist nouveau", "Initramfs carries the blacklist"})
    assert "etc/modprobe.d/blacklist-nouveau.conf" in \
        sh(converged, "t4-01", f"lsinitramfs /boot/initrd.img-{release}").split()


def test_an_infiniband_module_unloaded(converged):
    sh(converged, "a100-02", "modprobe -r rdma_ucm")
    task = "InfiniBand module loaded now and at boot (item=rdma_ucm)"  # the role loops over infiniband_modules
    found = detect_and_repair(converged, "a100", "a100-02", {task})
    assert "not loaded" in found[task]
    assert "rdma_ucm" in sh(converged, "a100-02", "lsmod").split()
