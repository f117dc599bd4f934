"""NVIDIA's per-line decode of the NVLink5 Xids 144-150 (Blackwell, GB200); part of
:mod:`gpuconf.facts.kernel`.

One code covers many events of the NVLink unit it names, and NVIDIA's Xid catalog decides each
line on its own (the catalog spreadsheet's sheet "XID 144-150 Decode")::

    NVRM: Xid (PCI:0018:01:00): 149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 03 (0x00086226 0x00000001 ...)
    NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 ...)
                                          unit          word   contain. link   intrInfo   errorStatus

A row of the sheet matches a line when the line's intrInfo fits the row's bit pattern (32 bits,
most significant first, ``-`` for any bit; the sheet gives one pattern for drivers before R575
and one for R575 and later, and a line may follow either) and its errorStatus equals the row's.
The row gives the fatality (``Non-fatal``, ``Fatal``, ``Link Fatal``), the recovery bucket
(``IGNORE``, ``RESET_GPU``, ``XID_154_EVAL``: the Xid 154 that follows decides) and gpuconf's
reading of it (``xid_nvlink5_decode.csv`` next to this module, written from the catalog by
``scripts/xid_decode_from_gpud.py``; sources in ``CATALOG_SOURCES.md``).

A line no row covers (no intrInfo, no row for its fields, rows that disagree, or a ``Fatal``
word where the row says non-fatal) is decided by the code's row of the Xid catalog, and says so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from gpuconf.facts.common import packaged_table

TABLE = "xid_nvlink5_decode.csv"
DECODED = range(144, 151)


@dataclass(frozen=True)
class DecodeRow:
    """One row of the sheet; ``number`` counts the data rows of the CSV from 1."""

    number: int
    xid: int
    unit: str
    intrinfo_v1: str
    intrinfo_v2: str
    error_status: int
    fatality: str  # as the sheet says: Non-fatal, Non-fatal*, Fatal, Fatal**, Link Fatal, Link Fatal?
    resolution: str  # the sheet's Data Center Recovery Action: IGNORE, RESET_GPU, XID_154_EVAL
    action2: str  # the sheet's second action for its starred rows (see its user guide tab)
    investigatory: str
    severity: str  # gpuconf's: fail, warn or info
    action: str  # gpuconf's (gpuconf.facts.xid.ACTIONS)
    source: str

    @property
    def fatal(self) -> bool:
        return not self.fatality.lower().startswith("non")

    def matches(self, intrinfo: int, error_status: int) -> bool:
        bits = f"{intrinfo:032b}"
        return error_status == self.error_status and any(
            len(pattern) == 32 and all(p in ("-", b) for p, b in zip(pattern, bits))
            for pattern in (self.intrinfo_v1, self.intrinfo_v2))

    @property
    def rule(self) -> str:
        return (f"{TABLE} row {self.number}: Xid {self.xid} {self.unit} errorStatus 0x{self.error_status:08x} "
                f"{self.fatality} -> {self.resolution}")


@cache
def decode_table() -> tuple[DecodeRow, ...]:
    """Every row of ``xid_nvlink5_decode.csv``, in the sheet's order."""
    return tuple(DecodeRow(number, int(r["xid"]), r["unit"], r["intrinfo_v1"], r["intrinfo_v2"],
                           int(r["error_status"], 16), r["fatality"], r["resolution"], r["action2"],
                           r["investigatory"], r["severity"], r["action"], r["source"])
                 for number, r in enumerate(packaged_table(TABLE), start=1))


@dataclass(frozen=True)
class LinkEvent:
    """The fields of a 144-150 line after its code (and pid/name)."""

    unit: str
    fatal: bool  # the driver's word: Fatal, or Nonfatal
    containment: str  # XC0 or XC1
    link: int  # -1 for the unit as a whole
    intrinfo: int
    error_status: int

    @property
    def word(self) -> str:
        return "Fatal" if self.fatal else "Nonfatal"


_LINK = re.compile(r"^(?P<unit>[A-Za-z0-9_]+(?:/[A-Za-z0-9_]+)*)\s+(?P<word>Non-?fatal|Fatal)\s+(?P<xc>XC\d)\s+i\d+\s+"
                   r"Link\s+(?P<link>-?\d+)\s+\((?P<intr>0x[0-9a-fA-F]{1,8})\s+(?P<status>0x[0-9a-fA-F]{1,8})(?=[\s)])",
                   re.I)


def parse_link_event(message: str) -> LinkEvent | None:
    """The unit, word, link, intrInfo and errorStatus of a 144-150 line's text; None when it has not
    them all (an older driver's wording, or a line cut before its errorStatus)."""
    match = _LINK.match(message.strip())
    if not match:
        return None
    return LinkEvent(match.group("unit"), not match.group("word").lower().startswith("non"), match.group("xc"),
                     int(match.group("link")), int(match.group("intr"), 16), int(match.group("status"), 16))


@dataclass(frozen=True)
class LineDecode:
    """What the decode says about one 144-150 line: the row that decides it, or why none does
    (``note``; the code's catalog row decides then)."""

    event: LinkEvent | None
    row: DecodeRow | None
    note: str = ""

    @property
    def words(self) -> str:
        """The decision in words, for a finding's message."""
        what = f"{self.event.unit} {self.event.word}" if self.event else "no intrInfo/errorStatus"
        if self.row is not None:
            return f"{what}, decoded: {self.row.resolution} ({self.row.fatality})"
        return f"{what}, not in the 144-150 decode: the code's action"


def _units(unit: str) -> set[str]:
    return {part.upper() for part in unit.split("/")}


def decode_line(code: int, message: str) -> LineDecode | None:
    """The decode of an Xid line's text after its code; None for a code outside 144-150."""
    if code not in DECODED:
        return None
    event = parse_link_event(message)
    if event is None:
        return LineDecode(None, None, "the line carries no unit, Fatal/Nonfatal word, intrInfo and errorStatus")
    fields = f"{event.unit} {event.word} intrInfo 0x{event.intrinfo:08x} errorStatus 0x{event.error_status:08x}"
    rows = [r for r in decode_table() if r.xid == code and r.matches(event.intrinfo, event.error_status)]
    named = [r for r in rows if _units(r.unit) & _units(event.unit)]
    rows = named or rows
    if not rows:
        return LineDecode(event, None, f"no row of the decode has {fields}")
    if len({(r.resolution, r.severity, r.action, r.fatal) for r in rows}) > 1:
        return LineDecode(event, None, f"rows {', '.join(str(r.number) for r in rows)} disagree on {fields}")
    row = rows[0]
    if row.fatal != event.fatal:
        return LineDecode(event, None, f"row {row.number} says {row.fatality}, the line says {event.word} ({fields})")
    return LineDecode(event, row)
