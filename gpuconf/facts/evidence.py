"""What `gpuconf collect` reads back out of a bundle to name it: dmidecode's records and the
header of NVIDIA's bug report log. Pure parses of the real tools' output (captures under
tests/fixtures/real/dmidecode and tests/fixtures/real/nvidia-bug-report)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import whole_lines

_HANDLE = re.compile(r"^Handle 0x[0-9A-Fa-f]+, DMI type (\d+), \d+ bytes$")


@dataclass(frozen=True)
class DmiRecord:
    """One dmidecode record: its DMI type, its title (`System Information`) and its one-line fields."""

    type: int
    title: str
    fields: dict[str, str]


def parse_dmidecode(text: str) -> tuple[DmiRecord, ...]:
    """Every record of `dmidecode [-t TYPE ...]`. Fields are the lines indented once (`\\tName: value`);
    lists under a field (`Characteristics:` and its doubly indented lines) are left out."""
    records: list[DmiRecord] = []
    kind: int | None = None
    title = ""
    fields: dict[str, str] = {}
    for line in whole_lines(text)[0].splitlines():  # a line cut mid-value is no value
        handle = _HANDLE.match(line.strip())
        if handle:
            if kind is not None and title:
                records.append(DmiRecord(kind, title, fields))
            kind, title, fields = int(handle.group(1)), "", {}
        elif kind is not None and not title and line.strip() and not line[0].isspace():
            title = line.strip()
        elif kind is not None and line.startswith("\t") and not line.startswith("\t\t") and ":" in line:
            name, _, value = line.strip().partition(":")
            if value.strip():
                fields[name.strip()] = value.strip()
    if kind is not None and title:
        records.append(DmiRecord(kind, title, fields))
    return tuple(records)


def system_identity(records: tuple[DmiRecord, ...]) -> dict[str, str]:
    """The system's maker, product and serial (DMI type 1), what a vendor's support case asks for."""
    system = next((r for r in records if r.type == 1), None)
    if system is None:
        return {}
    wanted = {"Manufacturer": "manufacturer", "Product Name": "product", "Serial Number": "serial"}
    return {key: system.fields[name] for name, key in wanted.items() if name in system.fields}


@dataclass(frozen=True)
class BugReportHeader:
    """The prologue nvidia-bug-report.sh writes first in its log."""

    version: str | None
    date: str | None
    uname: str | None
    flags: str | None


def parse_bug_report_header(text: str) -> BugReportHeader | None:
    """The prologue's values, or None when the text is not an NVIDIA bug report log."""
    if "Start of NVIDIA bug report log file" not in text[:2000]:
        return None
    values: dict[str, str] = {}
    for line in whole_lines(text)[0].splitlines()[:40]:   # a line cut mid-value is no value
        for key, prefix in (("version", "nvidia-bug-report.sh Version:"), ("date", "Date:"), ("uname", "uname:"),
                            ("flags", "command line flags:")):
            if line.startswith(prefix) and key not in values:
                values[key] = line[len(prefix):].strip()
    return BugReportHeader(values.get("version"), values.get("date"), values.get("uname"), values.get("flags"))
