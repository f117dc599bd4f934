"""Acceptance 2: the converged end state, seen by testinfra over SSH into each lab node.

Nothing here asks gpuconf: each fact is read the way an operator would read it, with the node's
own tools (dpkg, apt-mark, lsmod, nvidia-smi, systemctl, sysfs, nvcc, a login shell).
"""
from __future__ import annotations

import json

import pytest
import testinfra

from tests.gpu.conftest import USER_DAEMON_JSON
from tests.lab_fixtures import wait_until

PINS = {  # profile -> (driver branch, driver version, CUDA release, toolkit package version)
    "a100": ("580", "580.178.04", "13.0", "13.0.2-1"),
    "h100": ("580", "580.178.04", "13.0", "13.0.2-1"),
    "t4": ("580", "580.178.04", "13.0", "13.0.2-1"),
}
NVSWITCH = {"a100", "h100"}
NODES = [("a100", "a100-01"), ("a100", "a100-02"), ("h100", "h100-01"), ("t4", "t4-01")]


def connect(converged, node: str, sudo: bool = True):
    config = converged.lab.paths.ssh_config
    # the ssh backend runs OpenSSH with the lab's config: its pinned known_hosts, StrictHostKeyChecking yes
    return testinfra.get_host(f"ssh://{node}", ssh_config=str(config), sudo=sudo)


@pytest.fixture(params=NODES, ids=[n for _, n in NODES])
def node(request, converged):
    profile, name = request.param
    return profile, name, connect(converged, name)


def test_packages_at_the_pinned_versions_and_held(node):
    profile, _name, host = node
    branch, version, cuda, toolkit = PINS[profile]
    exact = f"{version}-1"
    pinned = {f"nvidia-kernel-common-{branch}": exact, f"nvidia-dkms-{branch}-open": exact,  # auto: open on 580
              f"libnvidia-compute-{branch}": exact, f"nvidia-utils-{branch}": exact,
              "nvidia-persistenced": exact, f"cuda-toolkit-{cuda.replace('.', '-')}": toolkit,
              "nvidia-container-toolkit": "1.20.0-1"}
    if profile in NVSWITCH:
        pinned[f"nvidia-fabricmanager-{branch}"] = exact
        pinned[f"libnvidia-nscq-{branch}"] = exact
    held = set(host.check_output("apt-mark showhold").split())
    for package, want in pinned.items():
        assert host.package(package).is_installed, package
        assert host.package(package).version == want, (package, host.package(package).version)
        assert package in held, f"{package} is not held ({sorted(held)})"
    listing = host.check_output("dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\\n' '*nvidia*'")
    versions = {line.split()[2] for line in listing.splitlines()
                if line[1] == "i" and not line.split()[1].startswith("nvidia-container-toolkit")}
    assert versions == {exact}, listing   # every driver package, companions included, at one version


def test_the_blacklist_is_in_the_initramfs_and_nouveau_is_not_loaded(node):
    _profile, _name, host = node
    release = host.check_output("uname -r")
    listing = host.check_output(f"lsinitramfs /boot/initrd.img-{release}")
    assert "etc/modprobe.d/blacklist-nouveau.conf" in listing.split()
    inside = host.check_output(f"zcat /boot/initrd.img-{release} | cpio -i --to-stdout --quiet "
                               "etc/modprobe.d/blacklist-nouveau.conf")
    assert "blacklist nouveau" in inside and "options nouveau modeset=0" in inside
    modules = [line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]]
    assert "nouveau" not in modules and "nvidia" in modules


def test_the_nvidia_module_is_loaded_at_the_pinned_version(node):
    profile, _name, host = node
    version = PINS[profile][1]
    banner = host.file("/proc/driver/nvidia/version").content_string
    assert f"  {version}  " in banner and "Open Kernel Module" in banner
    assert host.check_output("/sbin/modinfo -F license nvidia") == "Dual MIT/GPL"
    assert host.file("/sys/module/nvidia/version").content_string.strip() == version
    assert host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader").split() == \
        [version] * len(host.check_output("nvidia-smi -L").splitlines())


def test_the_dkms_module_is_built_for_the_running_kernel(node):
    profile, _name, host = node
    release, version = host.check_output("uname -r"), PINS[profile][1]
    assert f"nvidia/{version}, {release}, x86_64: installed" in host.check_output("dkms status")


def test_nvcc_shows_the_pinned_release(node):
    profile, _name, host = node
    cuda = PINS[profile][2]
    output = host.check_output(f"/usr/local/cuda-{cuda}/bin/nvcc --version")
    assert f"release {cuda}," in output


def test_a_login_shell_has_lib64_on_ld_library_path(node, converged):
    profile, name, _host = node
    cuda = PINS[profile][2]
    user = connect(converged, name, sudo=False)   # the admin's own login shell, not root's
    path = user.check_output("bash -lc 'echo \"$LD_LIBRARY_PATH\"'").split(":")
    assert f"/usr/local/cuda-{cuda}/lib64" in path
    assert f"/usr/local/cuda-{cuda}/bin" in user.check_output("bash -lc 'echo \"$PATH\"'").split(":")
    assert "libcudart.so" in user.check_output("/sbin/ldconfig -p")


def test_services_running_and_enabled(node):
    profile, _name, host = node
    units = ["nvidia-persistenced", "docker"] + (["nvidia-fabricmanager"] if profile in NVSWITCH else [])
    for unit in units:
        assert host.service(unit).is_running, unit
        assert host.service(unit).is_enabled, unit


def test_infiniband_ports_are_active(node):
    profile, _name, host = node
    if profile not in NVSWITCH:   # no HCA, and the T4 play loads no RDMA module
        assert not host.file("/sys/class/infiniband").exists
        assert not host.file("/etc/modules-load.d/ib_umad.conf").exists
        return
    states = host.check_output("cat /sys/class/infiniband/*/ports/*/state").splitlines()
    assert states and all(s == "4: ACTIVE" for s in states), states
    modules = {line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]}
    assert {"ib_uverbs", "ib_umad", "mlx5_ib", "rdma_ucm"} <= modules
    for module in ("ib_uverbs", "ib_umad", "mlx5_ib", "rdma_ucm"):
        assert host.file(f"/etc/modules-load.d/{module}.conf").content_string.split() == [module]


def test_daemon_json_keeps_the_users_keys(node):
    _profile, _name, host = node
    config = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert {k: config[k] for k in USER_DAEMON_JSON} == USER_DAEMON_JSON
    assert config["default-runtime"] == "nvidia"
    assert config["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"


def persistence_modes(host) -> list[str]:
    return host.check_output("nvidia-smi --query-gpu=persistence_mode --format=csv,noheader").splitlines()


def test_persistence_mode_is_enabled_and_survives_another_reboot(converged):
    for _profile, name in NODES:
        host = connect(converged, name)
        before = persistence_modes(host)
        assert before and set(before) == {"Enabled"}, (name, before)
    name, lab = "t4-01", converged.lab
    boot_id, boots = lab.exec(name, "cat /proc/sys/kernel/random/boot_id")[1], lab.node_state(name)["boots"]
    lab.reboot(name)
    assert wait_until(lambda: lab.node_state(name).get("boots") == boots + 1
                      and lab.node_state(name).get("state") == "up", timeout=60)
    lab.wait_ssh(name, 60)
    assert lab.exec(name, "cat /proc/sys/kernel/random/boot_id")[1] != boot_id
    after = persistence_modes(connect(converged, name))
    assert after and set(after) == {"Enabled"}, after
