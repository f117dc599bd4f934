"""``nvidia-smi`` on the simulated GPUs, parsed with gpuconf's own nvidia-smi fact parsers."""
from __future__ import annotations

import subprocess

import pytest

from gpuconf.facts.nvidia.csv import parse_query_csv
from gpuconf.facts.nvidia.failure import DRIVER_LIBRARY_MISMATCH, DRIVER_NOT_LOADED, detect_nvidia_smi_failure
from gpuconf.facts.nvidia.listing import parse_gpu_list, parse_nvidia_smi_version
from gpuconf.facts.nvidia.nvlink import parse_nvlink_status
from gpuconf.facts.nvidia.query import parse_nvidia_smi_query
from gpuconf.facts.nvidia.table import parse_nvidia_smi_table


@pytest.fixture
def gpu_node(make_node):
    """An A100 node with driver 535.104.05 loaded (nouveau blacklisted, rebooted)."""
    return make_node("a100", driver="535.104.05")


def test_without_the_driver_nvidia_smi_fails_like_the_real_one(node):
    done = node.smi()
    assert done.returncode == 9
    assert done.stdout == ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                           "Make sure that the latest NVIDIA driver is installed and running.\n")
    assert detect_nvidia_smi_failure(done.stdout).kind == DRIVER_NOT_LOADED


def test_an_upgraded_but_not_rebooted_driver_is_a_version_mismatch(gpu_node):
    done = gpu_node.smi("-L", version="535.247.01")
    assert done.returncode == 18
    assert done.stdout == "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.247\n"
    assert detect_nvidia_smi_failure(done.stdout).kind == DRIVER_LIBRARY_MISMATCH


@pytest.mark.parametrize("profile, count, name", [("a100", 8, "NVIDIA A100-SXM4-80GB"),
                                                  ("h100", 8, "NVIDIA H100 80GB HBM3"), ("t4", 1, "Tesla T4")])
def test_list_per_profile(make_node, profile, count, name):
    node = make_node(profile)
    node.install_driver("580.95.05")
    node.blacklist_nouveau()
    node.boot()
    listed = parse_gpu_list(node.smi("-L", version="580.95.05").stdout)
    assert [gpu.name for gpu in listed.gpus] == [name] * count
    assert len({gpu.uuid for gpu in listed.gpus}) == count


@pytest.mark.parametrize("profile, driver", [("h100", "580.95.05"), ("t4", "535.104.05")])
def test_every_profile_and_branch_parses(make_node, profile, driver):
    node = make_node(profile, driver=driver)
    report = parse_nvidia_smi_query(node.smi("-q", version=driver).stdout)
    assert report.driver_version == driver and report.gpus and not any(g.errors for g in report.gpus)
    table = parse_nvidia_smi_table(node.smi(version=driver).stdout)
    assert table.complete and len(table.gpus) == len(report.gpus)
    assert table.gpus[0].memory_total_mib == report.gpus[0].memory.total_mib
    hopper = report.gpus[0].temperature
    if profile == "h100":
        assert hopper.tlimit_c is not None and report.gpus[0].fabric.state == "In Progress"
    # "GPU Recovery Action" from R565 on, as the driver prints it (a typed field of -q)
    expected = {"580.95.05": "none", "535.104.05": None}[driver]
    assert {g.recovery_action.action if g.recovery_action else None for g in report.gpus} == {expected}
    if driver == "580.95.05":
        node.run("fault", "recovery-action", "reboot", "--gpu", "0", check=True)
        again = parse_nvidia_smi_query(node.smi("-q", "-i", "0", version=driver).stdout)
        assert again.gpus[0].recovery_action is not None
        assert (again.gpus[0].recovery_action.text, again.gpus[0].recovery_action.action) == ("Reboot", "reboot_node")


def test_query_report_parses_with_real_values(gpu_node):
    report = parse_nvidia_smi_query(gpu_node.smi("-q").stdout)
    assert report.driver_version == "535.104.05" and report.attached_gpus == 8 and len(report.gpus) == 8
    first = report.gpus[0]
    assert first.product_name == "NVIDIA A100-SXM4-80GB" and first.persistence_mode is False
    assert first.pcie.gen_current == 4 and first.pcie.gen_max == 4
    assert first.power.limit_w == 500.0 and first.power.min_limit_w == 100.0
    assert first.memory.total_mib == 81920
    assert first.temperature.slowdown_c == 89
    assert first.ecc.volatile_uncorrected == 0
    only = parse_nvidia_smi_query(gpu_node.smi("-q", "-d", "TEMPERATURE", "-i", "3").stdout)
    assert len(only.gpus) == 1 and only.gpus[0].bus_id.endswith(":4E:00.0") and only.gpus[0].temperature.gpu_c


def test_query_gpu_csv_has_real_names_units_and_na(gpu_node):
    fields = "index,name,pci.bus_id,persistence_mode,memory.total,utilization.gpu,power.draw,power.limit," \
             "clocks_event_reasons.active,fan.speed,temperature.gpu,ecc.errors.uncorrected.volatile.total"
    text = gpu_node.smi(f"--query-gpu={fields}", "--format=csv").stdout
    header, first = text.splitlines()[:2]
    assert header == ("index, name, pci.bus_id, persistence_mode, memory.total [MiB], utilization.gpu [%], "
                      "power.draw [W], power.limit [W], clocks_event_reasons.active, fan.speed [%], temperature.gpu, "
                      "ecc.errors.uncorrected.volatile.total")
    assert first.startswith("0, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, Disabled, 81920 MiB, 0 %, 62.50 W, 500.00 W, "
                            "0x0000000000000001, [N/A], ")
    parsed = parse_query_csv(text)
    assert len(parsed.rows) == 8 and parsed.rows[0]["memory.total"] == 81920 and parsed.rows[0]["fan.speed"] is None
    bare = gpu_node.smi("--query-gpu=memory.total,power.draw", "--format=csv,noheader,nounits", "-i", "1").stdout
    assert bare == "81920, 62.50\n"


def test_unknown_field_is_refused_like_the_real_tool(gpu_node):
    done = gpu_node.smi("--query-gpu=index,device_minor", "--format=csv")
    assert (done.returncode, done.stdout) == (2, 'Field "device_minor" is not a valid field to query.\n\n')


def test_default_table_parses(gpu_node):
    table = parse_nvidia_smi_table(gpu_node.smi().stdout)
    assert table.driver_version == "535.104.05" and table.cuda_version == "12.2"
    assert len(table.gpus) == 8 and table.gpus[7].bus_id == "00000000:BD:00.0"
    assert table.gpus[0].power_cap_w == 500 and table.gpus[0].memory_total_mib == 81920


def test_version(gpu_node):
    version = parse_nvidia_smi_version(gpu_node.smi("--version").stdout)
    assert (version.driver, version.nvml, version.cuda) == ("535.104.05", "535.104", "12.2")


def test_persistence_mode_is_set_and_resets_at_reboot(gpu_node):
    done = gpu_node.smi("-pm", "1", "-i", "0")
    assert done.stdout == "Enabled Legacy persistence mode for GPU 00000000:07:00.0.\nAll done.\n"
    assert gpu_node.smi("-pm", "1", "-i", "0").stdout == \
        "Persistence mode is already Enabled for GPU 00000000:07:00.0.\nAll done.\n"
    modes = gpu_node.smi("--query-gpu=persistence_mode", "--format=csv,noheader").stdout.split()
    assert modes == ["Enabled"] + ["Disabled"] * 7
    gpu_node.boot()
    assert set(gpu_node.smi("--query-gpu=persistence_mode", "--format=csv,noheader").stdout.split()) == {"Disabled"}
    refused = gpu_node.smi("-pm", "1", GPUCONF_SIM_USER="gpuadmin")
    assert refused.returncode == 4 and "Insufficient Permissions" in refused.stdout


def test_persistenced_keeps_persistence_across_reboots(gpu_node):
    gpu_node.install("nvidia-persistenced", "535.104.05")
    gpu_node.systemctl("enable", "nvidia-persistenced", check=True)
    gpu_node.boot()
    assert gpu_node.systemctl("is-active", "nvidia-persistenced").stdout == "active\n"
    assert set(gpu_node.smi("--query-gpu=persistence_mode", "--format=csv,noheader").stdout.split()) == {"Enabled"}
    assert gpu_node.run("kmod", "rmmod", "nvidia").stderr.startswith("rmmod: ERROR: Module nvidia is in use")
    gpu_node.systemctl("stop", "nvidia-persistenced", check=True)
    assert set(gpu_node.smi("--query-gpu=persistence_mode", "--format=csv,noheader").stdout.split()) == {"Disabled"}


def test_persistenced_needs_the_driver(node):
    node.install("nvidia-persistenced")
    assert node.systemctl("start", "nvidia-persistenced").returncode == 1
    journal = node.run("journalctl", "journalctl", "-u", "nvidia-persistenced", "-o", "cat").stdout
    assert "Failed to query NVIDIA devices." in journal


def test_persistenced_of_another_version_refuses_the_loaded_module(gpu_node):
    gpu_node.install("nvidia-persistenced", "595.71.05")     # what an unpinned install next to 535 gets
    assert "version 595.71.05" in gpu_node.run("daemons", "persistenced", "595.71.05", "--version").stdout
    assert gpu_node.systemctl("start", "nvidia-persistenced").returncode == 1
    kernel = gpu_node.run("journalctl", "dmesg").stdout
    assert ("NVRM: API mismatch: the client has the version 595.71.05, but\n"
            "NVRM: this kernel module has the version 535.104.05.  Please\n") in kernel
    gpu_node.install("nvidia-persistenced", "535.104.05")
    gpu_node.systemctl("start", "nvidia-persistenced", check=True)


def test_power_limit_is_bounded_by_the_gpu(gpu_node):
    done = gpu_node.smi("-pl", "50")
    assert done.returncode != 0
    assert done.stdout == ("Provided power limit 50.00 W is not a valid power limit which should be between 100.00 W "
                           "and 500.00 W for GPU 00000000:07:00.0\nTerminating early due to previous errors.\n")
    done = gpu_node.smi("-i", "2", "-pl", "400")
    assert done.stdout == "Power limit for GPU 00000000:47:00.0 was set to 400.00 W from 500.00 W.\nAll done.\n"
    limits = gpu_node.smi("--query-gpu=power.limit", "--format=csv,noheader,nounits").stdout.split()
    assert limits[2] == "400.00" and limits[0] == "500.00"


def test_nvlink_status_and_nvlink_down(gpu_node):
    status = parse_nvlink_status(gpu_node.smi("nvlink", "-s").stdout)
    assert len(status.gpus) == 8 and all(len(g.links) == 12 and all(link.active for link in g.links) for g in status.gpus)
    gpu_node.run("fault", "nvlink-down", "3", check=True)
    gpu_node.run("fault", "nvlink-down", "5", "2", check=True)
    text = gpu_node.smi("nvlink", "-s").stdout
    assert "NVML: Unable to retrieve NVLink information as all links are inactive" in text
    status = parse_nvlink_status(text)
    five = next(g for g in status.gpus if g.index == 5)
    assert [link.index for link in five.links if not link.active] == [2]


def test_t4_has_no_nvlink_output(make_node):
    node = make_node("t4")
    node.install_driver()
    node.blacklist_nouveau()
    node.boot()
    assert node.smi("nvlink", "-s").stdout == ""


def test_hang_fault_blocks_until_killed(gpu_node):
    gpu_node.run("fault", "nvidia-smi-hang", check=True)
    with pytest.raises(subprocess.TimeoutExpired):
        gpu_node.smi("-L", timeout=1.5)
    assert gpu_node.read("/proc/driver/nvidia/version").startswith("NVRM version:")   # procfs never hangs
    gpu_node.run("fault", "clear", "nvidia-smi-hang", check=True)
    assert gpu_node.smi("-L").returncode == 0


def test_each_container_toolkit_reports_its_own_version(node):
    for version in ("1.16.2", "1.17.8", "1.18.2", "1.20.0"):
        node.install("nvidia-container-toolkit", version)
        assert node.tool("/usr/bin/nvidia-ctk", "--version").stdout.startswith(
            f"NVIDIA Container Toolkit CLI version {version}\n")
        assert node.tool("/usr/bin/nvidia-container-runtime", "--version").stdout == \
            f"NVIDIA Container Runtime version {version}\n"
