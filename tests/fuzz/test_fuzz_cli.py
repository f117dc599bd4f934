"""Mutated projects through validate, check and apply: never a traceback, never an internal
error, only documented exit codes.

Deterministic in the suite: hypothesis is derandomized (the same GPUCONF_FUZZ_EXAMPLES cases,
default 300, every run), and every input that ever failed, stored in tests/fuzz/found/, is
replayed. Random exploration is `make fuzz` (bench/fuzz.py), which prints its seed and adds
what it finds to that corpus.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from tests.figures import count_fuzz_case
from tests.fuzz.corpus import SEED, Case, cases
from tests.fuzz.found import load_all
from tests.fuzz.harness import closed_port, describe, run_case

EXAMPLES = int(os.environ.get("GPUCONF_FUZZ_EXAMPLES", "300"))
PORT = closed_port()


def test_the_seed_project_is_valid_and_connects_nowhere(tmp_path):
    """The fuzzer starts from a project that validates, and whose hosts are unreachable."""
    validate, check, apply = run_case(Case({p: t.encode() for p, t in SEED.items()}), tmp_path / "p", PORT)
    assert validate.code == 0, validate.stderr
    # node1 (the first batch of serial [1, "50%"]) is unreachable: 8; that spends the seed's 20 %
    # max_fail_percentage, so node2's tasks are not run, unknown: 4
    assert check.code == 12 and apply.code == 12, check.stdout + check.stderr
    assert "unreachable" in check.stdout and "connection refused" in check.stdout
    assert "max_fail_percentage exceeded: 1 hosts not started" in check.stdout


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(case=cases())
def test_no_input_gives_a_traceback(tmp_path, case):
    outcomes = run_case(case, tmp_path / "p", PORT)
    count_fuzz_case(sum(1 for o in outcomes if o.problem == "a Python traceback"))
    for outcome in outcomes:
        assert outcome.problem is None, describe(case, outcome)


@pytest.mark.parametrize("key, case", load_all(), ids=lambda value: value if isinstance(value, str) else "")
def test_no_input_that_ever_failed_fails_again(tmp_path, key, case):
    for outcome in run_case(case, tmp_path / "p", PORT):
        assert outcome.problem is None, f"{key}: " + describe(case, outcome)
