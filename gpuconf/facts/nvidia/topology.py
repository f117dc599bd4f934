"""``nvidia-smi topo -m``: the GPU/NIC connection matrix and CPU/NUMA affinity.

Format notes: columns are tab-separated as printed, but pastes expand tabs to spaces,
and 590+ underlines the header with ANSI codes. Cells are split on tabs or runs of 2+
spaces, empty cells dropped. Device columns (``GPU0``, ``NIC3``, ``mlx5_0``) come first,
then the affinity columns (``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID``); NIC
rows have no affinity cells. The ``Legend`` and ``NIC Legend`` blocks end the matrix.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import reads_whole_lines, strip_ansi
from gpuconf.facts.nvidia.failure import NvidiaSmiFailure, detect_nvidia_smi_failure


@dataclass(frozen=True)
class GpuAffinity:
    """CPU and NUMA affinity of one GPU row (strings as printed, e.g. ``0-23,96-119``)."""

    cpu_affinity: str | None
    numa_affinity: str | None
    gpu_numa_id: str | None


@dataclass(frozen=True)
class Topology:
    """``links[(row, column)]`` is the connection (``X``, ``NV18``, ``PIX``, ``SYS`` ...);
    ``nic_names`` maps ``NIC0`` to ``mlx5_0`` when the NIC Legend is present."""

    devices: tuple[str, ...]
    links: dict[tuple[str, str], str]
    affinity: dict[str, GpuAffinity]
    nic_names: dict[str, str]
    failure: NvidiaSmiFailure | None = None
    problems: tuple[str, ...] = ()
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common

    def nvlink_count(self, row: str, column: str) -> int | None:
        """Bonded NVLink count between two GPUs (``NV18`` -> 18), None if not NVLink."""
        match = re.fullmatch(r"NV(\d+)", self.links.get((row, column), ""))
        return int(match.group(1)) if match else None


_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"\t| {2,}", line) if cell.strip()]


@reads_whole_lines
def parse_topology(text: str) -> Topology:
    """Parse ``nvidia-smi topo -m``. Never raises; rows cut short are kept partially."""
    failure = detect_nvidia_smi_failure(text)
    if failure is not None:
        return Topology((), {}, {}, {}, failure=failure)
    lines = strip_ansi(text).splitlines()
    header_index = next((i for i, line in enumerate(lines) if re.search(r"\bGPU0\b", line)), None)
    if header_index is None:
        return Topology((), {}, {}, {}, problems=("no header line naming GPU0",))
    header = _cells(lines[header_index])
    devices = tuple(c for c in header if c not in _AFFINITY_COLUMNS)
    extra = [c for c in header if c in _AFFINITY_COLUMNS]
    links: dict[tuple[str, str], str] = {}
    affinity: dict[str, GpuAffinity] = {}
    nic_names: dict[str, str] = {}
    problems: list[str] = []
    in_matrix = True
    for line in lines[header_index + 1:]:
        if line.strip().startswith(("Legend", "NIC Legend")):
            in_matrix = False
            continue
        nic = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", line)
        if nic:
            nic_names[nic.group(1)] = nic.group(2)
            continue
        cells = _cells(line)
        if not in_matrix or len(cells) < 2:
            continue
        row, values = cells[0], cells[1:]
        for column, value in zip(devices, values):
            links[(row, column)] = value
        rest = values[len(devices):]
        if rest and extra:
            padded = rest + [None] * (len(extra) - len(rest))  # type: ignore[list-item]
            named = dict(zip(extra, padded))
            affinity[row] = GpuAffinity(named.get("CPU Affinity"), named.get("NUMA Affinity"),
                                        named.get("GPU NUMA ID"))
        if len(values) < len(devices):
            problems.append(f"row {row} has {len(values)} of {len(devices)} device cells")
    return Topology(devices, links, affinity, nic_names, problems=tuple(problems))
