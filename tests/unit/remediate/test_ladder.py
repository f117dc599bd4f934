"""Issue 28, the ladder: evidence first, a GPU reset (refused: the reboot), a reboot, the IMEX
restart, restart_app's report and escalation, over the fake scheduler and hosts
(tests/unit/remediate/fakes.py); the reset script's account and the kernel log's reset lines."""
from __future__ import annotations

import dataclasses
import time

from gpuconf.facts.xid import after_resets, parse_xid_events
from gpuconf.remediate import summary as out
from gpuconf.remediate.decision import decide_action
from gpuconf.remediate.history import History
from gpuconf.remediate.reset import parse_imex, parse_reset, reset_script, smi_bus
from gpuconf.remediate.restart_app import REPORTED
from gpuconf.results import Finding
from tests.unit.remediate.fakes import FakeHooks, FakeSlurm
from tests.unit.remediate.test_hardware import BUS, NODES, records, remediate, xid


def journal(tmp_path, host):
    with History(tmp_path / "state") as history:
        return [(step, detail) for _, step, detail in history.steps(records(tmp_path, host)[-1].id)]


def test_a_reset_fault_is_collected_reset_verified_and_resumed_without_a_reboot(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n1"] = decide_action([xid(119, "reset_gpu")])
    summary = remediate(slurm, hooks, tmp_path)
    assert [c[0] for c in slurm.calls if c[1] == "n1"] == ["drain", "resume"]  # no reboot
    assert hooks.actions == [("n1", "reset")] and hooks.collected == ["n1"]
    assert summary.nodes["n1"].outcome == out.RESUMED
    (record,) = records(tmp_path, "n1")
    assert record.bundle == "/state/bundles/n1-20261207T100000Z.tar.gz"
    steps = journal(tmp_path, "n1")
    assert [s for s, _ in steps] == ["drain", "wait", "collect", "reset", "reset", "apply", "verify", "resume", "done"]
    assert steps[3][1].startswith("reset_gpu (reset) from xid_catalog.csv: 119")
    assert steps[4][1] == "GPU 00000000:3B:00.0 was successfully reset."


def test_a_refused_reset_falls_back_to_the_reboot(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n2"] = decide_action([xid(119, "reset_gpu")])
    hooks.refuse.add("n2")
    lines: list[str] = []
    summary = remediate(slurm, hooks, tmp_path, lines=lines)
    assert [c[0] for c in slurm.calls if c[1] == "n2"] == ["drain", "reboot", "drain", "resume"]
    assert summary.nodes["n2"].outcome == out.RESUMED
    assert any(line.startswith("n2: reset: refused: The following GPUs could not be reset") for line in lines), lines
    assert [s for s, _ in journal(tmp_path, "n2")][3:7] == ["reset", "reset", "reboot", "apply"]


def test_a_gpu_off_the_bus_goes_straight_to_the_reboot(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n3"] = decide_action([xid(79, "reboot_node"), xid(119, "reset_gpu", bus="0000:5e:00.0")])
    remediate(slurm, hooks, tmp_path)
    assert hooks.actions == [] and [c[0] for c in slurm.calls if c[1] == "n3"] == ["drain", "reboot", "drain", "resume"]


def test_a_fault_the_reset_and_the_reboot_leave_is_a_hold(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n4"] = decide_action([xid(119, "reset_gpu")])
    hooks.sticky.add("n4")
    lines: list[str] = []
    summary = remediate(slurm, hooks, tmp_path, lines=lines)
    assert hooks.actions == [("n4", "reset")] and ("reboot", "n4") in slurm.calls
    assert summary.nodes["n4"].outcome == out.HARDWARE
    assert slurm.node("n4").reason == f"gpuconf: hardware: Xid 119 GPU serial unknown {BUS}"
    assert "n4: the fault is still there: GPU 0 (0000:3b:00.0): Xid 119 (NAME) x2 this boot; action: reset_gpu; " \
           "next: reboot" in lines


def test_the_imex_domain_is_recovered_by_restarting_the_daemon(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    finding = Finding("recovery_action", "failure", "GPU 0: the driver asks for recovery action Recover IMEX domain "
                      "(recover_imex_domain)", gpu=0, bus_id=BUS, action="recover_imex_domain")
    hooks.faults["n5"] = decide_action([finding])
    hooks.sticky.add("n5")  # still failing after the restart: failed, not a hold (the domain, not this node)
    summary = remediate(slurm, hooks, tmp_path)
    assert hooks.actions == [("n5", "imex")] and ("reboot", "n5") not in slurm.calls
    assert summary.nodes["n5"].outcome == out.FAILED


def test_restart_app_is_reported_in_service_and_escalates_to_a_reset_when_it_repeats(tmp_path):
    now = [time.time()]
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n6"] = decide_action([xid(94, "restart_app", count=1)])
    first = remediate(slurm, hooks, tmp_path, clock=lambda: now[0])
    assert first.nodes["n6"].outcome == out.REPORTED and slurm.calls == [] and first.exit_code == 2
    assert [(r.outcome, r.detail) for r in records(tmp_path, "n6")] == [(REPORTED, f"Xid 94 {BUS} x1")]
    again = remediate(slurm, hooks, tmp_path, clock=lambda: now[0] + 60)  # the same occurrence: not a repeat
    assert again.nodes["n6"].outcome == out.REPORTED and len(records(tmp_path, "n6")) == 1 and slurm.calls == []

    hooks.faults["n6"] = decide_action([xid(94, "restart_app", count=2)])  # it happened again, within the hour
    lines: list[str] = []
    escalated = remediate(slurm, hooks, tmp_path, clock=lambda: now[0] + 600, lines=lines)
    assert escalated.nodes["n6"].outcome == out.RESUMED and hooks.actions == [("n6", "reset")]
    assert [c[0] for c in slurm.calls] == ["drain", "resume"]
    assert any("escalated to reset_gpu" in line for line in lines), lines


def test_restart_app_out_of_the_window_is_reported_again(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n1"] = decide_action([xid(94, "restart_app", count=1)])
    start = time.time()
    remediate(slurm, hooks, tmp_path, clock=lambda: start)
    hooks.faults["n1"] = decide_action([xid(94, "restart_app", count=2)])
    later = remediate(slurm, hooks, tmp_path, clock=lambda: start + 2 * 3600)
    assert later.nodes["n1"].outcome == out.REPORTED and slurm.calls == []
    assert [r.detail for r in records(tmp_path, "n1")] == [f"Xid 94 {BUS} x1", f"Xid 94 {BUS} x2"]


# -- the host's part --------------------------------------------------------------
REFUSAL = """stopped nvidia-persistenced

The following GPUs could not be reset:
  GPU 00000000:3B:00.0: In use by another client

1 device is currently being used by one or more other processes (e.g., Fabric Manager, CUDA application).
reset-rc 255
started nvidia-persistenced 0
"""


def test_the_reset_scripts_account_is_read():
    refused = parse_reset(REFUSAL, 0)
    assert (refused.done, refused.refused, refused.units) == (False, True, ("nvidia-persistenced",))
    assert refused.said.startswith("The following GPUs could not be reset:; GPU 00000000:3B:00.0: In use")
    done = parse_reset("stopped nvidia-fabricmanager\ngroup all: NVSwitch system\nGPU 00000000:3B:00.0 was "
                       "successfully reset.\nreset-rc 0\nstarted nvidia-fabricmanager 1\n", 0)
    assert done.done and done.said == "GPU 00000000:3B:00.0 was successfully reset." \
        and done.not_started == ("nvidia-fabricmanager",)
    cut = parse_reset("stopped nvidia-persistenced\n", None)  # the account cut short: not a success
    assert not cut.done and not cut.refused and "did not report back" in cut.said
    assert parse_imex("imex-state READY\n", 0).done and not parse_imex("imex-state UNAVAILABLE\n", 0).done


def test_the_reset_script_names_the_gpus_as_nvidia_smi_prints_them():
    assert smi_bus("0000:3b:00.0") == "00000000:3B:00.0" and smi_bus("PCI:0000:3b:00") == "PCI:0000:3b:00"
    assert smi_bus("3b:00") == "00000000:3B:00.0"
    script = reset_script(("0000:3b:00.0",), every=False)
    assert "targets=00000000:3B:00.0" in script and "nvidia-smi -r -i" in script
    assert "targets=''" in reset_script(("0000:3b:00.0",), every=True)


LOG = """[  100.000000] NVRM: Xid (PCI:0000:3b:00): 119, pid=1234, name=python3, Timeout after 6s of waiting for RPC
[  101.000000] NVRM: Xid (PCI:0000:5e:00): 119, pid=1234, name=python3, Timeout after 6s of waiting for RPC
[  200.000000] gpuconf: resetting GPU 00000000:3B:00.0
[  201.000000] gpuconf: GPU 00000000:3B:00.0 was reset
[  202.000000] gpuconf: resetting GPU 00000000:5E:00.0
"""


def test_a_completed_reset_answers_the_gpus_earlier_xids_only():
    kept = after_resets(parse_xid_events(LOG), LOG)
    assert [e.pci_address for e in kept] == ["0000:5e:00.0"]  # its reset never completed
    again = LOG + "[  300.000000] NVRM: Xid (PCI:0000:3b:00): 119, pid=1, name=x, Timeout\n"
    assert [e.log.message[-7:] for e in after_resets(parse_xid_events(again), again)
            if e.pci_address == "0000:3b:00.0"] == ["Timeout"]  # failed again after it: counts
    every = LOG + "[  400.000000] gpuconf: resetting all GPUs\n[  401.000000] gpuconf: all GPUs were reset\n"
    assert after_resets(parse_xid_events(every), every) == ()


def test_the_check_plan_says_restart_app_stays_in_service_until_it_repeats(tmp_path):
    from gpuconf.remediate import plan
    from gpuconf.remediate.breaker import Breaker
    from gpuconf.remediate.lemon import LemonRule
    from gpuconf.remediate.preview import preview
    from gpuconf.scheduler.interface import Node

    decision = decide_action([xid(94, "restart_app", count=1)])
    verdicts = {"n1": plan.Verdict("n1", False, "gpuconf: failed: Xid 94", cause="fault", decision=decision)}
    states = {"n1": Node("n1", "IDLE")}
    lines = preview({"n1": "n1"}, verdicts, states, [], [], 1, LemonRule(), Breaker(), time.time())
    assert lines[0].endswith("steps: reported, left in service") and "0 more to take out" in lines[1]
    slurm = FakeSlurm(["n1"])
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n1"] = decision
    remediate(slurm, hooks, tmp_path)
    again = dataclasses.replace(verdicts["n1"], decision=decide_action([xid(94, "restart_app", count=3)]))
    lines = preview({"n1": "n1"}, {"n1": again}, states, records(tmp_path), [], 1, LemonRule(), Breaker(),
                    time.time())
    assert lines[0].startswith("n1: reset_gpu, decided by restart_app repeated within the window") and \
        "1 more to take out" in lines[1], lines


def test_resets_that_fixed_nodes_count_towards_the_breaker(tmp_path):
    from gpuconf.remediate.breaker import Breaker

    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    for node in ("n1", "n2", "n3"):  # a driver bug: the same reset-recoverable Xid on many nodes at once
        hooks.faults[node] = decide_action([xid(119, "reset_gpu")])
    summary = remediate(slurm, hooks, tmp_path, budget="1", breaker=Breaker(count=2))
    assert [h for h, _ in hooks.actions] == ["n1", "n2"] and summary.nodes["n3"].outcome == out.NOT_STARTED
    assert summary.breaker.startswith("2 node(s) needed a hardware action or failed verification (n1, n2)")
    assert [r.detail for r in records(tmp_path, "n1")] == ["recovered: reset_gpu by reset"]


def test_only_pci_addresses_reach_the_reset_script():
    assert "targets=''" in reset_script(("0000:3b:00.0; reboot",), every=False)  # not an address: every GPU
    assert "targets='00000000:3B:00.0 00000000:5E:00.0'" in reset_script(("0000:3b:00.0", "5e:00.0"), every=False)
