"""DCGM's command line: ``dcgmi diag -r N`` (its table, and its JSON with ``--json``) and
``dcgmi health -c -j``.

``dcgmi diag`` prints a table of tests under category rows::

    +---------------------------+------------------------------------------------+
    | Diagnostic                | Result                                         |
    +===========================+================================================+
    |-----  Deployment  --------+------------------------------------------------|
    | Denylist                  | Pass                                           |
    +-----  Integration  -------+------------------------------------------------+
    | PCIe                      | Fail - GPU: 3                                  |
    |                           | details continue on the next row               |

A result is ``Pass``, ``Fail``, ``Warn``, ``Skip``; a row whose first cell is empty
continues the row above. The table ends with a ``+---...---+`` border line after the
last row: output without it was cut short, and the diag is ``complete=False`` (a test
cut mid-row is left out, never read as a pass).

``dcgmi health -c -j`` prints one JSON object: ``body`` -> ``Overall Health`` ->
``value`` (``Healthy``, ``Warning``, ``Failure``), and per GPU incidents under
``GPU``/entity keys. Text around it (a transcript's prompts) is skipped. DCGM's health
watch can say Healthy while a GPU awaits a reset (DCGM issue 263): never read it alone.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpuconf.files.values import JSONValue, items_of

_CATEGORY = re.compile(r"^[|+]-+\s+(.+?)\s+-+\+")
_ROW = re.compile(r"^\|\s(.*?)\s*\|\s(.*?)\s*\|$")
_BORDER = re.compile(r"^\+[-=+]+\+$")


@dataclass(frozen=True)
class DiagTest:
    category: str
    test: str
    result: str  # Pass, Fail, Warn, Skip
    details: str = ""
    gpu: int | None = None  # the GPU (DCGM entity id) of a per-GPU result (JSON); None for the table's rows


@dataclass(frozen=True)
class DiagReport:
    tests: tuple[DiagTest, ...]
    complete: bool
    version: str | None = None    # DCGM's, from the JSON's metadata
    incomplete: str = ""          # why it is not whole ("" when it is): gpuconf.facts.common

    @property
    def failed(self) -> tuple[DiagTest, ...]:
        return tuple(t for t in self.tests if t.result.lower().startswith("fail"))


def parse_dcgmi_diag_table(text: str) -> DiagReport:
    """The tests of a ``dcgmi diag`` table; ``complete`` only when the closing border is there."""
    tests: list[list[str]] = []
    category, started, closed = "", False, False
    for line in (raw.rstrip() for raw in text.splitlines()):
        if match := _CATEGORY.match(line):
            category, closed = match.group(1), False
            continue
        if _BORDER.match(line):
            closed = started
            continue
        match = _ROW.match(line)
        if not match:
            closed = closed and not line.strip().startswith("|")
            continue
        name, result = match.group(1).strip(), match.group(2).strip()
        if name == "Diagnostic" and result == "Result":
            started = True
            continue
        closed = False
        if not name and tests:  # a continuation of the row above
            tests[-1][3] = (tests[-1][3] + " " + result).strip()
            continue
        verdict, _, details = result.partition(" - ")
        tests.append([category, name, verdict.strip(), details.strip()])
    return DiagReport(tuple(DiagTest(row[0], row[1], row[2], row[3]) for row in tests), started and closed)


@dataclass(frozen=True)
class HealthReport:
    overall: str | None  # Healthy, Warning, Failure; None when the JSON is absent or cut
    incidents: tuple[str, ...] = ()
    incomplete: str = ""  # why it is not whole ("" when it is): gpuconf.facts.common


def _messages(node: JSONValue) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key.lower() in ("error", "message", "incident") and isinstance(value, str):
                found.append(value)
            else:
                found += _messages(value)
    elif isinstance(node, list):
        for item in node:
            found += _messages(item)
    return found


def parse_dcgmi_health(text: str) -> HealthReport:
    """The overall verdict and incident messages of ``dcgmi health -c -j``."""
    start = text.find("{")
    if start < 0:
        return HealthReport(None)
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:   # an object begun and never closed: cut short, not known
        return HealthReport(None, incomplete=f"dcgmi's JSON is cut short or malformed ({exc.msg})")
    body = data.get("body", {}) if isinstance(data, dict) else {}
    overall = body.get("Overall Health", {}) if isinstance(body, dict) else {}
    value = overall.get("value") if isinstance(overall, dict) else None
    rest = {k: v for k, v in body.items() if k != "Overall Health"} if isinstance(body, dict) else {}
    return HealthReport(value if isinstance(value, str) else None, tuple(_messages(rest)))


def _diag_body(data: object) -> object:
    """The test categories of DCGM 4 (``DCGM Diagnostic``) or 3 (``DCGM GPU Diagnostic``)."""
    if not isinstance(data, dict):
        return None
    body = data.get("DCGM Diagnostic", data.get("DCGM GPU Diagnostic"))
    return body.get("test_categories") if isinstance(body, dict) else None


def _result_tests(category: str, test: Mapping[str, JSONValue]) -> list[DiagTest]:
    name = str(test.get("name", ""))
    summary = test.get("test_summary")
    summary_status = summary.get("status") if isinstance(summary, dict) else None
    found = []
    for result in items_of(test.get("results")):
        if not isinstance(result, dict):
            continue
        gpu = result.get("entity_id", result.get("gpu_id"))       # DCGM 4, DCGM 3
        if result.get("entity_group", "GPU") != "GPU":
            continue
        details = "; ".join(str(w.get("warning", "")) for w in items_of(result.get("warnings")) if isinstance(w, dict))
        found.append(DiagTest(category, name, str(result.get("status", summary_status or "")), details,
                              int(str(gpu)) if str(gpu).isdigit() else None))
    if not found and summary_status:
        found.append(DiagTest(category, name, str(summary_status)))
    return found


def parse_dcgmi_diag_json(text: str) -> DiagReport:
    """``dcgmi diag -r N --json``: one test per (test, GPU), DCGM 4's shape (``DCGM
    Diagnostic``, ``results[].entity_id``/``status``/``warnings``, ``test_summary``) or
    3's (``DCGM GPU Diagnostic``, ``results[].gpu_id``). Text around the JSON is skipped;
    JSON cut short, or without test categories, is incomplete: never a pass."""
    start = text.find("{")
    if start < 0:
        return DiagReport((), False, incomplete="no JSON in dcgmi's output")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        return DiagReport((), False, incomplete=f"dcgmi's JSON is cut short or malformed ({exc.msg})")
    categories = _diag_body(data)
    body = data.get("DCGM Diagnostic") if isinstance(data, dict) else None
    error = body.get("runtime_error") if isinstance(body, dict) else None
    if error and not categories:   # DCGM 4's schema: the diag could not run, and says why
        return DiagReport((), False, incomplete=f"dcgmi diag could not run: {str(error)[:200]}")
    if not isinstance(categories, list) or not categories:
        return DiagReport((), False, incomplete="dcgmi's JSON has no test categories")
    tests = [t for c in categories if isinstance(c, dict) for test in c.get("tests") or [] if isinstance(test, dict)
             for t in _result_tests(str(c.get("category", "")), test)]
    metadata = data.get("metadata") if isinstance(data, dict) else None
    version = metadata.get("version") if isinstance(metadata, dict) else None
    return DiagReport(tuple(tests), bool(tests), str(version) if version else None,
                      "" if tests else "dcgmi's JSON lists no test results")
