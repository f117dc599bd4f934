"""docs/health.md's verdict table is the data's: rendered from the Xid, decode, SXid and recovery-action
tables (gpuconf/facts/verdict_table.py), and equal to what the doc holds between its markers."""
from __future__ import annotations

from gpuconf.facts.sxid import sxid_catalog
from gpuconf.facts.verdict_table import BEGIN, END, codes, render
from gpuconf.facts.xid import xid_catalog
from gpuconf.facts.xid_decode import decode_table
from tests.paths import ROOT

DOC = ROOT / "docs" / "health.md"


def test_the_doc_holds_the_table_rendered_from_the_data():
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END) + 1
    assert text[start:end] == render(), "docs/health.md is stale: python -m gpuconf.facts.verdict_table"


def test_every_code_and_decode_row_is_in_the_table():
    table = render()
    xid_rows = [line for line in table.splitlines() if line.startswith("| ") and "xiderrorsmapping" in line
                or "catalog_generated.go (NVIDIA catalog" in line]
    listed = {part for line in xid_rows for part in expand(line.split(" | ")[0].lstrip("| "))}
    assert listed == set(xid_catalog())
    decode = [line for line in table.splitlines() if "`------" in line]
    rows = {n for line in decode for n in expand(line.rstrip(" |").rsplit("| ", 1)[1])}
    assert rows == {row.number for row in decode_table()}
    sxids = table[table.index("### NVSwitch SXid"):table.index("### The driver's recovery")]
    listed = {n for line in sxids.splitlines()[4:] if line.startswith("| ") for n in expand(line.split(" | ")[0][2:])}
    assert listed == set(sxid_catalog())


def expand(text: str) -> set[int]:
    numbers: set[int] = set()
    for part in text.split(", "):
        low, _, high = part.partition("-")
        numbers.update(range(int(low), int(high or low) + 1))
    return numbers


def test_codes_are_written_as_ranges():
    assert codes([1, 2, 3, 5, 7, 8, 10]) == "1-3, 5, 7, 8, 10"
