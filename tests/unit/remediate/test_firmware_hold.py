"""Issue 40, the staged firmware update inside remediate: a firmware update the BMC failed holds
the node for a person at once (no verify, no retry), the breaker and --max-unavailable bound the
fleet, and `remediate --check` shows the update's stages in order."""
from __future__ import annotations

import time

from gpuconf.remediate import plan
from gpuconf.remediate import summary as out
from gpuconf.remediate.breaker import Breaker
from gpuconf.remediate.command import verdict
from gpuconf.remediate.decision import HOLD
from gpuconf.remediate.firmware import FIRMWARE, firmware_hold
from gpuconf.remediate.hold import hold_reason
from gpuconf.remediate.lemon import LemonRule
from gpuconf.remediate.preview import preview
from gpuconf.results import ChangeReport, HostResult, Status, TaskResult
from gpuconf.scheduler.interface import Node
from tests.unit.remediate.fakes import FakeHooks, FakeSlurm
from tests.unit.remediate.test_hardware import records, remediate

SAID = "HGX_FW_BMC_0: Update.1.0.ApplyFailed: Installation of image 'HGX-22.10-1-rc57' to 'HGX_FW_BMC_0' failed."
STAGES = ("back up the BMC's firmware inventory and BIOS attributes",
          "update HGX_FW_BMC_0 HGX-22.10-1-rc34 -> HGX-22.10-1-rc57 from bmc.fwpkg (the BMC first, ...)",
          "update HGX_FW_GPU_SXM_[1-8] 96.00.74.00.0D -> 96.00.89.00.01 from gpu.fwpkg (the GPU baseboard)",
          "power-cycle the system through the BMC to activate the baseboard's images, then verify every version")


def failed(data: dict, status: Status = Status.FAILED, ignored: bool = False) -> TaskResult:
    return TaskResult("n1", "firmware", "firmware at its GPU model's bundle", status, type="firmware",
                      error="firmware update stopped: https://bmc: /redfish/v1/TaskService/Tasks/1 ended Exception",
                      data=data, ignored=ignored)


def test_a_failure_after_something_was_sent_asks_for_a_hold_and_nothing_else_does():
    decision = firmware_hold(failed({"hold": SAID, "task_log": []}))
    assert decision is not None and decision.kind == HOLD and decision.code == FIRMWARE and decision.finding == SAID
    reason = hold_reason(decision, {})   # one line a person reads in sinfo -R, cut to Slurm's reason width
    assert reason.startswith("gpuconf: hardware: firmware: HGX_FW_BMC_0: Update.1.0.ApplyFailed: Installation of "
                             "image 'HGX-22.10-1-rc57'") and len(reason) == 120 and "GPU" not in reason
    assert firmware_hold(failed({"task_log": []})) is None                 # refused before anything was sent
    assert firmware_hold(failed({"hold": True})) is None                   # only the BMC's words make a hold
    assert firmware_hold(failed({"hold": SAID}, ignored=True)) is None
    assert firmware_hold(failed({"hold": SAID}, Status.CHANGED)) is None


def test_a_failed_firmware_update_holds_the_node_without_a_verify(tmp_path):
    slurm = FakeSlurm(["n1", "n2"])
    hooks = FakeHooks(slurm, drifted=["n1"], reboot=False)
    hooks.hardware["n1"] = firmware_hold(failed({"hold": SAID}))
    lines: list[str] = []
    summary = remediate(slurm, hooks, tmp_path, lines=lines)
    assert summary.nodes["n1"].outcome == out.HARDWARE
    assert slurm.node("n1").reason.startswith("gpuconf: hardware: firmware: HGX_FW_BMC_0: Update.1.0.ApplyFailed")
    assert not slurm.node("n1").in_service
    assert hooks.checked == [["n1", "n2"]]                                  # the first check only: no verify
    assert hooks.collected == ["n1"]                                        # evidence for the RMA
    (record,) = records(tmp_path, "n1")
    assert record.outcome == out.HARDWARE
    assert f"n1: hardware hold: contact_support (hold) from task 'firmware at its GPU model's bundle': the BMC's " \
           f"firmware update: {SAID}" in lines


def failing_fleet(count: int) -> tuple[list[str], FakeSlurm, FakeHooks]:
    names = [f"n{i}" for i in range(1, count + 1)]
    slurm = FakeSlurm(names)
    hooks = FakeHooks(slurm, drifted=names, reboot=False)
    for name in names:
        hooks.hardware[name] = firmware_hold(failed({"hold": SAID}))
    return names, slurm, hooks


def test_max_unavailable_bounds_a_fleet_whose_firmware_updates_fail(tmp_path):
    names, slurm, hooks = failing_fleet(4)
    summary = remediate(slurm, hooks, tmp_path, budget="1")
    assert hooks.applied == ["n1"] and summary.nodes["n1"].outcome == out.HARDWARE
    assert all(summary.nodes[n].outcome == out.NOT_STARTED for n in names[1:])   # the hold spends the budget
    assert slurm.max_seen == 1


def test_the_breaker_stops_a_fleet_whose_firmware_updates_fail(tmp_path):
    names, slurm, hooks = failing_fleet(5)
    summary = remediate(slurm, hooks, tmp_path, budget="5", breaker=Breaker(count=2))
    held = [n for n in names if summary.nodes[n].outcome == out.HARDWARE]
    assert len(held) == 2 and sorted(hooks.applied) == held                 # no wave takes out more than may fail
    assert summary.breaker and all(summary.nodes[n].outcome == out.NOT_STARTED for n in names if n not in held)
    assert slurm.max_seen == 2


def test_remediate_check_shows_the_stages_in_order():
    task = TaskResult("n1", "firmware", "firmware at its GPU model's bundle", Status.WOULD_CHANGE, type="firmware",
                      changes=[ChangeReport(summary) for summary in STAGES])
    found = verdict(HostResult("n1", [task]), "n1", False)
    assert found.changes == STAGES
    lines = preview({"n1": "n1"}, {"n1": found}, {"n1": Node("n1", "IDLE", None)}, [], [], 1, LemonRule(),
                    Breaker(), time.time())
    assert lines[0].startswith("n1: remediate: drain, wait, apply, verify, resume; finding: gpuconf: drift: back up")
    assert lines[1:5] == [f"    apply {n}/4: {summary}" for n, summary in enumerate(STAGES, 1)]
    assert plan.Verdict("n2", True).changes == ()
