"""NVIDIA GPUs as sysfs sees them: PCI addresses and PCIe links. Reading sysfs cannot hang.

`LINK_FACT` reads every PCI device's `current_link_speed`, `max_link_speed`,
`current_link_width` and `max_link_width` (sysfs, through the remote runner: no
process); `gpu_links()` keeps those of the GPUs the host's PCI fact (gather.PCI_FACT:
vendor 0x10de, a display controller class; not NVSwitch bridges, not the audio
function) lists.

GPU indexes: nvidia-smi numbers GPUs in PCI bus order. Findings use nvidia-smi's
index when it answered; when it did not (or for a GPU it no longer lists), the
position in sysfs's sorted address list, which is the same order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.base import file_glob
from gpuconf.facts.common import canonical_pci_address
from gpuconf.facts.gather import PCI, PciDevices

LINK_ATTRIBUTES = ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width")

# GT/s per lane -> PCIe generation
GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


@dataclass(frozen=True)
class PcieLink:
    """One GPU's link from sysfs. `None` where sysfs says `Unknown` (a device in D3cold)."""

    bus_id: str
    speed_gts: float | None
    max_speed_gts: float | None
    width: int | None
    max_width: int | None

    @property
    def generation(self) -> int | None:
        return GENERATIONS.get(self.speed_gts) if self.speed_gts is not None else None

    @property
    def max_generation(self) -> int | None:
        return GENERATIONS.get(self.max_speed_gts) if self.max_speed_gts is not None else None

    @property
    def below_max(self) -> bool:
        slower = self.speed_gts is not None and self.max_speed_gts is not None and self.speed_gts < self.max_speed_gts
        narrower = self.width is not None and self.max_width is not None and self.width < self.max_width
        return bool(slower or narrower)

    def describe(self) -> str:
        def gen(value: int | None, speed: float | None) -> str:
            return f"gen {value}" if value else (f"{speed:g} GT/s" if speed else "unknown speed")

        return (f"{gen(self.generation, self.speed_gts)} x{self.width or '?'} "
                f"(max {gen(self.max_generation, self.max_speed_gts)} x{self.max_width or '?'})")


def _speed(text: str) -> float | None:
    match = re.match(r"\s*([\d.]+)\s*GT/s", text)
    return float(match.group(1)) if match else None


def _width(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def link_files(files: dict[str, str]) -> dict[str, dict[str, str]]:
    """`/sys/bus/pci/devices/ADDRESS/ATTRIBUTE` -> {canonical address: {attribute: text}}."""
    devices: dict[str, dict[str, str]] = {}
    for path, value in files.items():
        directory, _, attribute = path.rpartition("/")
        address = canonical_pci_address(directory.rsplit("/", 1)[-1])
        if address and attribute in LINK_ATTRIBUTES:
            devices.setdefault(address, {})[attribute] = value
    return devices


LINK_FACT = file_glob([PCI + name for name in LINK_ATTRIBUTES], link_files, key="pci:links")


def gpu_links(pci_fact_value: PciDevices | None, links: dict[str, dict[str, str]]) -> tuple[PcieLink, ...]:
    """The links of the GPUs in the gathered PCI fact, sorted by address. A GPU whose
    link sysfs does not show (no such attribute) is left out, as before."""
    found = []
    for address in sysfs_gpu_addresses(pci_fact_value):
        cells = links.get(address)
        if cells:
            found.append(PcieLink(address, _speed(cells.get("current_link_speed", "")),
                                  _speed(cells.get("max_link_speed", "")), _width(cells.get("current_link_width", "")),
                                  _width(cells.get("max_link_width", ""))))
    return tuple(found)


def sysfs_gpu_addresses(pci_fact_value: PciDevices | None) -> list[str]:
    """Sorted canonical addresses of the GPUs in the gathered `pci:10de` fact."""
    gpus = pci_fact_value["gpus"] if pci_fact_value else []
    return sorted(a for a in (canonical_pci_address(g.get("pci_address")) for g in gpus) if a)


def index_of(bus_id: str | None, smi_indexes: dict[str, int], sysfs_order: list[str]) -> int | None:
    """nvidia-smi's index of the GPU at `bus_id`, else its position in sysfs order."""
    if bus_id is None:
        return None
    if bus_id in smi_indexes:
        return smi_indexes[bus_id]
    return sysfs_order.index(bus_id) if bus_id in sysfs_order else None
