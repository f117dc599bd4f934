"""Issue 35's LOW findings, each a test that failed first: the drain reason and a hold's label name
the deciding fault, special files and non-finite numbers are refused with a clear error."""
from __future__ import annotations

import os

import pytest

from gpuconf.cli.main import main


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_catalog_refuses_a_device_or_a_fifo(special, tmp_path, capsys):
    if special == "fifo":
        special = str(tmp_path / "fifo")
        os.mkfifo(special)
    assert main(["catalog", "--from-redistrib", special]) == 1
    err = capsys.readouterr().err
    assert "not a regular file" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_gate_refuses_a_timeout_that_is_not_a_finite_number(value, capsys):
    """As a Prolog, `--nvidia-smi-timeout inf` drained every node (nvidia-smi's wait failed)."""
    assert main(["gate", "--nvidia-smi-timeout", value]) == 1
    err = capsys.readouterr().err
    assert "--nvidia-smi-timeout" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_collect_refuses_a_size_that_is_not_a_finite_number(value, tmp_path, capsys):
    inventory = tmp_path / "hosts"
    inventory.write_text("n1 ansible_host=127.0.0.1\n")
    assert main(["collect", "n1", "-i", str(inventory), "--max-size", value, "--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "--max-size" in err and "Traceback" not in err


def test_remediate_refuses_a_state_dir_that_is_a_file(tmp_path, capsys):
    state = tmp_path / "state"
    state.write_text("not a directory\n")
    assert main(["remediate", "--reset-breaker", "--state-dir", str(state)]) == 1
    err = capsys.readouterr().err
    assert f"--state-dir {state}" in err and "not a directory" in err and "Traceback" not in err


def test_the_drain_reason_names_the_deciding_fault_not_the_first_failed_task():
    from gpuconf.remediate.command import verdict
    from gpuconf.results import FaultCode, Finding, HostResult, Status, TaskResult

    xid79 = Finding("xid", "failure", "GPU 0 (0000:3b:00.0): Xid 79 (GPU has fallen off the bus) x1 this boot",
                    gpu=0, bus_id="0000:3b:00.0", value=1, action="reboot_node", code=FaultCode("Xid", 79), count=1)
    host = HostResult("n1", [
        TaskResult("n1", "health", "Persistence mode on every GPU now", Status.UNKNOWN,
                   error="nvidia-smi: driver_unresponsive"),
        TaskResult("n1", "health", "No Xid errors", Status.FAILED, findings=[xid79])])
    found = verdict(host, "n1", strict=False)
    assert found.finding.startswith("gpuconf: failed: GPU 0 (0000:3b:00.0): Xid 79"), found.finding
    assert found.finding.endswith("(+1 more)") and len(found.finding) <= 120


def test_a_drain_p2p_hold_names_the_drivers_action_not_only_xid_154():
    from gpuconf.remediate.decision import decide_action
    from gpuconf.remediate.hold import hold_reason
    from gpuconf.results import FaultCode, Finding

    line = Finding("xid", "failure", "GPU 0 (0000:3b:00.0): Xid 154 (GPU recovery action changed to Drain P2P) x1",
                   gpu=0, bus_id="0000:3b:00.0", value=1, action="drain_p2p", code=FaultCode("Xid", 154), count=1)
    reason = hold_reason(decide_action([line]), {"0000:3b:00.0": "SER"})
    assert reason == "gpuconf: hardware: drain_p2p (Xid 154) GPU SER 0000:3b:00.0"
