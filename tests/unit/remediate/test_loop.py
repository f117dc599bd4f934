"""The remediation loop over a fake scheduler and fake hosts: waves within the budget, no apply
while jobs run, foreign drains untouched, failures and lemons, busy nodes, and a stopped run
carried on from its journal."""
from __future__ import annotations

import threading
import time

import pytest

from gpuconf.remediate import plan
from gpuconf.remediate import summary as out
from gpuconf.remediate.history import History
from gpuconf.remediate.lemon import LemonRule
from gpuconf.remediate.loop import Remediation, Settings
from tests.unit.remediate.fakes import FakeHooks, FakeSlurm

NODES = [f"n{i}" for i in range(1, 7)]


def remediate(slurm, hooks, tmp_path, budget="1", stop=None, lines=None, **kw):
    history = History(tmp_path / "state")
    settings = Settings(budget=plan.parse_budget(budget), poll=0.001, drain_timeout=kw.pop("drain_timeout", 5),
                        run_id="test", **kw)
    say = (lines.append if lines is not None else lambda line: None)
    try:
        return Remediation({n: n for n in slurm.state}, slurm, hooks, history, settings, say, stop).run()
    finally:
        history.close()


def outcomes(tmp_path, host):
    with History(tmp_path / "state") as history:
        return [r.outcome for r in history.records(host)]


def test_two_drifted_nodes_one_at_a_time_jobs_first_then_both_back(tmp_path):
    slurm = FakeSlurm(NODES)
    for name in NODES:
        slurm.state[name].jobs = 3
    hooks = FakeHooks(slurm, drifted=["n2", "n5"])
    lines: list[str] = []
    summary = remediate(slurm, hooks, tmp_path, lines=lines)
    assert slurm.max_out == 1 and slurm.max_seen == 1  # a resumed node answers before the next is drained
    assert sorted(hooks.applied) == ["n2", "n5"]  # FakeHooks.apply asserts: drained, no job running
    assert {n.host for n in summary.of(out.RESUMED)} == {"n2", "n5"}
    assert summary.exit_code == 0 and summary.waves == 2
    assert all(slurm.node(n).in_service for n in NODES)
    assert [c[0] for c in slurm.calls if c[1] == "n2"] == ["drain", "reboot", "drain", "resume"]
    assert any(line.startswith("n2: drain: gpuconf: drift:") for line in lines)
    again = remediate(slurm, hooks, tmp_path)
    assert again.exit_code == 0 and len(again.of(out.IN_SYNC)) == 6 and again.waves == 0
    assert sorted(hooks.applied) == ["n2", "n5"]


def test_a_percentage_budget_takes_several_nodes_per_wave(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, drifted=["n1", "n2", "n3", "n4"])
    summary = remediate(slurm, hooks, tmp_path, budget="34%")  # 2 of 6
    assert slurm.max_out == 2 and summary.waves == 2 and summary.exit_code == 0


def test_a_node_drained_by_hand_is_never_resumed_and_spends_the_budget(tmp_path):
    slurm = FakeSlurm(NODES)
    slurm.hand_drain("n1", "bob: fan replacement")
    hooks = FakeHooks(slurm, drifted=["n1", "n3"])
    summary = remediate(slurm, hooks, tmp_path, budget="1")
    assert slurm.state["n1"].reason == "bob: fan replacement" and "n1" not in hooks.applied
    assert summary.nodes["n1"].outcome == out.FOREIGN and summary.nodes["n3"].outcome == out.NOT_STARTED
    assert slurm.max_out <= 1 and summary.max_out_of_service == 1 and summary.exit_code == 2
    summary = remediate(slurm, hooks, tmp_path, budget="2")
    assert summary.nodes["n3"].outcome == out.RESUMED and summary.nodes["n1"].outcome == out.FOREIGN
    assert not any(c == ("resume", "n1") for c in slurm.calls)


def test_a_clean_node_drained_by_hand_is_reported_but_exits_0(tmp_path):
    slurm = FakeSlurm(NODES)
    slurm.hand_drain("n4", "maintenance")
    summary = remediate(slurm, FakeHooks(slurm), tmp_path)
    assert summary.nodes["n4"].outcome == out.FOREIGN and summary.exit_code == 0
    assert any("maintenance" in line for line in summary.lines())


def test_a_fault_that_survives_is_remediation_failed_then_a_lemon(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, broken=["n6"])
    summary = remediate(slurm, hooks, tmp_path)
    assert summary.nodes["n6"].outcome == out.FAILED and summary.exit_code == 6
    assert slurm.state["n6"].reason.startswith("gpuconf: remediation failed: failed: Xid errors")
    for _ in range(2):
        summary = remediate(slurm, hooks, tmp_path, budget="1")
        assert summary.nodes["n6"].outcome == out.FAILED  # already out: costs no budget, tried again
    assert hooks.applied == ["n6"] * 3
    summary = remediate(slurm, hooks, tmp_path)
    assert summary.nodes["n6"].outcome == out.LEMON and hooks.applied == ["n6"] * 3
    assert slurm.state["n6"].reason.startswith("gpuconf: lemon (3 remediations in 7d: ")
    summary = remediate(slurm, hooks, tmp_path)
    assert summary.nodes["n6"].outcome == out.STILL_LEMON and summary.exit_code == 2
    assert outcomes(tmp_path, "n6") == ["failed", "failed", "failed", "lemon"]


def test_a_lemon_fixed_by_a_person_stays_drained_until_its_history_ages(tmp_path):
    slurm = FakeSlurm(NODES)
    with History(tmp_path / "state") as history:
        for days in (1, 2, 3):
            history.add("n2", "n2", "failed", "gpuconf: failed: x", started=time.time() - days * 86400)
    slurm.hand_drain("n2", "gpuconf: lemon (3 remediations in 7d: ...)")
    summary = remediate(slurm, FakeHooks(slurm), tmp_path)
    assert summary.nodes["n2"].outcome == out.STILL_LEMON and not slurm.node("n2").in_service
    summary = remediate(slurm, FakeHooks(slurm), tmp_path, lemon=LemonRule(3, 86400 * 1.5))
    assert summary.nodes["n2"].outcome == out.VERIFIED and slurm.node("n2").in_service


def test_a_node_still_busy_at_the_drain_timeout_is_resumed_and_retried_later(tmp_path):
    slurm = FakeSlurm(NODES)
    slurm.state["n1"].jobs = 10 ** 9
    hooks = FakeHooks(slurm, drifted=["n1", "n2"])
    lines: list[str] = []
    summary = remediate(slurm, hooks, tmp_path, drain_timeout=0.05, lines=lines)
    assert summary.nodes["n1"].outcome == out.SKIPPED_BUSY and summary.nodes["n2"].outcome == out.RESUMED
    assert slurm.node("n1").in_service and "n1" not in hooks.applied and slurm.max_out == 1
    assert [c[0] for c in slurm.calls if c[1] == "n1"] == ["drain", "resume", "drain", "resume"]  # one retry
    assert summary.exit_code == 2 and summary.waves == 3
    assert outcomes(tmp_path, "n1") == ["skipped_busy", "skipped_busy"]


def test_interrupted_mid_apply_leaves_the_node_drained_and_the_rerun_finishes_it(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, drifted=["n3", "n4"])
    stop = threading.Event()
    hooks.during_apply = stop.set
    summary = remediate(slurm, hooks, tmp_path, stop=stop)
    assert summary.interrupted and summary.exit_code == 130
    assert summary.nodes["n3"].outcome == out.INTERRUPTED and summary.nodes["n4"].outcome == out.NOT_STARTED
    assert slurm.node("n3").ours and not slurm.node("n3").in_service
    with History(tmp_path / "state") as history:
        (open_record,) = history.open_records().values()
        assert (open_record.host, open_record.step) == ("n3", "apply")
    hooks.during_apply = None
    lines: list[str] = []
    summary = remediate(slurm, hooks, tmp_path, lines=lines)
    assert summary.exit_code == 0 and {n.host for n in summary.of(out.RESUMED)} == {"n3", "n4"}
    assert any("n3: journal: the last run stopped at 'apply'" in line for line in lines)
    with History(tmp_path / "state") as history:
        assert [r.outcome for r in history.records("n3")] == ["resumed"]  # one remediation, not two
        assert not history.open_records()


@pytest.mark.parametrize("step", ["drain", "wait", "apply", "verify", "fail"])
def test_a_killed_run_at_any_step_is_finished_by_the_next_and_counted_once(tmp_path, step):
    """What a SIGKILL leaves: the journal's last step written, the node drained with gpuconf's reason."""
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, drifted=["n2"])
    with History(tmp_path / "state") as history:
        history.add("n2", "n2", "failed", "gpuconf: drift: x")
        history.add("n2", "n2", "failed", "gpuconf: drift: x")
        rid = history.begin("n2", "n2", "gpuconf: drift: x", "killed", step=step)
    slurm.drain("n2", "gpuconf: drift: x")
    summary = remediate(slurm, hooks, tmp_path)
    assert summary.nodes["n2"].outcome == out.RESUMED and slurm.node("n2").in_service
    with History(tmp_path / "state") as history:
        records = history.records("n2")
        assert [r.outcome for r in records] == ["failed", "failed", "resumed"] and records[-1].id == rid


def test_a_run_killed_before_its_drain_took_effect_is_closed_and_started_afresh(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, drifted=["n2"])
    with History(tmp_path / "state") as history:
        history.begin("n2", "n2", "gpuconf: drift: x", "killed", step="drain")
    summary = remediate(slurm, hooks, tmp_path)
    with History(tmp_path / "state") as history:
        assert [r.outcome for r in history.records("n2")] == ["interrupted", "resumed"]
    assert summary.nodes["n2"].outcome == out.RESUMED


def test_a_check_interrupted_decides_nothing(tmp_path):
    """An interrupted check leaves tasks out: a drained node must not be resumed on what it did not check."""
    slurm = FakeSlurm(NODES)
    slurm.drain("n1", "gpuconf: remediation failed: x")
    stop = threading.Event()
    hooks = FakeHooks(slurm, drifted=["n2"])
    checking = hooks.check

    def interrupted_check(hosts):
        stop.set()
        return checking(hosts)

    hooks.check = interrupted_check
    summary = remediate(slurm, hooks, tmp_path, stop=stop)
    assert summary.exit_code == 130 and slurm.calls == [("drain", "n1", "gpuconf: remediation failed: x")]
    assert not hooks.applied and {n.outcome for n in summary.nodes.values()} == {out.NOT_STARTED}
