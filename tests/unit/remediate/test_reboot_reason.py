"""Issue 35, HIGH 1: gpuconf's ownership of a drain does not rest on its reason surviving Slurm.
Slurm 22.05.8 appends " : reboot issued" to a drained node's reason on a plain `scontrol reboot`,
and replaces a reason that already holds those words with the bare "reboot issued"
(set_node_reboot_reason, src/slurmctld/node_mgr.c; the fake scheduler does the same). The ladder's
reboot for Xid 79 and the apply's own reboot are two reboots: the fault that survives them is a
hold all the same, and a person's reason set meanwhile still wins."""
from __future__ import annotations

from gpuconf.remediate import summary as out
from gpuconf.remediate.decision import decide_action
from gpuconf.remediate.history import HARDWARE, History
from tests.unit.remediate.fakes import FakeHooks, FakeSlurm
from tests.unit.remediate.test_hardware import BUS, NODES, records, remediate, xid

HOLD = f"gpuconf: hardware: Xid 79 GPU SER-1 {BUS}"


def sticky_xid_79(slurm: FakeSlurm) -> FakeHooks:
    hooks = FakeHooks(slurm, reboot=True)  # the playbook's apply asks for a reboot too
    hooks.faults["n1"] = decide_action([xid(79, "reboot_node")])
    hooks.sticky.add("n1")
    hooks.serial_numbers["n1"] = {BUS: "SER-1"}
    return hooks


def test_a_fault_that_survives_two_reboots_is_a_hold_whatever_slurm_wrote(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = sticky_xid_79(slurm)
    summary = remediate(slurm, hooks, tmp_path)
    assert [c[0] for c in slurm.calls if c[1] == "n1"].count("reboot") == 2
    assert slurm.node("n1").reason == HOLD and not slurm.node("n1").in_service
    assert [n.host for n in summary.of(out.HARDWARE)] == ["n1"], summary.nodes
    assert [r.outcome for r in records(tmp_path, "n1")] == [HARDWARE]
    with History(tmp_path / "state") as history:
        assert [h.host for h in history.holds()] == ["n1"]


def test_the_reason_is_gpuconfs_own_again_after_every_reboot(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = sticky_xid_79(slurm)
    seen = []
    hooks.during_apply = lambda: seen.append(slurm.node("n1").reason)  # after the ladder's reboot
    hooks.after_apply = lambda: seen.append(slurm.node("n1").reason)  # after the apply's reboot
    remediate(slurm, hooks, tmp_path)
    drained = next(c[2] for c in slurm.calls if c[:2] == ("drain", "n1"))
    assert seen[0] == drained
    # the apply's reboot was issued on gpuconf's reason, never on one that already says "reboot issued"
    assert seen[1] in (drained, f"{drained} : reboot issued")


def test_a_persons_reason_set_during_the_reboot_still_wins(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = sticky_xid_79(slurm)
    hooks.reboot = False
    before = slurm.reboot

    def reboot_then_operator(node: str) -> None:
        before(node)
        slurm.state[node].reason = "admin: RMA ticket 4411"

    slurm.reboot = reboot_then_operator
    summary = remediate(slurm, hooks, tmp_path)
    assert slurm.node("n1").reason == "admin: RMA ticket 4411"
    assert [n.host for n in summary.of(out.FOREIGN)] == ["n1"]
    assert hooks.applied == []


def test_a_run_killed_after_the_second_reboot_is_carried_on_to_the_hold(tmp_path):
    """SIGKILL after the apply's reboot: the node says bare "reboot issued"; the next run knows it
    for its own from the journal, asserts its reason again and holds the node."""
    slurm = FakeSlurm(NODES)
    hooks = sticky_xid_79(slurm)
    with History(tmp_path / "state") as history:
        reason = "gpuconf: failed: Xid errors: GPU 0: Xid 79"
        rid = history.begin("n1", "n1", reason, "killed", step="drain")
        history.step(rid, "wait")
        history.step(rid, "reboot")
        history.step(rid, "apply")
    slurm.drain("n1", reason)
    slurm.reboot("n1")
    slurm.reboot("n1")
    assert slurm.node("n1").reason == "reboot issued"
    summary = remediate(slurm, hooks, tmp_path)
    assert slurm.node("n1").reason == HOLD, summary.nodes
    assert [r.outcome for r in records(tmp_path, "n1")] == [HARDWARE]


def test_what_slurms_reboot_makes_of_a_reason():
    from gpuconf.scheduler.slurm import rewritten_by_reboot

    ours = "gpuconf: failed: Xid 79"
    assert rewritten_by_reboot(f"{ours} : reboot issued", ours)
    assert rewritten_by_reboot("reboot issued", ours)  # a second plain reboot
    assert rewritten_by_reboot(f"{ours} : reboot issued : reboot timed out", ours)
    assert not rewritten_by_reboot(ours, ours)  # not rewritten: nothing to set again
    assert not rewritten_by_reboot("admin: reboot issued by hand", ours)
    assert not rewritten_by_reboot(f"{ours} : admin took it", ours)
    assert not rewritten_by_reboot(None, ours) and not rewritten_by_reboot("reboot issued", "")


def test_a_persons_drain_just_before_the_reboot_keeps_their_words(tmp_path):
    """Found by `make chaos` (seed 7): a person drains in the milliseconds between gpuconf's read of the
    node and its `scontrol reboot`; Slurm then appends " : reboot issued" to their reason. gpuconf
    undoes what its reboot did to their words, and leaves the node to them."""
    slurm = FakeSlurm(NODES)
    hooks = sticky_xid_79(slurm)
    before = slurm.reboot

    def operator_then_reboot(node: str) -> None:
        slurm.state[node].reason = "admin: RMA ticket 4411"
        before(node)

    slurm.reboot = operator_then_reboot
    summary = remediate(slurm, hooks, tmp_path)
    assert slurm.node("n1").reason == "admin: RMA ticket 4411"
    assert [n.host for n in summary.of(out.FOREIGN)] == ["n1"] and hooks.applied == []


def test_the_reason_before_slurms_reboot():
    from gpuconf.scheduler.slurm import reason_before_reboot

    assert reason_before_reboot("admin: RMA : reboot issued") == "admin: RMA"
    assert reason_before_reboot("admin: RMA : reboot issued : reboot timed out") == "admin: RMA"
    assert reason_before_reboot("admin: RMA") is None and reason_before_reboot(None) is None
    assert reason_before_reboot("reboot issued") is None  # the words before are lost
