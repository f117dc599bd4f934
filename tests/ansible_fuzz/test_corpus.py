"""The corpus of generated programs (tests/ansible_fuzz/corpus/, `make ansible-fuzz` found them,
shrunk): each runs through gpuconf and must do what ansible-core 2.19.14 did, recorded in the
case (its `oracle`: per host the debug messages, the registered values, the recap; the files
written; the exit class). A case marked `expect: diverges` is a divergence still open in another
helper's class of issue 38: a strict xfail, so that its fix is noticed."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.ansible_fuzz.corpus import cases, load_case
from tests.ansible_fuzz.harness import compare, run_gpuconf, tools
from tests.ansible_fuzz.refusals import judged


@pytest.fixture(scope="module")
def gpuconf(tmp_path_factory):
    with tools(tmp_path_factory.mktemp("ansible-fuzz"), jobs=1, oracle=False) as both:
        yield both.gpuconf


def _params() -> list:
    params = []
    for path in cases():
        case = load_case(path)
        marks = [pytest.mark.xfail(strict=True, reason=f"class {case.get('class')}: {case.get('note', '')}")] \
            if case.get("expect") == "diverges" else []
        params.append(pytest.param(path, marks=marks, id=path.stem))
    return params


@pytest.mark.parametrize("path", _params())
def test_the_program_does_what_ansible_core_did(path: Path, gpuconf, tmp_path):
    case = load_case(path)
    ours = run_gpuconf(gpuconf, case["program"], tmp_path / "gpuconf")
    _, differences = judged(case["program"], case["oracle"], ours, compare(case["oracle"], ours))
    assert not differences, f"class {case.get('class')} ({case.get('note', '')}):\n" + "\n".join(differences) + \
        "\n--- gpuconf's output:\n" + ours.get("output", "")[-2000:]
