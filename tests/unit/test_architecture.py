"""docs/architecture.md is drawn from the code: its layer table names the layers of
tests/unit/test_layers.py, lowest first, and its "Every module, a line each" lists every module of
the product, and none that is gone. A module added, moved or removed fails this test until the doc
says so."""
from __future__ import annotations

import re

from tests.paths import ROOT
from tests.unit.test_layers import LAYERS

PACKAGE = ROOT / "gpuconf"
DOC = ROOT / "docs" / "architecture.md"
SECTION = "## Every module, a line each"


def listed() -> list[str]:
    text = DOC.read_text()
    assert SECTION in text, f"docs/architecture.md lost its section {SECTION!r}"
    section = text[text.index(SECTION):]
    following = section.find("\n## ", len(SECTION))
    section = section if following < 0 else section[:following]
    return re.findall(r"^- `(gpuconf/[^`]+\.py)`: \S", section, re.M)


def test_every_module_is_listed_with_what_it_owns():
    tree = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py"))
    written = listed()
    assert len(written) == len(set(written)), "a module is listed twice"
    assert sorted(set(tree) - set(written)) == [], "modules the doc does not list"
    assert sorted(set(written) - set(tree)) == [], "modules the doc lists that are gone"


def test_the_layer_table_names_the_layers_of_test_layers():
    rows = [line for line in DOC.read_text().splitlines() if re.match(r"\| \d+ \|", line)]
    named = [set(re.findall(r"`([a-z_]+)`", row.split("|")[2])) for row in rows]
    assert named == LAYERS
