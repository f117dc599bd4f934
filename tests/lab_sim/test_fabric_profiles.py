"""The NVLink-fabric profiles (h200, b200, gb200): PCI topology and ``nvidia-smi -q``'s Fabric
section, parsed with gpuconf's own parsers, against the layout of the real captures."""
from __future__ import annotations

import pytest

from gpuconf.facts.nvidia.fabricmanager import parse_fabric_manager_log
from gpuconf.facts.nvidia.query import parse_nvidia_smi_query
from gpuconf.facts.nvlink_fabric import NVSWITCH
from gpuconf.tasks.health.fabric_state import judge_fabric_state

DRIVER = "580.95.05"
ZERO = "00000000-0000-0000-0000-000000000000"


def booted_with_driver(make_node, profile: str, name: str = "node1"):
    node = make_node(profile, name=name)
    node.install_driver(DRIVER, open_modules=True)
    node.blacklist_nouveau()
    node.boot()
    return node


def fabric_of(node, *args: str) -> list:
    report = parse_nvidia_smi_query(node.smi("-q", *args, version=DRIVER).stdout)
    assert report.gpus and not any(g.errors for g in report.gpus)
    return [g.fabric for g in report.gpus]


@pytest.mark.parametrize("profile, name, gpus, switches", [
    ("h200", "NVIDIA H200", 8, 4), ("b200", "NVIDIA B200", 8, 2), ("gb200", "NVIDIA GB200", 4, 0)])
def test_profiles_show_their_gpus_and_nvswitch_bridges(make_node, profile, name, gpus, switches):
    node = booted_with_driver(make_node, profile)
    report = parse_nvidia_smi_query(node.smi("-q", version=DRIVER).stdout)
    assert [g.product_name for g in report.gpus] == [name] * gpus
    lspci = node.run("lspci", "-nn").stdout
    assert lspci.count("Bridge [0680]: NVIDIA") == switches, lspci


@pytest.mark.parametrize("profile", ["h200", "b200"])
def test_hgx_fabric_completes_only_once_fabric_manager_runs(make_node, profile):
    node = booted_with_driver(make_node, profile)
    before = fabric_of(node)
    assert {(f.state, f.status) for f in before} == {("In Progress", None)}
    node.install("nvidia-fabricmanager-580", DRIVER)
    if profile == "b200":   # NVLink5: what the fabricmanager role puts first
        node.run("kmod", "modprobe", "ib_umad", check=True)
        node.install("nvlsm", DRIVER)
    node.systemctl("start", "nvidia-fabricmanager", check=True)
    assert parse_fabric_manager_log(node.read("/var/log/fabricmanager.log")).state == "configured"
    after = fabric_of(node)
    # An HGX board is no multi-node domain: clique 0 and the all-zero UUID, as the H200 capture shows.
    assert {(f.state, f.status, f.clique_id, f.cluster_uuid) for f in after} == {("Completed", "Success", "0", ZERO)}


def test_gb200_trays_share_the_racks_domain_and_run_no_fabric_manager(make_node):
    first, second = (booted_with_driver(make_node, "gb200", name) for name in ("tray1", "tray2"))
    fabrics = fabric_of(first) + fabric_of(second)
    assert {(f.state, f.status, f.health_summary) for f in fabrics} == {("Completed", "Success", "Healthy")}
    assert len({f.cluster_uuid for f in fabrics}) == 1 and fabrics[0].cluster_uuid != ZERO
    assert all(f.clique_id not in (None, "0") for f in fabrics)
    first.install("nvidia-fabricmanager-580", DRIVER)
    assert first.systemctl("start", "nvidia-fabricmanager").returncode == 1
    assert "NV_WARN_NOTHING_TO_DO" in first.run("journalctl", "journalctl", "-u", "nvidia-fabricmanager").stdout


def test_fabric_stuck_in_progress_fault_names_its_gpu(make_node):
    node = booted_with_driver(make_node, "gb200")
    node.run("fault", "fabric-in-progress", "--gpu", "2", check=True)
    states = [(f.state, f.status) for f in fabric_of(node)]
    assert states[2] == ("In Progress", None) and states.count(("Completed", "Success")) == 3
    node.boot()
    assert fabric_of(node, "-i", "2")[0].state == "In Progress"   # hardware: it survives a reboot
    node.run("fault", "clear", "fabric-in-progress", check=True)
    assert fabric_of(node, "-i", "2")[0].state == "Completed"


@pytest.mark.parametrize("driver, health", [
    ("535.104.05", None),
    ("570.195.03", ["Bandwidth", "Route Recovery in progress", "Route Unhealthy", "Access Timeout Recovery"]),
    ("580.95.05", ["Summary", "Bandwidth", "Route Recovery in progress", "Route Unhealthy",
                   "Access Timeout Recovery", "Incorrect Configuration"])])
def test_fabric_section_layout_follows_the_branch(make_node, driver, health):
    node = make_node("h200", driver=driver) if driver.startswith("535") else make_node("h200")
    if not driver.startswith("535"):
        node.install_driver(driver, open_modules=True)
        node.blacklist_nouveau()
        node.boot()
    text = node.smi("-q", "-i", "0", version=driver).stdout
    block = text.split("    Fabric\n", 1)[1].split("\n    Processes", 1)[0].splitlines()
    keys = [line.split(":")[0].strip() for line in block]
    if health is None:
        assert keys == ["State", "Status"]
    else:
        assert keys == ["State", "Status", "CliqueId", "ClusterUUID", "Health", *health]


def test_nvlink5_fabric_manager_needs_ib_umad_then_nvlsm(make_node):
    node = booted_with_driver(make_node, "b200")
    node.install("nvidia-fabricmanager-580", DRIVER)
    assert node.systemctl("start", "nvidia-fabricmanager").returncode == 1
    journal = node.run("journalctl", "journalctl", "-u", "nvidia-fabricmanager").stdout
    assert 'Kernel module "ib_umad" has not been loaded, fabric manager cannot be started' in journal
    node.run("kmod", "modprobe", "ib_umad", check=True)
    assert node.systemctl("start", "nvidia-fabricmanager").returncode == 1
    assert "NV_WARN_NOTHING_TO_DO" in node.run("journalctl", "journalctl", "-u", "nvidia-fabricmanager").stdout
    assert {f.state for f in fabric_of(node)} == {"In Progress"}
    node.install("nvlsm", DRIVER)
    node.install("libnvsdm-580", DRIVER)
    node.systemctl("start", "nvidia-fabricmanager", check=True)
    assert {(f.state, f.status) for f in fabric_of(node)} == {("Completed", "Success")}


def test_the_probe_passes_an_hgx_a100_and_fails_an_h200_without_fabric_manager(make_node):
    a100, h200 = booted_with_driver(make_node, "a100", "a100"), booted_with_driver(make_node, "h200", "h200")
    a100_report = parse_nvidia_smi_query(a100.smi("-q", version=DRIVER).stdout)
    assert all(f.severity == "ok" for f in judge_fabric_state(a100_report, NVSWITCH))
    h200_report = parse_nvidia_smi_query(h200.smi("-q", version=DRIVER).stdout)
    failed = judge_fabric_state(h200_report, NVSWITCH)
    assert len(failed) == 8 and all(f.severity == "failure" and "In Progress" in f.message for f in failed)
