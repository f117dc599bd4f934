"""Issue 35, HIGH 2: a node drained for a fault (by its health check, the gate, `check --slurm` or
remediate) is resumed only after a verification finds it clean. "Skipped busy" resumes only a drain
that this run set for drift alone: a faulty node whose job outlives --drain-timeout stays drained
(its job goes on; no new one starts on a broken GPU)."""
from __future__ import annotations

from gpuconf.remediate import plan
from gpuconf.remediate import summary as out
from gpuconf.remediate.breaker import Breaker
from gpuconf.remediate.decision import decide_action
from gpuconf.remediate.history import History
from gpuconf.remediate.loop import Remediation, Settings
from tests.unit.remediate.fakes import FakeHooks, FakeSlurm
from tests.unit.remediate.test_hardware import NODES, xid

HEALTHCHECK = "gpuconf: failed: GPU health: GPU 0 (0000:3b:00.0) is lost from the bus"


def remediate(slurm, hooks, tmp_path):
    settings = Settings(budget=plan.parse_budget("2"), poll=0.001, drain_timeout=0.2, run_id="test",
                        breaker=Breaker())
    with History(tmp_path / "state") as history:
        return Remediation({n: n for n in slurm.state}, slurm, hooks, history, settings).run()


def test_a_node_the_health_check_drained_under_a_long_job_stays_drained(tmp_path):
    slurm = FakeSlurm(NODES)
    slurm.hand_drain("n2", HEALTHCHECK, base="MIXED")
    slurm.state["n2"].jobs = -1  # a training job longer than --drain-timeout
    hooks = FakeHooks(slurm)
    hooks.faults["n2"] = decide_action([xid(79, "reboot_node")])
    summary = remediate(slurm, hooks, tmp_path)
    assert not slurm.node("n2").in_service and slurm.node("n2").reason.startswith("gpuconf: ")
    assert ("resume", "n2") not in slurm.calls and hooks.applied == []
    assert summary.nodes["n2"].outcome == out.SKIPPED_BUSY and "left drained" in summary.nodes["n2"].detail


def test_a_fault_found_in_service_under_a_long_job_is_drained_and_stays_so(tmp_path):
    slurm = FakeSlurm(NODES)
    slurm.state["n3"].jobs = -1
    hooks = FakeHooks(slurm)
    hooks.faults["n3"] = decide_action([xid(48, "reset_gpu")])
    remediate(slurm, hooks, tmp_path)
    assert not slurm.node("n3").in_service and ("resume", "n3") not in slurm.calls


def test_drift_alone_under_a_long_job_is_resumed_as_before(tmp_path):
    slurm = FakeSlurm(NODES)
    slurm.state["n4"].jobs = -1
    hooks = FakeHooks(slurm, drifted=["n4"])
    summary = remediate(slurm, hooks, tmp_path)
    assert slurm.node("n4").in_service and ("resume", "n4") in slurm.calls
    assert summary.nodes["n4"].outcome == out.SKIPPED_BUSY


def test_a_drift_drain_of_the_health_check_is_not_this_runs_and_stays(tmp_path):
    """A drift drain someone else of gpuconf's set (a controller's check --slurm) is not this run's
    to lift while the job runs: only a verification does."""
    slurm = FakeSlurm(NODES)
    slurm.hand_drain("n5", "gpuconf: drift: /etc/gpu.conf content", base="MIXED")
    slurm.state["n5"].jobs = -1
    hooks = FakeHooks(slurm, drifted=["n5"])
    remediate(slurm, hooks, tmp_path)
    assert not slurm.node("n5").in_service and ("resume", "n5") not in slurm.calls
