"""``nvidia-smi topo -m``: the GPU/NIC connection matrix and CPU/NUMA affinity.

Format notes: columns are tab-separated as printed, but pastes expand tabs to spaces,
and 590+ underlines the header with ANSI codes. Cells are split on tabs or runs of 2+
spaces, empty cells dropped. Device columns (``GPU0``, ``NIC3``, ``mlx5_0``) come first,
then the affinity columns (``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID``); NIC
rows have no affinity cells. The ``Legend`` and ``NIC Legend`` blocks end the matrix.

The format closes itself: the header names every device, and each gets a row; the
``Legend`` block always follows, its last entry ``NV#  = Connection traversing a bonded
set of # NVLinks`` (every driver from 2018's DGX-2 to 590 prints it); with NICs, a ``NIC
Legend`` names each one. Output that lacks any of these was cut short, even at a line end:
the matrix read so far is kept and the result is ``incomplete``.
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
    legend: set[str] = set()  # the closing blocks seen: "Legend", its "NV#" entry, "NIC Legend"
    for line in lines[header_index + 1:]:
        if line.strip().startswith(("Legend", "NIC Legend")):
            in_matrix = False
            legend.add(line.strip().rstrip(":"))
            continue
        if not in_matrix and line.strip().startswith("NV#"):
            legend.add("NV#")
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
            padded = rest + [None] * (len(extra) - len(rest))
            named = dict(zip(extra, padded))
            affinity[row] = GpuAffinity(named.get("CPU Affinity"), named.get("NUMA Affinity"),
                                        named.get("GPU NUMA ID"))
        if len(values) < len(devices):
            problems.append(f"row {row} has {len(values)} of {len(devices)} device cells")
    return Topology(devices, links, affinity, nic_names, problems=tuple(problems),
                    incomplete=_cut_before_the_end(devices, {row for row, _ in links}, legend, nic_names))


def _cut_before_the_end(devices: tuple[str, ...], rows: set[str], legend: set[str], nic_names: dict[str, str]) -> str:
    """Why the output stops before the format's own end ("" when it reaches it): a device the
    header names without its row, no Legend or a Legend without its last entry, a NIC the
    NIC Legend does not name."""
    missing = [device for device in devices if device not in rows]
    if missing:
        named = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        return f"nvidia-smi topo -m's header names {named} without a row: cut short"
    if "Legend" not in legend:
        return "nvidia-smi topo -m ends before its Legend: cut short"
    if "NV#" not in legend:
        return "nvidia-smi topo -m's Legend ends before its last entry (NV#): cut short"
    nics = [device for device in devices if re.fullmatch(r"NIC\d+", device) and device not in nic_names]
    if nics:
        return f"nvidia-smi topo -m's NIC Legend does not name {', '.join(nics)}: cut short"
    return ""
