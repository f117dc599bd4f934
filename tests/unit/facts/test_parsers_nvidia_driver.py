"""/proc/driver/nvidia/version, modinfo, nvcc --version and fabric manager log parsers,
on every real capture of those kinds."""
from __future__ import annotations

import pytest

from gpuconf.facts.common import Incomplete, Unparseable, incomplete
from gpuconf.facts.nvidia import (
    OPEN,
    PROPRIETARY,
    LoadedDriver,
    ModuleInfo,
    NvccVersion,
    find_version_mismatch,
    parse_fabric_manager_log,
    parse_modinfo,
    parse_modinfo_version,
    parse_nvcc_version,
    parse_proc_driver_version,
)
from tests.real import read_real as read

PROC = {
    "proc-driver-nvidia-version/open-525.60.11-arch-nixGL-121.txt":
        ("525.60.11", OPEN, None, "archlinux-builder@localhost", "gcc version 12.2.0 (GCC)"),
    "proc-driver-nvidia-version/open-565.57.01-ubuntu2404-nixGL-186.txt":
        ("565.57.01", OPEN, "Thu Oct 10 12:15:00 UTC 2024", "dvs-builder@U16-A24-9-2",
         "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)"),
    "proc-driver-nvidia-version/proprietary-384.98-ubuntu-neofetch-876.txt":
        ("384.98", PROPRIETARY, "Thu Oct 26 15:16:01 PDT 2017", None, "gcc version 7.2.0 (Ubuntu 7.2.0-8ubuntu3)"),
}


@pytest.mark.parametrize("rel", sorted(PROC))
def test_proc_driver_version(rel: str) -> None:
    driver = parse_proc_driver_version(read(rel))
    assert isinstance(driver, LoadedDriver)
    assert (driver.version, driver.flavour, driver.build_date, driver.builder, driver.gcc_version) == PROC[rel]
    assert driver.arch == "x86_64"


def test_proc_driver_version_other_lines() -> None:
    arm = parse_proc_driver_version(
        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  550.54.14  Release Build  "
        "(dvs-builder@U16-I1-N08-12-3)  Thu Feb 22 01:25:25 UTC 2024\n")
    assert isinstance(arm, LoadedDriver) and (arm.arch, arm.version, arm.flavour) == ("aarch64", "550.54.14", OPEN)
    assert isinstance(parse_proc_driver_version("cat: /proc/driver/nvidia/version: No such file or directory\n"),
                      Unparseable)


MODINFO = {
    "modinfo/modinfo-F-version-510.47.03-gpu-operator-356.txt": (True, "510.47.03", None),
    "modinfo/modinfo-F-version-module-not-found-cuda-smi-2.txt": (False, None, None),
    "modinfo/modinfo-F-version-nvidia_352-cuda-smi-2.txt": (True, "352.63", None),
    "modinfo/modinfo-nvidia-590.44.01-open-TRUNCATED-aikitoria-15.txt": (True, "590.44.01", OPEN),
}


@pytest.mark.parametrize("rel", sorted(MODINFO))
def test_modinfo(rel: str) -> None:
    found, version, flavour = MODINFO[rel]
    parse = parse_modinfo_version if "-F-" in rel else parse_modinfo
    info = parse(read(rel))
    assert isinstance(info, ModuleInfo)
    assert (info.found, info.version, info.flavour) == (found, version, flavour)


def test_modinfo_full_fields_and_not_found_name() -> None:
    info = parse_modinfo(read("modinfo/modinfo-nvidia-590.44.01-open-TRUNCATED-aikitoria-15.txt"))
    assert isinstance(info, ModuleInfo)
    assert (info.name, info.license, info.depends) == ("nvidia", "Dual MIT/GPL", ("ecc",))
    assert info.filename == "/lib/modules/6.8.0-90-generic/updates/dkms/nvidia.ko"
    assert info.vermagic is not None and info.vermagic.startswith("6.8.0-90-generic ")
    assert info.firmware == ("nvidia/590.44.01/gsp_tu10x.bin", "nvidia/590.44.01/gsp_ga10x.bin")
    assert info.parameters[:2] == ("NvSwitchRegDwords", "NvSwitchBlacklist")
    assert info.parameters[-1] == "NVreg_DeviceFileMode"
    missing = parse_modinfo(read("modinfo/modinfo-F-version-module-not-found-cuda-smi-2.txt"))
    assert isinstance(missing, ModuleInfo) and (missing.found, missing.name) == (False, "nvidia")
    proprietary = parse_modinfo("filename: /lib/modules/x/nvidia.ko\nversion: 535.104.05\nlicense: NVIDIA\n")
    assert isinstance(proprietary, ModuleInfo) and proprietary.flavour == PROPRIETARY
    assert isinstance(parse_modinfo_version("bash: modinfo: command not found\nmore\n"), Unparseable)


NVCC = {
    "nvcc/nvcc-version-10.1-nvidia-container-toolkit-20.txt": ("10.1", "10.1.243", None),
    "nvcc/nvcc-version-11.0-bu-pytorch-builder-580.txt": ("11.0", "11.0.221", "cuda_11.0_bu.TC445_37.28845127_0"),
    "nvcc/nvcc-version-11.0.194-blade-build-931.txt": ("11.0", "11.0.194", "cuda_11.0_bu.TC445_37.28540450_0"),
    "nvcc/nvcc-version-11.1-pytorch-builder-580.txt": ("11.1", "11.1.105", "cuda_11.1.TC455_06.29190527_0"),
}


@pytest.mark.parametrize("rel", sorted(NVCC))
def test_nvcc_version(rel: str) -> None:
    nvcc = parse_nvcc_version(read(rel))
    assert isinstance(nvcc, NvccVersion)
    assert (nvcc.release, nvcc.version, nvcc.build) == NVCC[rel]
    assert nvcc.built_on is not None and nvcc.built_on.endswith(("2019", "2020"))
    assert isinstance(parse_nvcc_version("bash: nvcc: command not found\n"), Unparseable)


F = "fabricmanager/"
# file -> (state, last started version, starts, mismatch (fm, driver), GPUs registered, NVSwitch errors)
FABRIC = {
    F + "fabricmanager-log-535.161.08-startup-config-nvswitch-nonfatal-errors-gpud.txt":
        ("configured", "535.161.08", 2, None, 8, 18),
    F + "fabricmanager-log-multicast-inband-gpud.txt": ("unknown", None, 0, None, 0, 1),
    F + "fm-driver-interface-mismatch-460-microk8s-2119.txt":
        ("version_mismatch", None, 0, ("460.91.03", "460.73.01"), 0, 0),
    F + "fm-driver-interface-mismatch-530-gpu-operator-544.txt":
        ("version_mismatch", None, 0, ("530.30.02", "530.41.03"), 0, 0),
    F + "fm-driver-interface-mismatch-550-curly-quote-nvtrust-55.txt":
        ("version_mismatch", None, 0, ("550.90.07", "550.107.02"), 0, 0),
    F + "journalctl-u-nvidia-fabricmanager-mismatch-535-TRUNCATED-dstack-2348.txt":
        ("version_mismatch", None, 1, ("535.183.01", None), 0, 0),  # the journal's start is counted
}


@pytest.mark.parametrize("rel", sorted(FABRIC))
def test_fabric_manager_log(rel: str) -> None:
    state, version, starts, mismatch, gpus, errors = FABRIC[rel]
    text = read(rel)
    log = parse_fabric_manager_log(text)
    assert (log.state, log.version, log.starts, log.gpus_registered, len(log.nvswitch_errors)) == (
        state, version, starts, gpus, errors)
    found = find_version_mismatch(text)
    if mismatch is None:
        assert log.mismatch is None and found is None
    else:
        assert log.mismatch is not None and found is not None
        assert (found.fabric_manager_version, found.driver_version) == mismatch
        assert (log.mismatch.fabric_manager_version, log.mismatch.driver_version) == mismatch


def test_fabric_manager_nvswitch_error_fields() -> None:
    log = parse_fabric_manager_log(read(F + "fabricmanager-log-multicast-inband-gpud.txt"))
    error = log.nvswitch_errors[0]
    assert (error.timestamp, error.fatal, error.code) == ("Feb 27 2025 15:10:02", False, 12028)
    assert (error.pci_address, error.physical_id, error.port) == ("0000:86:00.0", 3, 61)
    full = parse_fabric_manager_log(read(F + "fabricmanager-log-535.161.08-startup-config-nvswitch-nonfatal-errors-gpud.txt"))
    assert {e.pci_address for e in full.nvswitch_errors} == {
        "0000:83:00.0", "0000:84:00.0", "0000:85:00.0", "0000:86:00.0"}


def test_fabric_manager_later_start_clears_mismatch() -> None:
    text = ("[Jan 01 2025 00:00:00] [ERROR] fabric manager NVIDIA GPU driver interface version 535.1 "
            "don't match with driver version 535.2. Please update.\n"
            "[Jan 01 2025 00:10:00] [INFO] Fabric Manager version 535.2 is running with the following\n")
    log = parse_fabric_manager_log(text)
    assert (log.state, log.version, log.mismatch) == ("started", "535.2", None)


CASES = sorted(PROC) + sorted(MODINFO) + sorted(NVCC) + sorted(FABRIC)


def test_a_jetson_l4t_release_is_not_a_driver_version() -> None:
    l4t = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  36.4.3  Release Build  (buildbrain@mobile-u64)\n"
    assert isinstance(parse_proc_driver_version(l4t), Unparseable)
    assert "Jetson" in parse_proc_driver_version(l4t).reason
    cut = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57"
    assert isinstance(parse_proc_driver_version(cut), Incomplete)    # 565.57.01 cut: never a version
    assert "cut short" in incomplete(parse_proc_driver_version(cut))


JOURNAL_NO_BANNER = F + "journal-fm-configured-no-banner-then-stopped-h20-TRUNCATED-nvtrust-128.txt"
CONFIG_ITEM = F + "fm-config-item-invalid-value-fabric-node-config-file-talos-siderolabs-511.txt"
CASES += [JOURNAL_NO_BANNER, CONFIG_ITEM]


def test_the_journal_without_the_log_files_banner_reads_configured_then_stopped() -> None:
    text = read(JOURNAL_NO_BANNER)
    configured = parse_fabric_manager_log("".join(text.splitlines(True)[:6]))  # up to systemd's "Started"
    assert (configured.state, configured.starts, configured.system, configured.refusal) == (
        "configured", 1, "pre-NVL5", None)
    whole = parse_fabric_manager_log(text)
    assert (whole.state, whole.starts) == ("stopped", 1)  # systemd stopped it at 15:32
    restarted = parse_fabric_manager_log(text + text.splitlines(True)[0])  # a later start clears the stop
    assert (restarted.state, restarted.starts) == ("started", 2)


def test_an_invalid_config_item_is_a_refusal_naming_the_item() -> None:
    log = parse_fabric_manager_log(read(CONFIG_ITEM))
    assert log.state == "failed" and log.refusal is not None
    assert (log.refusal.name, log.refusal.detail) == ("config_invalid", "FABRIC_NODE_CONFIG_FILE")
    assert log.refusal.line.endswith("FABRIC_NODE_CONFIG_FILE has an invalid value")


def test_a_failed_start_no_name_covers_names_fabric_managers_error_line() -> None:
    failed = read(F + "journal-fm-nothing-to-do-no-nvswitch-cube-studio-29.txt").splitlines()[2]
    log = parse_fabric_manager_log("Sep 18 03:19:01 node nv-fabricmanager[1]: [ERROR] cannot open topology file\n"
                                   + failed + "\n")
    assert log.state == "failed" and log.refusal is not None and log.refusal.name == "refused"
    assert log.refusal.line.endswith("[ERROR] cannot open topology file")
    bare = parse_fabric_manager_log(failed + "\n")  # no error line before it: the failure line itself
    assert bare.refusal is not None and bare.refusal.line == failed.strip()
