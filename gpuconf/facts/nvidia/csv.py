"""``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` (and the other
``--query-*`` commands, which print the same CSV), plus ``nvidia-smi dmon``.

Format notes:

* Fields are separated by ``", "``; the header repeats the requested field names, with
  the unit in brackets (``memory.used [MiB]``) unless ``nounits`` was given.
* With ``noheader`` the caller must pass the field list it asked for.
* Values carry units (``81559 MiB``, ``26.20 W``, ``0 %``, ``0 us``) unless ``nounits``.
  Numbers are returned as int/float with the unit stripped; ``[N/A]``, ``N/A``,
  ``[Not Supported]`` and ``[Requested functionality has been deprecated]`` become None.
* Fields that look numeric but are identifiers (``driver_version`` ``595.80``,
  ``compute_cap`` ``8.9``, ``pci.bus`` ``0x01``, ``vbios_version``) stay strings; hex
  values stay strings (decode ``clocks_event_reasons.active`` with
  :func:`gpuconf.facts.nvidia.decode_clock_event_reasons`).
* ``-l 1`` loops print one row per interval under a single header; repeated headers
  (``-lms`` with restarts) are skipped.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpuconf.facts.common import is_unavailable, number_value, reads_whole_lines
from gpuconf.facts.nvidia.failure import NvidiaSmiFailure, detect_nvidia_smi_failure, is_fatal

CsvValue = str | int | float | None

# Substrings of field names whose values are identifiers, never quantities.
_TEXT_FIELD_MARKERS = (
    "version", "name", "uuid", "serial", "bus_id", "pci.", "timestamp", "inforom",
    "compute_cap", "driver_model", "gom.", "mode", "pstate", "display_", "reasons.",
    "address", "cause", "process", "board", "module_id", "vgpu", "addressing", "guid",
)
_UNIT_IN_HEADER = re.compile(r"^(?P<name>.+?)\s*\[(?P<unit>[^\]]+)\]$")


@dataclass(frozen=True)
class QueryCsv:
    """Rows of a ``--query-*`` CSV, each a dict keyed by field name (units stripped
    from the names: ``memory.used``). ``units`` maps a field to its header unit."""

    fields: tuple[str, ...]
    rows: tuple[dict[str, CsvValue], ...]
    units: dict[str, str]
    failure: NvidiaSmiFailure | None = None
    problems: tuple[str, ...] = ()
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common

    def column(self, name: str) -> tuple[CsvValue, ...]:
        """All values of one field, in row order."""
        return tuple(row.get(name) for row in self.rows)


def csv_value(field: str, raw: str) -> CsvValue:
    """Convert one CSV cell: None for "no value" spellings, numbers for quantities."""
    text = raw.strip()
    if is_unavailable(text):
        return None
    if any(marker in field.lower() for marker in _TEXT_FIELD_MARKERS) or text.lower().startswith("0x"):
        return text
    number = number_value(text)
    return text if number is None else number


@reads_whole_lines
def parse_query_csv(text: str, fields: Sequence[str] | None = None) -> QueryCsv:
    """Parse ``--query-gpu``/``--query-compute-apps``/``--query-retired-pages`` CSV.

    Pass ``fields`` (the names given on the command line) for ``noheader`` output; with
    a header, the header wins and ``fields`` is only used to recognise repeated headers.
    Rows with the wrong number of cells are skipped and reported in ``problems``.
    """
    failure = detect_nvidia_smi_failure(text)
    if is_fatal(failure):
        return QueryCsv(fields=tuple(fields or ()), rows=(), units={}, failure=failure)
    if failure is not None:  # a lost GPU's line, then the other GPUs' rows
        text = "\n".join(line for line in text.splitlines() if line.strip() != failure.message)
    lines = [line for line in text.splitlines() if line.strip()]
    names: list[str] = [f.strip() for f in fields] if fields else []
    units: dict[str, str] = {}
    header_line: str | None = None
    if lines and _looks_like_header(lines[0], names):
        header_line = lines.pop(0)
        names, units = _header(header_line)
    if not names:
        return QueryCsv((), (), {}, problems=("no header and no field list given",))
    rows: list[dict[str, CsvValue]] = []
    problems: list[str] = []
    for line in lines:
        if line == header_line:
            continue
        cells = line.split(", ")
        if len(cells) != len(names):
            problems.append(f"expected {len(names)} values, got {len(cells)}: {line[:120]}")
            continue
        rows.append({name: csv_value(name, cell) for name, cell in zip(names, cells)})
    return QueryCsv(tuple(names), tuple(rows), units, failure=failure, problems=tuple(problems))


def _looks_like_header(line: str, names: list[str]) -> bool:
    cells = [c.strip() for c in line.split(",")]
    stripped = [_UNIT_IN_HEADER.sub(r"\g<name>", c) for c in cells]
    if names:
        return stripped == names
    # A header names fields (dotted lowercase identifiers), a data row holds values.
    return all(re.fullmatch(r"[A-Za-z_][\w.]*", c) for c in stripped)


def _header(line: str) -> tuple[list[str], dict[str, str]]:
    names: list[str] = []
    units: dict[str, str] = {}
    for cell in (c.strip() for c in line.split(",")):
        match = _UNIT_IN_HEADER.match(cell)
        name = match.group("name") if match else cell
        names.append(name)
        if match:
            units[name] = match.group("unit")
    return names, units


@dataclass(frozen=True)
class DmonSamples:
    """``nvidia-smi dmon`` samples: ``columns`` from the ``# gpu pwr ...`` header,
    ``units`` from the ``# Idx W C ...`` line, one dict per sample (``-`` -> None)."""

    columns: tuple[str, ...]
    units: tuple[str, ...]
    rows: tuple[dict[str, int | float | None], ...]
    failure: NvidiaSmiFailure | None = None
    problems: tuple[str, ...] = ()
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common


@reads_whole_lines
def parse_dmon(text: str) -> DmonSamples:
    """Parse ``nvidia-smi dmon [-c N]`` output (whitespace-separated columns)."""
    failure = detect_nvidia_smi_failure(text)
    if failure is not None:
        return DmonSamples((), (), (), failure=failure)
    headers = [line[1:].split() for line in text.splitlines() if line.startswith("#")]
    columns = tuple(headers[0]) if headers else ()
    units = tuple(headers[1]) if len(headers) > 1 else ()
    rows: list[dict[str, int | float | None]] = []
    problems: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split()
        if len(cells) != len(columns):
            problems.append(line)
            continue
        rows.append({name: number_value(cell) for name, cell in zip(columns, cells)})
    return DmonSamples(columns, units, tuple(rows), problems=tuple(problems))
