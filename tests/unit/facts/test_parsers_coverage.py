"""Every real capture under tests/fixtures/real has a parser test that asserts values
from it: each tests/unit/*/test_parsers_*.py lists the files it checks in ``CASES``."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.real import REAL, read_real

UNIT = Path(__file__).resolve().parents[1]   # tests/unit: each package's parser tests


def claimed_files() -> dict[str, str]:
    claimed: dict[str, str] = {}
    for path in sorted(UNIT.glob("*/test_parsers_*.py")):
        if path.name == Path(__file__).name:
            continue
        spec = importlib.util.spec_from_file_location(f"_coverage_{path.stem}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for rel in getattr(module, "CASES", ()):
            claimed[rel] = path.name
    return claimed


def test_every_real_fixture_has_a_parser_test() -> None:
    on_disk = {p.relative_to(REAL).as_posix() for p in REAL.rglob("*") if p.is_file() and p.name != "SOURCES.md"}
    claimed = claimed_files()
    assert sorted(on_disk - set(claimed)) == [], "fixtures without a parser test"
    assert sorted(set(claimed) - on_disk) == [], "tests naming fixtures that do not exist"


def test_a_missing_capture_fails_the_test_that_asks_for_it() -> None:
    with pytest.raises(pytest.fail.Exception, match="is missing from"):
        read_real("nvidia-smi/no-such-capture.txt")


def test_the_suite_reads_real_captures_only_from_the_project() -> None:
    """A clone anywhere, with nothing beside it, runs every test: no test reaches outside the
    repository for a capture, and every capture has its source in SOURCES.md."""
    tests = UNIT.parent
    outside = [p.relative_to(tests).as_posix() for p in tests.rglob("*.py")
               if "shared" + "/fixtures" in p.read_text(encoding="utf-8") or "GPUCONF_REAL" + "_FIXTURES" in
               p.read_text(encoding="utf-8")]
    assert outside == []
    sources = (REAL / "SOURCES.md").read_text(encoding="utf-8")
    on_disk = [p.relative_to(REAL).as_posix() for p in REAL.rglob("*") if p.is_file() and p.name != "SOURCES.md"]
    assert [rel for rel in on_disk if f"`{rel}`" not in sources] == []
