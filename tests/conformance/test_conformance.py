"""The quick subset of the conformance suite (tests/conformance/README.md): a few of ansible-core's
integration targets, each run by ansible-core 2.19.14 and by gpuconf through the `ansible-playbook`
shim; every run the oracle passes must pass under gpuconf. `make conformance` runs them all."""
from __future__ import annotations

import pytest

from tests.conformance.runner import ANSIBLE_VENV, run_target

# targets whose every run ansible-core passes gpuconf passes too, and quick (about a minute in all on
# a quiet machine): any_errors_fatal (a failure on one host fails the others' blocks, rescue recovers
# them, handlers forced), register (an invalid name refused as Ansible refuses it), lookup('file')
QUICK = ("any_errors_fatal", "register", "lookup_file")


@pytest.mark.parametrize("target", QUICK)
def test_every_run_the_oracle_passes_passes_under_gpuconf(target, tmp_path):
    assert (ANSIBLE_VENV / "bin" / "ansible-playbook").exists(), "make tests/.ansible-venv/.installed-stamp"
    result = run_target(target, tmp_path)
    passed = [run for run in result.runs if run.oracle == "pass"]
    assert passed, f"{target}: the oracle passes no run (its venv, or this machine's setup)"
    failing = [f"run {run.index} ({run.tool} {' '.join(run.argv)}): {run.gpuconf}: {run.why} {run.checks}"
               for run in passed if run.gpuconf != "pass"]
    assert not failing, "\n".join(failing)
