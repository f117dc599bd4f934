"""Issue 35, MEDIUM 7: a run carried on after SIGINT or SIGKILL keeps its `recovered:` mark (the
journal says which hardware action was taken, so the breaker counts it), and two runs with different
state directories never work on the same node at once (remediate holds the node's own lock)."""
from __future__ import annotations

import threading

from gpuconf.remediate import plan
from gpuconf.remediate import summary as out
from gpuconf.remediate.breaker import Breaker, counted
from gpuconf.remediate.decision import decide_action
from gpuconf.remediate.history import History
from gpuconf.remediate.loop import Remediation, Settings
from tests.unit.remediate.fakes import FakeHooks, FakeSlurm
from tests.unit.remediate.test_hardware import NODES, xid


def run(slurm, hooks, state, stop=None):
    settings = Settings(budget=plan.parse_budget("2"), poll=0.001, drain_timeout=5, run_id="test", breaker=Breaker())
    with History(state) as history:
        return Remediation({n: n for n in slurm.state}, slurm, hooks, history, settings, stop=stop).run()


def test_a_run_stopped_after_its_reset_is_carried_on_as_recovered(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n2"] = decide_action([xid(48, "reset_gpu")])
    stop = threading.Event()
    hooks.during_apply = stop.set  # SIGINT during the apply that follows the reset
    first = run(slurm, hooks, tmp_path / "state", stop)
    assert first.nodes["n2"].outcome == out.INTERRUPTED and ("n2", "reset") in hooks.actions
    hooks.during_apply = None
    second = run(slurm, hooks, tmp_path / "state")
    assert second.nodes["n2"].outcome == out.RESUMED
    with History(tmp_path / "state") as history:
        (record,) = history.records("n2")
        assert record.detail == "recovered: reset_gpu by reset", record
        assert [r.host for r in counted(history.records(), 0, 86400, record.ended + 1)] == ["n2"]


def test_two_runs_with_other_state_directories_never_reset_the_same_node(tmp_path):
    slurm = FakeSlurm(NODES)
    locks: dict[str, str] = {}
    first, second = FakeHooks(slurm, reboot=False), FakeHooks(slurm, reboot=False)
    first.locks = second.locks = locks  # the node's own lock, as both controllers reach it
    for hooks in (first, second):
        hooks.faults["n3"] = decide_action([xid(48, "reset_gpu")])
    during: list = []
    first.during_action = lambda: during.append(run(slurm, second, tmp_path / "other"))  # mid-reset
    run(slurm, first, tmp_path / "state")
    assert first.actions == [("n3", "reset")] and second.actions == []
    (other,) = during
    assert other.nodes["n3"].outcome == out.NOT_STARTED and "another gpuconf remediate" in other.nodes["n3"].detail
    assert not locks  # released at the end
