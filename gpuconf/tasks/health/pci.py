"""NVIDIA GPUs as sysfs sees them: PCI addresses and PCIe links. Reading sysfs cannot hang.

`gpu_links()` reads, for every vendor 0x10de VGA or 3D controller (class 0x0300 or
0x0302: not NVSwitch bridges, not the audio function), its `current_link_speed`,
`max_link_speed`, `current_link_width` and `max_link_width`.

GPU indexes: nvidia-smi numbers GPUs in PCI bus order. Findings use nvidia-smi's
index when it answered; when it did not (or for a GPU it no longer lists), the
position in sysfs's sorted address list, which is the same order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.base import Fact, Output, shell
from gpuconf.facts.common import canonical_pci_address

LINKS_SCRIPT = (
    'for d in /sys/bus/pci/devices/*; do [ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] || continue; '
    'c=$(cat "$d/class" 2>/dev/null); case "$c" in 0x0300*|0x0302*) ;; *) continue ;; esac; '
    'printf "%s\\t%s\\t%s\\t%s\\t%s\\n" "${d##*/}" "$(cat "$d/current_link_speed" 2>/dev/null)" '
    '"$(cat "$d/max_link_speed" 2>/dev/null)" "$(cat "$d/current_link_width" 2>/dev/null)" '
    '"$(cat "$d/max_link_width" 2>/dev/null)"; done; true'
)

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
        slower = None not in (self.speed_gts, self.max_speed_gts) and self.speed_gts < self.max_speed_gts
        narrower = None not in (self.width, self.max_width) and self.width < self.max_width
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


def parse_links(out: Output) -> tuple[PcieLink, ...]:
    """Lines `ADDRESS<TAB>speed<TAB>max speed<TAB>width<TAB>max width`, sorted by address."""
    links = []
    for line in out.stdout.splitlines():
        cells = line.split("\t")
        if len(cells) != 5 or canonical_pci_address(cells[0]) is None:
            continue
        links.append(PcieLink(canonical_pci_address(cells[0]), _speed(cells[1]), _speed(cells[2]),
                              _width(cells[3]), _width(cells[4])))
    return tuple(sorted(links, key=lambda link: link.bus_id))


def gpu_links() -> Fact:
    return shell("health:pcie-links", LINKS_SCRIPT, parse_links, timeout=10)


def sysfs_gpu_addresses(pci_fact_value: dict | None) -> list[str]:
    """Sorted canonical addresses of the GPUs in the gathered `pci:10de` fact."""
    gpus = (pci_fact_value or {}).get("gpus", [])
    return sorted(a for a in (canonical_pci_address(g.get("pci_address")) for g in gpus) if a)


def index_of(bus_id: str | None, smi_indexes: dict[str, int], sysfs_order: list[str]) -> int | None:
    """nvidia-smi's index of the GPU at `bus_id`, else its position in sysfs order."""
    if bus_id is None:
        return None
    if bus_id in smi_indexes:
        return smi_indexes[bus_id]
    return sysfs_order.index(bus_id) if bus_id in sysfs_order else None
