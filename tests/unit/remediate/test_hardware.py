"""Issue 28: one action per node from the catalog, hardware holds that nothing of gpuconf's resumes,
and the circuit breaker, over the fake scheduler and hosts (tests/unit/remediate/fakes.py)."""
from __future__ import annotations

import json
import time

from gpuconf.cli.main import main
from gpuconf.errors import GpuconfError
from gpuconf.remediate import plan
from gpuconf.remediate import summary as out
from gpuconf.remediate.breaker import Breaker, parse_breaker
from gpuconf.remediate.decision import decide_action
from gpuconf.remediate.history import HARDWARE, RESET, TRIPPED, History
from gpuconf.remediate.hold import hold_reason, parse_serials
from gpuconf.remediate.lemon import LemonRule, judge
from gpuconf.remediate.loop import Remediation, Settings
from gpuconf.remediate.preview import preview
from gpuconf.results import FaultCode, Finding
from gpuconf.scheduler.interface import Node
from tests.unit.remediate.fakes import FakeHooks, FakeSlurm

NODES = [f"n{i}" for i in range(1, 7)]
BUS = "0000:3b:00.0"


def xid(code: int, action: str, severity: str = "failure", bus: str = BUS, count: int = 2) -> Finding:
    return Finding("xid", severity, f"GPU 0 ({bus}): Xid {code} (NAME) x{count} this boot; action: {action}",
                   gpu=0, bus_id=bus, value=count, action=action, code=FaultCode("Xid", code), count=count,
                   rule=f"xid_catalog.csv: {code}")


def remediate(slurm, hooks, tmp_path, budget="1", breaker=None, clock=time.time, lines=None):
    history = History(tmp_path / "state")
    settings = Settings(budget=plan.parse_budget(budget), poll=0.001, drain_timeout=5, run_id="test",
                        breaker=breaker or Breaker())
    try:
        return Remediation({n: n for n in slurm.state}, slurm, hooks, history, settings,
                           lines.append if lines is not None else (lambda line: None), clock=clock).run()
    finally:
        history.close()


def records(tmp_path, host=None):
    with History(tmp_path / "state") as history:
        return history.records(host)


# -- the decision ----------------------------------------------------------------
def test_the_strongest_action_wins_and_names_its_finding_and_catalog_row():
    decision = decide_action([xid(48, "reset_gpu"), xid(79, "reboot_node"), xid(94, "restart_app")])
    assert (decision.action, decision.kind, decision.row, decision.code) == (
        "reboot_node", "reboot", "xid_catalog.csv: 79", "Xid 79")
    assert decision.others == 2 and "Xid 79" in decision.finding and decision.steps == ("reboot",)
    hold = decide_action([xid(79, "reboot_node"), xid(13, "contact_support", bus="0000:5e:00.0")])
    assert hold.hold and hold.code == "Xid 13" and hold.bus_id == "0000:5e:00.0"
    driver = decide_action([Finding("recovery_action", "failure", "GPU 1: the driver asks for recovery action "
                                    "Drain P2P (drain_p2p)", gpu=1, bus_id=BUS, action="drain_p2p",
                                    rule="nvidia-smi gpu_recovery_action")])
    assert driver.hold and driver.row == "nvidia-smi gpu_recovery_action"


def test_warnings_and_findings_without_an_action_decide_nothing():
    assert decide_action([xid(94, "restart_app", severity="warning")]) is None  # a warning never decides
    assert decide_action([Finding("thermal", "failure", "GPU 0 at 95 C")]) is None
    only_app = decide_action([xid(94, "restart_app")])
    assert only_app.kind == "app" and not only_app.hold and only_app.steps == ()  # restart_app.py decides


def test_the_hold_reason_names_the_xid_the_serial_and_the_pci_address():
    serials = parse_serials("00000000:3B:00.0, 1650924060039\n00000000:5E:00.0, [N/A]\n")
    assert serials == {BUS: "1650924060039"}
    decision = decide_action([xid(13, "contact_support")])
    assert hold_reason(decision, serials) == f"gpuconf: hardware: Xid 13 GPU 1650924060039 {BUS}"
    assert hold_reason(decision, {}) == f"gpuconf: hardware: Xid 13 GPU serial unknown {BUS}"


# -- hardware holds in the loop -----------------------------------------------------
def test_contact_support_is_a_hold_nothing_applied_and_no_rerun_resumes_it(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n2"] = decide_action([xid(13, "contact_support")])
    hooks.serial_numbers["n2"] = {BUS: "SER-2"}
    summary = remediate(slurm, hooks, tmp_path)
    reason = f"gpuconf: hardware: Xid 13 GPU SER-2 {BUS}"
    assert slurm.node("n2").reason == reason and not slurm.node("n2").in_service
    assert hooks.applied == [] and [c[0] for c in slurm.calls] == ["drain"]
    assert summary.of(out.HARDWARE)[0].detail == reason and summary.exit_code == 6
    assert [r.outcome for r in records(tmp_path, "n2")] == [HARDWARE]
    with History(tmp_path / "state") as history:
        (hold,) = history.holds()
    assert (hold.host, hold.serial, hold.pci, hold.code, hold.count) == ("n2", "SER-2", BUS, "Xid 13", 2)

    hooks.faults.clear()  # the check is clean now: still nothing resumes a hardware hold
    again = remediate(slurm, hooks, tmp_path)
    assert slurm.node("n2").reason == reason and [c[0] for c in slurm.calls] == ["drain"]
    assert [n.host for n in again.of(out.HARDWARE_HELD)] == ["n2"] and again.exit_code == 6


def test_a_fault_that_survives_the_reboot_ends_in_a_hold_one_that_does_not_is_resumed(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n1"] = decide_action([xid(79, "reboot_node")])
    hooks.faults["n3"] = decide_action([xid(48, "reset_gpu")])  # the reset clears it: no reboot
    hooks.sticky.add("n1")
    hooks.serial_numbers["n1"] = {BUS: "SER-1"}
    summary = remediate(slurm, hooks, tmp_path, budget="2")  # a held node keeps costing its budget
    assert [c[0] for c in slurm.calls if c[1] == "n1"] == ["drain", "reboot", "drain", "drain"]  # set again, then the hold
    assert slurm.node("n1").reason == f"gpuconf: hardware: Xid 79 GPU SER-1 {BUS}"
    assert [c[0] for c in slurm.calls if c[1] == "n3"] == ["drain", "resume"] and ("n3", "reset") in hooks.actions
    assert slurm.node("n3").in_service
    assert {n.host for n in summary.of(out.HARDWARE)} == {"n1"} and {n.host for n in summary.of(out.RESUMED)} == {"n3"}
    steps = [r.step for r in records(tmp_path, "n1")]
    assert steps == ["done"] and [r.outcome for r in records(tmp_path, "n1")] == [HARDWARE]
    with History(tmp_path / "state") as history:
        journal = [step for _, step, _ in history.steps(records(tmp_path, "n1")[0].id)]
    assert journal == ["drain", "wait", "collect", "reboot", "apply", "verify", "hold", "done"]


def test_a_run_killed_after_the_holds_drain_is_closed_by_the_next_and_the_node_stays_held(tmp_path):
    slurm = FakeSlurm(NODES)
    reason = f"gpuconf: hardware: Xid 13 GPU SER {BUS}"
    with History(tmp_path / "state") as history:
        history.begin("n4", "n4", "gpuconf: failed: Xid 13", "killed", step="hold")
    slurm.hand_drain("n4", reason)
    summary = remediate(slurm, FakeHooks(slurm), tmp_path)
    assert [r.outcome for r in records(tmp_path, "n4")] == [HARDWARE] and slurm.calls == []
    assert summary.nodes["n4"].outcome == out.HARDWARE_HELD


def test_a_hold_is_not_counted_towards_a_lemon(tmp_path):
    with History(tmp_path / "state") as history:
        for day in range(3):
            history.add("n1", "n1", HARDWARE, "gpuconf: failed: Xid 13", started=time.time() - day * 3600)
        judged = judge(history.records("n1"))
        assert not any(j.counted for j in judged) and "hardware hold" in judged[0].why
        assert not LemonRule(after=3).is_lemon(history.records("n1"), time.time())


# -- the circuit breaker --------------------------------------------------------------
def faulty(slurm, hosts):
    hooks = FakeHooks(slurm, reboot=False)
    for host in hosts:
        hooks.faults[host] = decide_action([xid(79, "reboot_node")])
        hooks.sticky.add(host)
    return hooks


def test_breaker_two_stops_after_two_holds_and_a_rerun_waits_for_the_reset(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = faulty(slurm, ["n1", "n2", "n3"])
    summary = remediate(slurm, hooks, tmp_path, budget="6", breaker=parse_breaker("2", 86400))
    assert {n.host for n in summary.of(out.HARDWARE)} == {"n1", "n2"}  # the wave took only two
    assert summary.nodes["n3"].outcome == out.NOT_STARTED and slurm.node("n3").in_service
    assert "2 node(s) needed a hardware action" in summary.breaker and summary.exit_code == 6
    with History(tmp_path / "state") as history:
        assert [e for _, e, _ in history.breaker_events()] == [TRIPPED]

    again = remediate(slurm, hooks, tmp_path, budget="6", breaker=parse_breaker("2", 86400))
    assert again.nodes["n3"].outcome == out.NOT_STARTED and slurm.node("n3").in_service and again.breaker

    assert main(["remediate", "--reset-breaker", "--state-dir", str(tmp_path / "state")]) == 0
    with History(tmp_path / "state") as history:
        assert [e for _, e, _ in history.breaker_events()] == [TRIPPED, RESET]
    after = remediate(slurm, hooks, tmp_path, budget="6", breaker=parse_breaker("2", 86400))
    assert after.nodes["n3"].outcome == out.HARDWARE and not after.breaker  # the holds before the reset no longer count


def test_a_percentage_breaker_counts_across_runs_within_the_window(tmp_path):
    slurm = FakeSlurm(NODES)
    breaker = parse_breaker("34%", 3600)  # 2 of 6
    assert breaker.limit(6) == 2
    with History(tmp_path / "state") as history:  # outside the window: does not count
        history.add("n5", "n5", "failed", "gpuconf: failed: x", started=time.time() - 7200)
    first = remediate(slurm, faulty(slurm, ["n1"]), tmp_path, budget="3", breaker=breaker)
    assert first.nodes["n1"].outcome == out.HARDWARE and not first.breaker
    second = remediate(slurm, faulty(slurm, ["n2", "n3"]), tmp_path, budget="3", breaker=breaker)
    assert second.nodes["n2"].outcome == out.HARDWARE and second.nodes["n3"].outcome == out.NOT_STARTED
    assert second.breaker and slurm.node("n3").in_service


def test_without_a_breaker_every_faulty_node_is_taken_in_turn(tmp_path):
    slurm = FakeSlurm(NODES)
    summary = remediate(slurm, faulty(slurm, ["n1", "n2", "n3"]), tmp_path, budget="6")
    assert len(summary.of(out.HARDWARE)) == 3 and not summary.breaker


def test_bad_breaker_values_are_usage_errors(tmp_path, capsys):
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    n1: {}\n")
    (tmp_path / "site.yml").write_text("- hosts: all\n  tasks: []\n")
    for bad in ("0", "two", "150%"):
        code = main(["remediate", str(tmp_path / "site.yml"), "-i", str(tmp_path / "hosts.yml"), "--health", "none",
                     "--breaker", bad])
        err = capsys.readouterr().err
        assert code == 1 and f"--breaker '{bad}': give a count of at least 1" in err and "Traceback" not in err
    assert main(["remediate"]) == 1 and "give the PLAYBOOK" in capsys.readouterr().err


# -- never resumed, wherever gpuconf resumes ----------------------------------------------
def test_remediate_never_resumes_a_hardware_hold_even_when_clean():
    held = Node("n1", "IDLE+DRAIN", f"gpuconf: hardware: Xid 79 GPU S {BUS}")
    assert plan.decide(plan.Verdict("n1", True), held, lemon=False) == plan.HARDWARE_HELD
    assert plan.decide(plan.Verdict("n1", False, "gpuconf: drift: x"), held, lemon=True) == plan.HARDWARE_HELD


def test_the_health_check_rules_keep_a_hold_even_if_the_check_remembers_that_reason():
    from gpuconf.scheduler.healthcheck import Memory, decide, settle

    reason = f"gpuconf: hardware: Xid 79 GPU S {BUS}"
    held = Node("n1", "IDLE+DRAIN", reason, "root@2026-12-04T08:00:01")
    assert decide(None, held) == "kept"
    assert settle(None, True, held, Memory(reason, "root@2026-12-04T08:00:01", 1))[0] == "kept"


# -- remediate --check --------------------------------------------------------------
def test_the_check_plan_names_the_action_its_row_and_the_budget():
    states = {n: Node(n, "IDLE") for n in NODES}
    states["n6"] = Node("n6", "IDLE+DRAIN", "admin: RMA")
    verdicts = {n: plan.Verdict(n, True) for n in NODES}
    verdicts["n1"] = plan.Verdict("n1", False, "gpuconf: failed: Xid 79", cause="fault",
                                  decision=decide_action([xid(79, "reboot_node")]))
    verdicts["n2"] = plan.Verdict("n2", False, "gpuconf: drift: /etc/x", cause="drift")
    lines = preview({n: n for n in NODES}, verdicts, states, [], [], 1, LemonRule(), parse_breaker("2", 3600),
                    time.time())
    assert lines[0].startswith("n1: reboot_node, decided by xid_catalog.csv: 79: GPU 0")
    assert "steps: drain and wait; collect; reboot through the scheduler" in lines[0]
    assert lines[1] == "n2: remediate: drain, wait, apply, verify, resume; finding: gpuconf: drift: /etc/x"
    assert lines[5] == "n6: drained by someone else: not touched (IDLE+DRAIN, reason: admin: RMA)"
    assert lines[6] == ("budget: --max-unavailable 1; 1 node(s) in scope out of service now (n6); "
                        "2 more to take out, 0 in the first wave")
    assert lines[7] == "circuit breaker: 0 of 2 within the window"
    now = time.time()
    tripped = preview({n: n for n in NODES}, verdicts, states, [], [(now, TRIPPED, "3 node(s) failed")], 6,
                      LemonRule(), parse_breaker("2", 3600), now)
    assert tripped[6].endswith("2 more to take out, 0 in the first wave")  # a tripped breaker takes none
    assert tripped[7].startswith("circuit breaker: tripped (3 node(s) failed); no node is taken out")


# -- gpuconf hardware ------------------------------------------------------------------
def test_a_hold_collects_its_own_bundle_for_the_rma(tmp_path, capsys):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n5"] = decide_action([xid(13, "contact_support")])
    remediate(slurm, hooks, tmp_path)
    assert hooks.collected == ["n5"] and hooks.actions == []  # collected, nothing reset or rebooted
    assert main(["hardware", "--state-dir", str(tmp_path / "state"), "--format", "json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["holds"]
    assert entry["bundle"] == "/state/bundles/n5-20261207T100000Z.tar.gz"


def test_gpuconf_hardware_lists_the_holds_with_serial_and_bundle(tmp_path, capsys):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n2"] = decide_action([xid(13, "contact_support")])
    hooks.serial_numbers["n2"] = {BUS: "SER-2"}

    def unreachable(host):
        raise GpuconfError(f"{host}: the collect script failed (exit 255): no route")

    hooks.collect = unreachable  # remediate could not collect the hold's own bundle
    lines: list[str] = []
    remediate(slurm, hooks, tmp_path, lines=lines)
    assert "n2: collect: not collected: n2: the collect script failed (exit 255): no route" in lines
    with History(tmp_path / "state") as history:
        history.add_bundle("n2", "/b/before.tar.gz", at=1.0)  # long before: another story
        history.add_bundle("n2", "/b/older.tar.gz")
        history.add_bundle("n2", "/b/n2.tar.gz")  # a gpuconf collect of the held node, after its hold
    assert main(["hardware", "--state-dir", str(tmp_path / "state"), "--format", "json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["holds"]
    assert (entry["host"], entry["serial"], entry["pci"], entry["code"], entry["count"], entry["bundle"]) == (
        "n2", "SER-2", BUS, "Xid 13", 2, "/b/n2.tar.gz")
    assert main(["hardware", "--state-dir", str(tmp_path / "state")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["HOST", "SERIAL", "PCI", "CODE"] and table[1].split()[:4] == [
        "n2", "SER-2", BUS, "Xid"]
    assert main(["hardware", "--state-dir", str(tmp_path / "none")]) == 0
    assert "no hardware hold recorded" in capsys.readouterr().out
