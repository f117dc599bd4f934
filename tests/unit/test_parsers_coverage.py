"""Every real capture under ../shared/fixtures/real has a parser test that asserts values
from it: each tests/unit/test_parsers_*.py lists the files it checks in ``CASES``."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REAL = Path(os.environ.get("GPUCONF_REAL_FIXTURES")
            or Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "real")


def claimed_files() -> dict[str, str]:
    claimed: dict[str, str] = {}
    for path in sorted(HERE.glob("test_parsers_*.py")):
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
    if not REAL.is_dir():
        pytest.skip(f"real fixtures not present at {REAL}")
    on_disk = {p.relative_to(REAL).as_posix() for p in REAL.rglob("*") if p.is_file() and p.name != "SOURCES.md"}
    claimed = claimed_files()
    assert sorted(on_disk - set(claimed)) == [], "fixtures without a parser test"
    assert sorted(set(claimed) - on_disk) == [], "tests naming fixtures that do not exist"
