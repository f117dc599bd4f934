"""facts.nvlink_fabric: the fabric kind told from the NVSwitch bridges and the GPUs' PCI ids,
and the driver-matched NVLink5 companions' names per OS family."""
from __future__ import annotations

import pytest

from gpuconf.driver import names
from gpuconf.facts.gather import pci_devices
from gpuconf.facts.nvlink_fabric import NONE, NVSWITCH, NVSWITCH_NVLINK5, RACK, nvlink_fabric


def sysfs(gpu: str, count: int, switches: int) -> dict[str, str]:
    files = {}
    for bus in range(count):
        files |= {f"/sys/bus/pci/devices/0000:{bus + 0x10:02x}:00.0/{k}": v
                  for k, v in (("vendor", "0x10de"), ("class", "0x030200"), ("device", gpu))}
    for bus in range(switches):
        files |= {f"/sys/bus/pci/devices/0000:{bus + 0x05:02x}:00.0/{k}": v
                  for k, v in (("vendor", "0x10de"), ("class", "0x068000"), ("device", "0x22a3"))}
    return files


@pytest.mark.parametrize("gpu, count, switches, kind", [
    ("0x20b2", 8, 6, NVSWITCH),            # HGX A100
    ("0x2330", 8, 4, NVSWITCH),            # HGX H100
    ("0x2335", 8, 4, NVSWITCH),            # HGX H200
    ("0x2901", 8, 2, NVSWITCH_NVLINK5),    # HGX B200
    ("0x2941", 4, 0, RACK),                # GB200 NVL72 tray: no NVSwitch in the node
    ("0x1eb8", 1, 0, NONE),                # T4
    ("0x2330", 2, 0, NONE),                # H100 without a switch board (PCIe, NVLink bridge pairs)
    ("0x9999", 8, 4, NVSWITCH),            # an unknown GPU on an NVSwitch board: fabric manager at least
])
def test_fabric_kind_from_pci(gpu, count, switches, kind):
    pci = pci_devices(sysfs(gpu, count, switches))
    assert nvlink_fabric(pci["gpus"], pci["nvswitches"]) == kind


@pytest.mark.parametrize("family, branch, nvlsm, nvsdm", [
    ("Debian", 580, "nvlsm", "libnvsdm-580"), ("Debian", 595, "nvlsm", "libnvsdm"),
    ("RedHat", 580, "nvlsm", "libnvsdm")])
def test_nvlink5_companion_names(family, branch, nvlsm, nvsdm):
    naming = names.DebianNames() if family == "Debian" else names.RedHatNames()
    assert (naming.companion("nvlsm", branch), naming.companion("nvsdm", branch)) == (nvlsm, nvsdm)
    assert names.is_driver_package(nvlsm) and names.is_driver_package(nvsdm)
