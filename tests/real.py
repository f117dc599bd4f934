"""The real captures: command outputs taken on real machines, kept in the project with their
sources (tests/fixtures/real/SOURCES.md), so that a clone anywhere runs every parser test.

One loader for the whole suite. A capture that is missing fails the test that asked for it: it is
never a skip, which would hide lost coverage behind a green run."""
from __future__ import annotations

from pathlib import Path

import pytest

REAL = Path(__file__).resolve().parent / "fixtures" / "real"


def real_path(rel: str) -> Path:
    """The path of capture `rel` (relative to tests/fixtures/real); fails the test if it is missing."""
    path = REAL / rel
    if not path.is_file():
        pytest.fail(f"real capture {rel} is missing from {REAL} (see its SOURCES.md)", pytrace=False)
    return path


def read_real(rel: str) -> str:
    """Capture `rel`'s text exactly as the tool printed it."""
    return real_path(rel).read_text(encoding="utf-8")
