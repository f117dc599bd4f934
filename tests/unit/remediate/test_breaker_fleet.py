"""Issue 35, MEDIUM 5, and issue 36, item 3: the circuit breaker's count lives with the fleet's
history, not with one run's scope or flags. A tripped breaker stops every later run, with or
without --breaker, whatever its --limit, until --reset-breaker; `--breaker` takes a share and an
absolute bound together (the stricter wins), the share counted over the nodes that have GPUs."""
from __future__ import annotations

import time

from gpuconf.cli.main import main
from gpuconf.remediate import plan
from gpuconf.remediate import summary as out
from gpuconf.remediate.breaker import Breaker, parse_breaker
from gpuconf.remediate.history import TRIPPED, History
from gpuconf.remediate.loop import Remediation, Settings
from tests.unit.remediate.fakes import FakeSlurm
from tests.unit.remediate.test_hardware import NODES, faulty


def run(slurm, hooks, tmp_path, scope, breaker=None):
    settings = Settings(budget=plan.parse_budget("6"), poll=0.001, drain_timeout=5, run_id="test",
                        breaker=breaker or Breaker())
    with History(tmp_path / "state") as history:
        return Remediation({n: n for n in scope}, slurm, hooks, history, settings).run()


def test_a_tripped_breaker_stops_a_run_without_breaker(tmp_path):
    slurm = FakeSlurm(NODES)
    with History(tmp_path / "state") as history:
        history.breaker_event(TRIPPED, "2 node(s) needed a hardware action (n1, n2), --breaker 2")
    summary = run(slurm, faulty(slurm, ["n3"]), tmp_path, NODES)
    assert summary.nodes["n3"].outcome == out.NOT_STARTED and slurm.node("n3").in_service
    assert summary.breaker and summary.exit_code == 6


def test_runs_limited_to_one_node_each_count_the_whole_fleet(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = faulty(slurm, ["n1", "n2", "n3"])
    breaker = parse_breaker("2", 86400)
    for node in ("n1", "n2"):
        run(slurm, hooks, tmp_path, [node], breaker)
    third = run(slurm, hooks, tmp_path, ["n3"], breaker)
    assert third.nodes["n3"].outcome == out.NOT_STARTED and slurm.node("n3").in_service
    assert third.breaker and "n1, n2" in third.breaker


def test_a_share_and_a_bound_together_the_stricter_wins():
    both = parse_breaker("10%,3", 86400)
    assert (both.limit(200), both.limit(20), both.limit(5)) == (3, 2, 1)
    assert parse_breaker("3,10%", 86400) == both and str(both) == "10%,3"
    assert parse_breaker("2", 60).limit(100) == 2 and parse_breaker("50%", 60).limit(4) == 2


def test_the_share_counts_the_nodes_that_have_gpus(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = faulty(slurm, ["n1", "n2"])
    hooks.no_gpus = {"n4", "n5", "n6"}  # login and storage nodes in the playbook's hosts
    summary = run(slurm, hooks, tmp_path, NODES, parse_breaker("34%", 86400))  # 34% of 3 GPU nodes: 1
    assert len(summary.of(out.HARDWARE)) == 1 and summary.breaker


def test_resetting_a_breaker_that_has_not_tripped_changes_nothing(tmp_path, capsys):
    state = tmp_path / "state"
    with History(state):
        pass
    assert main(["remediate", "--reset-breaker", "--state-dir", str(state)]) == 0
    assert "not tripped: nothing to reset" in capsys.readouterr().out
    with History(state) as history:
        assert history.breaker_events() == []


def test_a_node_reset_then_taken_by_a_person_still_counts(tmp_path):
    from gpuconf.remediate.breaker import counted
    from gpuconf.remediate.decision import decide_action
    from tests.unit.remediate.fakes import FakeHooks
    from tests.unit.remediate.test_hardware import xid

    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n2"] = decide_action([xid(48, "reset_gpu")])
    hooks.during_action = lambda: slurm.hand_drain("n2", "admin: mine now")
    summary = run(slurm, hooks, tmp_path, NODES)
    assert summary.nodes["n2"].outcome == out.FOREIGN
    with History(tmp_path / "state") as history:
        assert [r.host for r in counted(history.records(), 0, 86400, time.time() + 1)] == ["n2"]


def test_a_tripped_breaker_still_lets_a_counted_node_finish_to_its_hold(tmp_path):
    """Found by `make chaos` (seed 136290): SIGKILL during the apply after the ladder's reboot; the rerun's
    breaker (1 of 2 GPU nodes) counted that very node and tripped, and left it drained as a failure
    instead of the hold its surviving fault is. A node the breaker counts already costs it nothing more."""
    import threading

    from gpuconf.remediate.decision import decide_action
    from tests.unit.remediate.fakes import FakeHooks
    from tests.unit.remediate.test_hardware import xid

    slurm = FakeSlurm(["n1", "n2"])
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n1"] = decide_action([xid(79, "reboot_node")])
    hooks.sticky.add("n1")
    stop = threading.Event()
    hooks.during_apply = stop.set
    breaker = parse_breaker("50%,2", 86400)
    settings = Settings(budget=plan.parse_budget("1"), poll=0.001, drain_timeout=5, run_id="t", breaker=breaker)
    with History(tmp_path / "state") as history:
        Remediation({"n1": "n1", "n2": "n2"}, slurm, hooks, history, settings, stop=stop).run()
    hooks.during_apply = None
    again = run(slurm, hooks, tmp_path, ["n1", "n2"], breaker)
    assert again.nodes["n1"].outcome == out.HARDWARE, again.nodes["n1"]
    assert slurm.node("n1").reason.startswith("gpuconf: hardware: Xid 79")
