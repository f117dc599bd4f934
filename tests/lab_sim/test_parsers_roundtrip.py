"""Simulated output read by gpuconf's fact parsers, for the formats the other tests do not cover.

Each assertion is what a task or health probe would conclude from the text, so a format drift
in a simulator (or a parser that only works on one capture) fails here.
"""
from __future__ import annotations

from gpuconf.facts.infiniband_sysfs import parse_sysfs_infiniband_files
from gpuconf.facts.kernel_log import find_nouveau
from gpuconf.facts.nvidia.driver import parse_modinfo_version, parse_nvcc_version
from gpuconf.facts.nvidia.fabricmanager import VERSION_MISMATCH, find_version_mismatch, parse_fabric_manager_log
from gpuconf.facts.systemd import parse_list_units, parse_systemctl_show


def test_dmesg_shows_nouveau_on_a_fresh_node_and_the_probe_conflict(node):
    evidence = find_nouveau(node.run("journalctl", "dmesg").stdout)
    assert evidence.lines and evidence.chipset == "GA100" and not evidence.nvidia_probe_conflict
    node.install_driver()
    node.run("kmod", "modprobe", "nvidia")
    evidence = find_nouveau(node.run("journalctl", "dmesg", "-T").stdout)
    assert evidence.nvidia_probe_conflict and evidence.devices_not_probed == 8


def test_fabric_manager_journal_and_log(make_node):
    node = make_node("h100")
    node.install_driver("535.104.05")
    node.blacklist_nouveau()
    node.boot()
    node.install("nvidia-fabricmanager-535", "535.247.01")
    assert node.systemctl("start", "nvidia-fabricmanager").returncode == 1
    journal = node.run("journalctl", "journalctl", "-u", "nvidia-fabricmanager").stdout
    mismatch = find_version_mismatch(journal)
    assert (mismatch.fabric_manager_version, mismatch.driver_version) == ("535.247.01", "535.104.05")
    assert parse_fabric_manager_log(node.read("/var/log/fabricmanager.log")).state == VERSION_MISMATCH
    node.install("nvidia-fabricmanager-535", "535.104.05")
    node.systemctl("start", "nvidia-fabricmanager", check=True)
    log = parse_fabric_manager_log(node.read("/var/log/fabricmanager.log"))
    assert (log.state, log.version) == ("configured", "535.104.05")
    state = node.smi("--query-gpu=fabric.state,fabric.status", "--format=csv,noheader", "-i", "0").stdout
    assert state == "Completed, Success\n"


def test_fabric_manager_needs_nvswitches(make_node):
    node = make_node("t4")
    node.install_driver()
    node.blacklist_nouveau()
    node.boot()
    node.install("nvidia-fabricmanager-535", "535.104.05")
    assert node.systemctl("start", "nvidia-fabricmanager").returncode == 1
    assert "NV_WARN_NOTHING_TO_DO" in node.run("journalctl", "journalctl", "-u", "nvidia-fabricmanager").stdout


def test_nvcc_of_each_toolkit(node):
    for package, release, version in (("cuda-toolkit-11-7", "11.7", "11.7.99"), ("cuda-toolkit-12-4", "12.4", "12.4.131"),
                                     ("cuda-toolkit-13-0", "13.0", "13.0.88")):
        node.install(package)
        nvcc = f"/usr/local/cuda-{release}/bin/nvcc"
        done = node.run("nvcc", str(node.path(nvcc)), "--version")
        parsed = parse_nvcc_version(done.stdout)
        assert (parsed.release, parsed.version) == (release, version)
        assert done.stdout.startswith("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-")


def test_modinfo_version_and_list_units(node):
    node.install_driver("580.95.05")
    assert parse_modinfo_version(node.run("kmod", "modinfo", "-F", "version", "nvidia").stdout).version == "580.95.05"
    node.write("/etc/systemd/system/broken.service",
               "[Unit]\nDescription=Broken\n[Service]\nType=oneshot\nExecStart=/bin/false\n")
    node.systemctl("start", "broken")
    units = parse_list_units(node.systemctl("list-units", "--all").stdout)
    assert [row.unit for row in units.failed] == ["broken.service"] and units.listed_count == len(units.units)
    shown = parse_systemctl_show(node.systemctl("show", "broken").stdout)
    assert (shown.active_state, shown.result, shown.load_state) == ("failed", "exit-code", "loaded")


def test_sysfs_files_as_a_batched_fact_reads_them(node):
    for module in ("mlx5_ib", "ib_umad"):
        node.run("kmod", "modprobe", module, check=True)
    files = {}   # what the health probe's file_glob read returns: path -> text, last newline stripped
    base = node.path("/sys/class/infiniband")
    for device in sorted(p.name for p in base.iterdir()):
        for name in ("fw_ver", "board_id", "hca_type"):
            files[f"/sys/class/infiniband/{device}/{name}"] = (base / device / name).read_text().rstrip("\n")
        for name in ("state", "phys_state", "rate", "link_layer"):
            files[f"/sys/class/infiniband/{device}/ports/1/{name}"] = (base / device / "ports/1" / name).read_text() \
                .rstrip("\n")
    devices = parse_sysfs_infiniband_files(files)
    assert [d.name for d in devices] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert devices[0].hca_type == "MT4123" and devices[0].fw_ver == "20.35.1012"
