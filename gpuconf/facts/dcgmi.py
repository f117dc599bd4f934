"""DCGM's tables: ``dcgmi discovery -l`` (the GPUs the host engine sees) and ``dcgmi dmon``
(field samples per entity); pure parsers, tested on real captures under tests/fixtures/real/dcgmi/.

``dcgmi discovery -l`` (NVIDIA/DCGM issue 229, an H100 host whose names read ``<<<NULL>>>``)::

    4 GPUs found.
    +--------+----------------------------------------------------------------------+
    | GPU ID | Device Information                                                   |
    +--------+----------------------------------------------------------------------+
    | 0      | Name: <<<NULL>>>                                                     |
    |        | PCI Bus ID: 00000000:4C:00.0                                         |
    |        | Device UUID: GPU-d6a2c177-4cd8-8d01-0310-79f2720f37de                |
    +--------+----------------------------------------------------------------------+

The count comes first, so fewer complete GPU blocks than it says is output cut short; a block is
complete once its closing ``+---`` line is read. ``<<<NULL>>>`` is a value DCGM could not read.

``dcgmi dmon -e FIELDS`` prints a header of the fields' short names, a line of their units, then one
row per entity and sample::

    #Entity   GPUTL             MCUTL             POWER             TMPTR ...
    ID                                             W                 C
    GPU 0     75                42                185.300           68    ...
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import canonical_pci_address, reads_whole_lines

NULL = "<<<NULL>>>"


@dataclass(frozen=True)
class DiscoveredGpu:
    """One GPU block; ``name`` is None where DCGM printed ``<<<NULL>>>`` (it could not read it)."""

    gpu_id: int
    name: str | None
    pci_address: str | None
    uuid: str | None


@dataclass(frozen=True)
class Discovery:
    """``found``: the count dcgmi announced (None when it printed none); ``gpus``: the complete blocks."""

    found: int | None
    gpus: tuple[DiscoveredGpu, ...]
    incomplete: str = ""

    @property
    def unnamed(self) -> tuple[DiscoveredGpu, ...]:
        return tuple(g for g in self.gpus if g.name is None)


_FOUND = re.compile(r"^(\d+) GPUs? found\.", re.M)
_CELL = re.compile(r"^\|\s*(\d*)\s*\|\s*(.*?)\s*\|\s*$")


def _whole_discovery_line(line: str) -> bool:
    return line.rstrip().endswith(("|", "+")) or bool(_FOUND.match(line)) or "found" in line


@reads_whole_lines(row=_whole_discovery_line)
def parse_dcgmi_discovery(text: str) -> Discovery:
    """The GPUs of ``dcgmi discovery -l``; output with fewer whole blocks than its count is incomplete."""
    found = _FOUND.search(text)
    gpus: list[DiscoveredGpu] = []
    block: dict[str, str] | None = None
    for line in text.splitlines():
        stripped = line.rstrip()
        if stripped.startswith("+") and block is not None:
            known = {k: (None if v == NULL else v) for k, v in block.items()}
            gpus.append(DiscoveredGpu(int(block["id"]), known.get("Name"), canonical_pci_address(
                block.get("PCI Bus ID", "")), known.get("Device UUID")))
            block = None
        elif match := _CELL.match(stripped):
            number, cell = match.groups()
            if number:
                block = {"id": number}
            if block is not None and ":" in cell:
                key, _, text_value = cell.partition(":")
                block[key.strip()] = text_value.strip()
    count = int(found.group(1)) if found else None
    cut = f"{count} GPUs announced, {len(gpus)} whole blocks read: cut short" if count is not None and \
        len(gpus) < count else ""
    return Discovery(count, tuple(gpus), cut)


@dataclass(frozen=True)
class DmonRow:
    """One entity's sample: ``entity`` ``GPU``, ``Switch``, ...; ``values`` by the header's field
    name, None for ``N/A`` (a value the field has not for this entity)."""

    entity: str
    entity_id: int
    values: dict[str, float | None]


@dataclass(frozen=True)
class DcgmiDmon:
    """The fields in the header's order, their units (``W``, ``C``, "" for none), the rows in order."""

    fields: tuple[str, ...]
    units: tuple[str, ...]
    rows: tuple[DmonRow, ...]
    problems: tuple[str, ...] = ()
    incomplete: str = ""

    def last(self, entity_id: int, entity: str = "GPU") -> DmonRow | None:
        """The entity's latest sample."""
        return next((r for r in reversed(self.rows) if (r.entity, r.entity_id) == (entity, entity_id)), None)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _whole_dmon_row(line: str) -> bool:
    return line.startswith(("#", "ID")) or bool(re.match(r"^\S+ \d+\s", line + " "))


@reads_whole_lines(row=_whole_dmon_row)
def parse_dcgmi_dmon(text: str) -> DcgmiDmon:
    """``dcgmi dmon`` samples; the units line sits under the header at the fields' columns."""
    fields: tuple[str, ...] = ()
    starts: list[int] = []
    units: tuple[str, ...] = ()
    rows: list[DmonRow] = []
    problems: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            names = list(re.finditer(r"\S+", line))[1:]   # after "#Entity"
            fields, starts = tuple(m.group() for m in names), [m.start() for m in names]
        elif line.startswith("ID") and fields:
            bounds = starts + [len(line) + 1]
            units = tuple(line[bounds[i]:bounds[i + 1]].strip() for i in range(len(fields)))
        elif (parts := line.split()) and len(parts) >= 2 and parts[1].isdigit() and fields:
            cells = parts[2:]
            if len(cells) != len(fields):
                problems.append(line.strip())
                continue
            rows.append(DmonRow(parts[0], int(parts[1]), {f: _number(c) for f, c in zip(fields, cells)}))
        else:
            problems.append(line.strip())
    return DcgmiDmon(fields, units, tuple(rows), tuple(problems))
