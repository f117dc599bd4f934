"""Never overrule a person (issue 31, defect 1): a node that someone else drains (or resumes)
while remediate works on it is left to them at whichever step that happens. Over the fake
scheduler, the operator acts at a chosen moment: during the wait for jobs, during the apply
before its reboot, after the reboot, during the verification."""
from __future__ import annotations

from gpuconf.remediate import summary as out
from gpuconf.remediate.history import History
from tests.unit.remediate.fakes import FakeHooks, FakeSlurm
from tests.unit.remediate.test_loop import NODES, remediate

OPERATOR = "admin: hold for RMA"


def journal(tmp_path, host):
    with History(tmp_path / "state") as history:
        (record,) = history.records(host)
        return record, [step for _, step, _ in history.steps(record.id)]


def calls(slurm, host):
    return [c[0] for c in slurm.calls if c[1] == host]


def test_an_operator_drain_during_the_wait_stops_it_before_the_apply(tmp_path):
    slurm = FakeSlurm(NODES)
    slurm.state["n2"].jobs = 50  # remediate waits for them: the operator drains meanwhile
    hooks = FakeHooks(slurm, drifted=["n2"])

    def operator():
        fake = slurm.state["n2"]
        if (fake.reason or "").startswith("gpuconf: ") and fake.jobs < 45:
            slurm.hand_drain("n2", OPERATOR)
            fake.jobs = 0  # then the jobs end: nothing may follow

    slurm.on_read = operator
    lines: list[str] = []
    summary = remediate(slurm, hooks, tmp_path, lines=lines)
    assert hooks.applied == [] and calls(slurm, "n2") == ["drain"]  # no apply, reboot or resume
    assert slurm.state["n2"].reason == OPERATOR and "DRAIN" in slurm.state["n2"].flags
    node = summary.nodes["n2"]
    assert (node.outcome, node.drifted, summary.exit_code) == (out.FOREIGN, True, 2)
    assert OPERATOR in node.detail and any(line.startswith("n2: drained by someone else") for line in lines)
    record, steps = journal(tmp_path, "n2")
    assert (record.outcome, steps) == ("foreign", ["drain", "wait", "done"])
    assert record.detail.startswith("at 'wait': drained by someone else") and OPERATOR in record.detail


def test_an_operator_drain_during_the_apply_refuses_the_reboot_and_the_resume(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, drifted=["n3"])
    hooks.during_apply = lambda: slurm.hand_drain("n3", OPERATOR)
    summary = remediate(slurm, hooks, tmp_path)
    assert calls(slurm, "n3") == ["drain"] and slurm.state["n3"].reason == OPERATOR  # never rebooted over it
    assert summary.nodes["n3"].outcome == out.FOREIGN and summary.exit_code == 2
    record, steps = journal(tmp_path, "n3")
    assert record.outcome == "foreign" and steps == ["drain", "wait", "apply", "done"]


def test_an_operator_drain_after_the_reboot_is_not_resumed(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, drifted=["n5"])
    hooks.after_apply = lambda: slurm.hand_drain("n5", OPERATOR)
    summary = remediate(slurm, hooks, tmp_path)
    assert calls(slurm, "n5") == ["drain", "reboot"] and slurm.state["n5"].reason == OPERATOR
    assert summary.nodes["n5"].outcome == out.FOREIGN


def test_a_failed_verification_never_drains_over_an_operators_reason(tmp_path):
    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, broken=["n4"])
    hooks.during_check = lambda: slurm.hand_drain("n4", OPERATOR)
    summary = remediate(slurm, hooks, tmp_path)
    assert slurm.state["n4"].reason == OPERATOR and calls(slurm, "n4") == ["drain", "reboot", "drain"]  # its reason set again after the reboot
    record, steps = journal(tmp_path, "n4")
    assert record.outcome == "foreign" and steps[-2:] == ["fail", "done"]
    assert summary.nodes["n4"].outcome == out.FOREIGN and summary.exit_code == 2


def test_a_node_resumed_by_someone_else_during_the_wait_is_left_in_service(tmp_path):
    slurm = FakeSlurm(NODES)
    slurm.state["n1"].jobs = 50
    hooks = FakeHooks(slurm, drifted=["n1"])

    def operator():
        if "DRAIN" in slurm.state["n1"].flags and slurm.state["n1"].jobs < 45:
            slurm.state["n1"].flags.discard("DRAIN")
            slurm.state["n1"].reason = None

    slurm.on_read = operator
    summary = remediate(slurm, hooks, tmp_path)
    assert hooks.applied == [] and calls(slurm, "n1") == ["drain"]
    assert summary.nodes["n1"].outcome == out.FOREIGN and "resumed by someone else" in summary.nodes["n1"].detail


def test_a_verified_node_an_operator_holds_is_reported_but_in_sync(tmp_path):
    slurm = FakeSlurm(NODES)
    slurm.drain("n6", "gpuconf: drift: x")  # a run left it drained; it is clean now
    slurm.calls.clear()
    hooks = FakeHooks(slurm)

    reads: list[int] = []

    def operator():
        if len(hooks.checked) == 1:
            reads.append(1)
            if len(reads) == 2:  # the run's read after its check decided "resume"; the next is the resume's own
                slurm.hand_drain("n6", OPERATOR)

    slurm.on_read = operator
    summary = remediate(slurm, hooks, tmp_path)
    assert calls(slurm, "n6") == [] and slurm.state["n6"].reason == OPERATOR
    node = summary.nodes["n6"]
    assert (node.outcome, node.drifted, summary.exit_code) == (out.FOREIGN, False, 0)


def test_an_operators_drain_during_the_reset_is_seen_before_the_apply(tmp_path):
    """Issue 35, MEDIUM 4: nothing is applied to a node after a person took it, even when they drained
    it while its GPU reset ran."""
    from gpuconf.remediate.decision import decide_action
    from tests.unit.remediate.test_hardware import xid

    slurm = FakeSlurm(NODES)
    hooks = FakeHooks(slurm, reboot=False)
    hooks.faults["n2"] = decide_action([xid(48, "reset_gpu")])
    hooks.during_action = lambda: slurm.hand_drain("n2", OPERATOR)
    summary = remediate(slurm, hooks, tmp_path)
    assert hooks.actions == [("n2", "reset")] and hooks.applied == []
    assert slurm.state["n2"].reason == OPERATOR and summary.nodes["n2"].outcome == out.FOREIGN
