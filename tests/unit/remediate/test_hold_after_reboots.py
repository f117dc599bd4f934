"""Issue 36, item 3: the hardware hold after a fault survives N reboots of the node within a window
(`--hold-after-reboots`, default 1 as before; gpud escalates after two), with per-code overrides in the
catalog data (gpuconf/facts/xid_reboots.csv)."""
from __future__ import annotations

import time

from gpuconf.cli.main import main
from gpuconf.remediate import decision as decisions
from gpuconf.remediate import plan
from gpuconf.remediate import summary as out
from gpuconf.remediate.breaker import Breaker
from gpuconf.remediate.decision import decide_action
from gpuconf.remediate.history import History
from gpuconf.remediate.loop import Remediation, Settings
from tests.unit.remediate.fakes import FakeHooks, FakeSlurm
from tests.unit.remediate.test_hardware import NODES, xid


def run(slurm, hooks, tmp_path, after=1):
    settings = Settings(budget=plan.parse_budget("1"), poll=0.001, drain_timeout=5, run_id="test", breaker=Breaker(),
                        hold_after_reboots=after, reboot_window=86400)
    with History(tmp_path / "state") as history:
        return Remediation({n: n for n in slurm.state}, slurm, hooks, history, settings).run()


def sticky(slurm, code=79, action="reboot_node"):
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n1"] = decide_action([xid(code, action)])
    hooks.sticky.add("n1")
    return hooks


def reboots(slurm):
    return [c[0] for c in slurm.calls if c[1] == "n1"].count("reboot")


def test_one_reboot_then_the_hold_by_default(tmp_path):
    slurm = FakeSlurm(NODES)
    summary = run(slurm, sticky(slurm), tmp_path)
    assert reboots(slurm) == 1 and summary.nodes["n1"].outcome == out.HARDWARE


def test_two_reboots_before_the_hold_with_hold_after_reboots_2(tmp_path):
    slurm = FakeSlurm(NODES)
    summary = run(slurm, sticky(slurm), tmp_path, after=2)
    assert reboots(slurm) == 2 and summary.nodes["n1"].outcome == out.HARDWARE


def test_the_reboots_of_earlier_runs_within_the_window_count(tmp_path):
    slurm = FakeSlurm(NODES)
    with History(tmp_path / "state") as history:  # a run an hour ago rebooted it for the same Xid
        rid = history.begin("n1", "n1", "gpuconf: failed: Xid 79", "earlier", started=time.time() - 3600)
        history.set_action(rid, "reboot_node", "Xid 79")
        history.step(rid, "reboot")
        history.finish(rid, "failed", "x")
    hooks = sticky(slurm)
    hooks.faults["n1"] = decide_action([xid(79, "reboot_node")])
    run(slurm, hooks, tmp_path, after=2)
    assert reboots(slurm) == 1


def test_a_code_of_the_catalog_overrides_the_default(tmp_path, monkeypatch):
    monkeypatch.setattr(decisions, "reboot_overrides", lambda: {"Xid 79": 3})
    slurm = FakeSlurm(NODES)
    run(slurm, sticky(slurm), tmp_path)
    assert reboots(slurm) == 3


def test_the_shipped_overrides_are_well_formed():
    assert all(code.startswith(("Xid ", "SXid ")) and count >= 1 for code, count in decisions.reboot_overrides().items())


def test_bad_values_are_usage_errors(capsys):
    assert main(["remediate", "playbooks/a100-node.yml", "-c", "local", "--hold-after-reboots", "0"]) == 1
    assert "--hold-after-reboots 0: give 1" in capsys.readouterr().err
