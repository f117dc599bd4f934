"""The figures issue 7 asks for, counted while the suite runs and printed at its end.

- faults injected on lab nodes, and how many of them the run survived (the test passed);
- check runs against lab nodes, and how many changed a node's digest (must be 0);
- fuzz cases run, and tracebacks found (must be 0).

Tests count through `inject_fault` (or `record_fault`), `count_check` and `count_fuzz_case`; the
numbers are printed in pytest's terminal summary and written to
$GPUCONF_FIGURES when that is set. Under pytest-xdist (`make test`) each worker counts its own and
hands them to the controller when it ends, which adds them up.
"""
from __future__ import annotations

import json
import os

import pytest

FIGURES = {"faults_injected": 0, "faults_survived": 0, "fault_kinds": {}, "check_runs": 0,
           "check_runs_digest_changed": 0, "fuzz_cases": 0, "fuzz_tracebacks": 0}
_this_test: list[str] = []


def inject_fault(lab, node: str, kind: str, *args: str):
    """Inject a lab fault, counted; it is survived when the test that injected it passes."""
    result = lab.fault(node, kind, *args)
    if kind not in ("sshd-up", "clear"):
        record_fault(kind)
    return result


def record_fault(kind: str) -> None:
    """Count a fault the test makes itself, not through the lab (a SIGINT, a second run on a host)."""
    FIGURES["faults_injected"] += 1
    FIGURES["fault_kinds"][kind] = FIGURES["fault_kinds"].get(kind, 0) + 1
    _this_test.append(kind)


def count_check(digest_changed: bool) -> None:
    FIGURES["check_runs"] += 1
    FIGURES["check_runs_digest_changed"] += int(digest_changed)


def count_fuzz_case(tracebacks: int = 0) -> None:
    FIGURES["fuzz_cases"] += 1
    FIGURES["fuzz_tracebacks"] += tracebacks


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _this_test.clear()   # before the fixtures run: a fault a fixture injects belongs to this test


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.passed:
        FIGURES["faults_survived"] += len(_this_test)


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:   # an xdist worker: the controller adds it to its own
        workeroutput["gpuconf_figures"] = json.dumps(FIGURES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller, as each worker ends: its figures join the controller's."""
    figures = json.loads(getattr(node, "workeroutput", {}).get("gpuconf_figures", "{}"))
    for key, value in figures.items():
        if key == "fault_kinds":
            for kind, count in value.items():
                FIGURES["fault_kinds"][kind] = FIGURES["fault_kinds"].get(kind, 0) + count
        else:
            FIGURES[key] += value


def pytest_terminal_summary(terminalreporter):
    if not any(FIGURES[k] for k in ("faults_injected", "check_runs", "fuzz_cases")):
        return
    write = terminalreporter.write_line
    terminalreporter.section("reliability figures")
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(FIGURES["fault_kinds"].items()))
    write(f"faults injected: {FIGURES['faults_injected']} ({kinds}); survived: {FIGURES['faults_survived']}")
    write(f"check runs on lab nodes: {FIGURES['check_runs']}; digest changed: {FIGURES['check_runs_digest_changed']}")
    write(f"fuzz cases: {FIGURES['fuzz_cases']}; tracebacks: {FIGURES['fuzz_tracebacks']}")
    if os.environ.get("GPUCONF_FIGURES"):
        with open(os.environ["GPUCONF_FIGURES"], "w") as handle:
            json.dump(FIGURES, handle, indent=2)
