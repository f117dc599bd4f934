"""An EL 9 lab node over SSH: the real dnf and rpm install NVIDIA's module stream, DKMS builds it,
the simulated driver loads after a reboot, versionlock holds it, a kernel upgrade breaks it.

The tests run in file order on one node (the session's EL 9 lab) and share its state; the node
is reset at the end of the module.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuconf_lab.digest import list_tree
from gpuconf_lab.sim.catalog import EL_DEFAULT_KERNEL, EL_UPGRADE_KERNEL
from tests.lab_fixtures import EL9_NODE, ssh_client, ssh_run, wait_until

DRIVER = "580.95.05"
LOCKED = ("nvidia-open", "nvidia-driver", "nvidia-driver-cuda", "nvidia-driver-cuda-libs", "nvidia-kmod-common",
          "kmod-nvidia-open-dkms", "cuda", "cuda-toolkit-12-8")
# Reads a check may make: rpm, the module and lock files, and dnf as root from the cache with its logs
# in /run (dnf as root always appends to /var/log/dnf*.log, as on a real host; docs/lab-runtime.md).
READS = ("rpm -qa >/dev/null", "sudo -n rpm -q kernel-core >/dev/null",
         "rpm -q --qf '%{EPOCH}:%{VERSION}-%{RELEASE}\\n' nvidia-open || true",
         "cat /etc/dnf/modules.d/*.module /etc/dnf/plugins/versionlock.list >/dev/null 2>&1 || true",
         "sudo -n dnf -C -q --setopt=logdir=/run/gpuconf-dnf module list nvidia-driver >/dev/null",
         "sudo -n dnf -C -q --setopt=logdir=/run/gpuconf-dnf list --installed >/dev/null",
         "sudo -n dnf -C -q --setopt=logdir=/run/gpuconf-dnf versionlock list >/dev/null",
         "sudo -n dnf -C -q --setopt=logdir=/run/gpuconf-dnf list --showduplicates --available nvidia-open >/dev/null")


@pytest.fixture(scope="module")
def node(el9_lab):
    """(lab, run): `run(command)` over SSH as gpuadmin; the node is reset after the module."""
    clients = []

    def run(command: str, timeout: float = 120.0) -> tuple[int, str, str]:
        if not clients:
            clients.append(ssh_client(el9_lab, EL9_NODE))
        return ssh_run(clients[0], command, timeout)

    def reboot() -> None:
        boots = el9_lab.node_state(EL9_NODE)["boots"]
        while clients:
            clients.pop().close()
        el9_lab.reboot(EL9_NODE)
        assert wait_until(lambda: el9_lab.node_state(EL9_NODE).get("boots") == boots + 1
                          and el9_lab.node_state(EL9_NODE).get("state") == "up", timeout=30)
        el9_lab.wait_ssh(EL9_NODE, timeout=30)

    run.reboot = reboot
    yield el9_lab, run
    while clients:
        clients.pop().close()
    el9_lab.reset(EL9_NODE)


def ok(result: tuple[int, str, str]) -> str:
    rc, out, err = result
    assert rc == 0, f"exit {rc}\n{out[-2000:]}\n{err[-2000:]}"
    return out


def test_the_node_is_rocky_9_with_its_own_rpm_database(node):
    lab, run = node
    out = ok(run(". /etc/os-release; echo $ID $VERSION_ID $PLATFORM_ID; cat /etc/redhat-release; uname -r; "
                 "test ! -e /etc/debian_version && echo no-debian_version"))
    assert out.splitlines() == ["rocky 9.4 platform:el9", "Rocky Linux release 9.4 (Blue Onyx)", EL_DEFAULT_KERNEL,
                                "no-debian_version"]
    assert ok(run("rpm -q kernel-core")).strip() == f"kernel-core-{EL_DEFAULT_KERNEL}"
    assert run("rpm -q nvidia-open")[0] == 1
    assert run("apt-cache policy nvidia-driver-535 | grep -c Candidate || true")[1].strip() in ("", "0")
    inventory = lab.inventory_path.read_text()
    assert "el9:" in inventory and "lab_os: el9" in inventory


def test_reads_write_nothing_and_the_digest_sees_dnf_logging(node):
    lab, run = node
    upper, lowers = lab.node(EL9_NODE).upper, [*lab.paths.lowers("el9"), Path("/")]
    before, entries = lab.digest(EL9_NODE), set(list_tree(upper, lowers))
    for command in READS:
        ok(run(command))
    changed = sorted(line.split("\0")[0] for line in entries ^ set(list_tree(upper, lowers)))
    assert lab.digest(EL9_NODE) == before, f"written: {changed}"
    ok(run("sudo -n dnf -C -q module list nvidia-driver >/dev/null"))   # logs to /var/log: a write
    assert lab.digest(EL9_NODE) != before


def test_dnf_installs_the_module_stream_and_dkms_builds_it(node):
    _, run = node
    ok(run("sudo dnf -y module enable nvidia-driver:580-open"))
    ok(run(f"sudo dnf -y install nvidia-open-3:{DRIVER}-1.el9"))
    assert ok(run("rpm -q --qf '%{NAME} %{EPOCH}:%{VERSION}-%{RELEASE}\\n' nvidia-open kmod-nvidia-open-dkms "
                  "nvidia-driver-cuda")).splitlines() == [
        f"nvidia-open 3:{DRIVER}-1.el9", f"kmod-nvidia-open-dkms 3:{DRIVER}-1.el9", f"nvidia-driver-cuda 3:{DRIVER}-1.el9"]
    assert "state=enabled" in ok(run("cat /etc/dnf/modules.d/nvidia-driver.module"))
    assert ok(run("sudo dkms status")).strip() == f"nvidia/{DRIVER}, {EL_DEFAULT_KERNEL}, x86_64: installed"
    assert ok(run(f"test -d /usr/src/nvidia-{DRIVER}/kernel-open && echo yes")).strip() == "yes"
    assert "rd.driver.blacklist=nouveau" in ok(run("sudo grubby --info=DEFAULT"))   # nvidia-kmod-common's %post
    assert run("lsmod | grep -q '^nvidia '")[0] == 1   # not before the reboot
    run.reboot()
    assert ok(run("lsmod")).count("\nnvidia ") == 1 and "nouveau" not in ok(run("lsmod"))
    assert ok(run("nvidia-smi --query-gpu=driver_version --format=csv,noheader")).split() == [DRIVER] * 8
    assert "rd.driver.blacklist=nouveau" in ok(run("cat /proc/cmdline"))


def test_versionlock_holds_the_driver_and_cuda(node):
    _, run = node
    ok(run("sudo dnf -y install cuda-12.8.1-1"))
    ok(run("sudo dnf -q versionlock add " + " ".join(LOCKED)))
    assert f"nvidia-open-3:{DRIVER}-1.el9.*" in ok(run("cat /etc/dnf/plugins/versionlock.list"))
    unlocked = ok(run("sudo dnf -C -q --setopt=logdir=/run/gpuconf-dnf --disableplugin=versionlock list --upgrades"))
    assert "nvidia-open.x86_64" in unlocked and "cuda.x86_64" in unlocked   # what the lock is holding back
    ok(run("sudo dnf -y install cuda"))
    ok(run("sudo dnf -y upgrade"))
    assert ok(run("rpm -q nvidia-open cuda")).split() == [f"nvidia-open-{DRIVER}-1.el9.x86_64", "cuda-12.8.1-1.x86_64"]
    assert ok(run("readlink -f /usr/local/cuda")).strip() == "/usr/local/cuda-12.8"
    lab = node[0]
    before = lab.digest(EL9_NODE)   # right after transactions, the same reads still write nothing
    for command in READS:
        ok(run(command))
    assert lab.digest(EL9_NODE) == before


def test_a_kernel_upgrade_needs_dkms_for_the_new_kernel(node):
    lab, run = node
    rc, out, _ = lab.fault(EL9_NODE, "kernel-upgrade")
    assert rc == 0 and EL_UPGRADE_KERNEL in out
    assert f"kernel-core-{EL_UPGRADE_KERNEL}" in ok(run("rpm -q kernel-core"))
    assert ok(run("sudo grubby --default-kernel")).strip() == f"/boot/vmlinuz-{EL_UPGRADE_KERNEL}"
    run.reboot()
    assert ok(run("uname -r")).strip() == EL_UPGRADE_KERNEL
    assert "\nnvidia " not in ok(run("lsmod")) and EL_UPGRADE_KERNEL not in ok(run("sudo dkms status"))
    ok(run(f"sudo dkms autoinstall -k {EL_UPGRADE_KERNEL}"))
    ok(run("sudo dracut -f"))
    assert "usr/lib/modprobe.d/nvidia.conf" in ok(run("sudo lsinitrd"))
    run.reboot()
    assert ok(run("nvidia-smi --query-gpu=driver_version --format=csv,noheader")).split()[0] == DRIVER
    assert json.loads(ok(run("cat /etc/gpuconf-lab/node.json")))["os"] == "el9"
