"""The health check's memory without a host: states x reasons x counters (`settle`), what counts
as a failure (`failure_reason`), and the step after the run over a fake round trip (`reconcile`): it
drains at once, resumes its own drain only after two healthy runs in a row, and never touches a
drain it did not set, even one with the same words.

The lab test (tests/slurm/test_healthcheck_lab.py) runs the same code as the real slurmd's
HealthCheckProgram against a real slurmctld.
"""
from __future__ import annotations

import base64
import json
import shlex

import pytest

from gpuconf.results import Finding, HostResult, Status, TaskResult
from gpuconf.scheduler.healthcheck import FORGET, Memory, failure_reason, settle
from gpuconf.scheduler.interface import Node
from gpuconf.scheduler.slurm import Slurm
from gpuconf.scheduler.step import host_command, memory_text, read_memory, reconcile

XID = "gpuconf: failed: Xid errors since this boot: GPU 0: Xid 79"
MINE = Memory(XID, "root@2026-12-04T08:00:00", 0)


def node(state: str = "IDLE", reason: str | None = None, stamp: str | None = None) -> Node:
    return Node("n1", state, reason, stamp)


DRAINED_BY_ME = node("IDLE+DRAIN", XID, "root@2026-12-04T08:00:00")


@pytest.mark.parametrize("found, complete, state, memory, action, healthy, remembers", [
    # a failure: drain at once, whatever the counter
    (XID, True, node(), FORGET, "drain", 0, True),
    (XID, False, node(), FORGET, "drain", 0, True),                       # found before the deadline: it counts
    (XID, True, node("MIXED"), FORGET, "drain", 0, True),                 # jobs run on it: drain, never kill
    (XID, True, DRAINED_BY_ME, MINE, "none", 0, True),                    # already, for this reason
    (XID, True, DRAINED_BY_ME, Memory(XID, MINE.stamp, 1), "none", 0, True),  # a relapse restarts the count
    ("gpuconf: failed: ecc", True, DRAINED_BY_ME, MINE, "drain", 0, True),  # its own drain: the reason follows
    # a failure on a node drained by someone else: left alone, and nothing of it remembered
    (XID, True, node("IDLE+DRAIN", "bad DIMM, ticket 4411", "alice@2026-12-04T07:00:00"), FORGET, "kept", 0, False),
    (XID, True, node("IDLE+DRAIN", "gpuconf: lemon (4 in 7 days)", "root@t"), FORGET, "kept", 0, False),
    (XID, True, node("IDLE+DRAIN", "gpuconf: remediation failed: xid", "root@t"), FORGET, "kept", 0, False),
    (XID, True, node("MIXED+DRAIN", XID, "root@2026-12-04T09:00:00"), MINE, "kept", 0, False),  # re-drained since
    # healthy: its own drain waits for two healthy runs in a row
    (None, True, DRAINED_BY_ME, MINE, "wait", 1, True),
    (None, True, DRAINED_BY_ME, Memory(XID, MINE.stamp, 1), "resume", 0, False),
    (None, True, node("DOWN+DRAIN", XID, MINE.stamp), Memory(XID, MINE.stamp, 1), "resume", 0, False),
    (None, False, DRAINED_BY_ME, Memory(XID, MINE.stamp, 1), "wait", 0, True),  # cut short: not healthy
    (None, True, node("IDLE+DRAIN", XID, None), Memory(XID, None, 1), "resume", 0, False),  # no stamp: the words
    # healthy, not its drain: never resumed
    (None, True, node("IDLE+DRAIN", "bad DIMM, ticket 4411", "alice@t"), FORGET, "kept", 0, False),
    (None, True, node("IDLE+DRAIN", XID, "root@2026-12-04T09:00:00"), Memory(XID, MINE.stamp, 1), "kept", 0,
     False),                                                              # remediate re-drained with the same words
    (None, True, node("IDLE+DRAIN", "gpuconf: drift: x", "root@t"), FORGET, "kept", 0, False),  # remediate's
    (None, True, node("IDLE+DRAIN", "gpuconf: lemon (4 in 7 days)", "root@t"), FORGET, "kept", 0, False),
    (None, True, node("IDLE+DRAIN", "gpuconf: remediation failed: xid", "r@t"), FORGET, "kept", 0, False),
    # healthy and in service
    (None, True, node(), FORGET, "none", 0, False),
    (None, True, node(), Memory(XID, MINE.stamp, 1), "none", 0, False),   # resumed by hand: forgotten
    (None, False, node("ALLOCATED"), FORGET, "none", 0, False),
])
def test_the_check_decides_from_the_node_and_what_it_remembers(found, complete, state, memory, action, healthy,
                                                             remembers):
    decided, after = settle(found, complete, state, memory)
    assert decided == action
    assert after.healthy == healthy
    assert (after.reason is not None) == remembers


def test_a_drift_drain_is_cleared_only_by_a_run_that_judges_drift():
    """A controller's `check --slurm` drained for drift; the node's own check ignores drift, so its
    healthy runs leave that drain to the controller's next runs."""
    drift = Memory("gpuconf: drift: start nvidia-fabricmanager", "root@t", 1)
    drained = node("IDLE+DRAIN", drift.reason, "root@t")
    assert settle(None, True, drained, drift, drift_drains=False) == ("wait", drift)
    assert settle(None, True, drained, drift, drift_drains=True) == ("resume", FORGET)


def test_an_intermittent_fault_never_flaps():
    state, memory, actions = node(), FORGET, []
    for found in [XID, None, XID, None, XID, None, None, None]:
        action, memory = settle(found, True, state, memory)
        actions.append(action)
        if action == "drain":
            memory = Memory(memory.reason, "root@t", 0)
            state = node("IDLE+DRAIN", found, "root@t")
        elif action == "resume":
            state = node()
    assert actions == ["drain", "wait", "none", "wait", "none", "wait", "resume", "none"]


def task(name: str, status: Status, **extra) -> TaskResult:
    return TaskResult("n1", "health", name, status, **extra)


def test_what_fails_a_node():
    drift = task("fabric manager", Status.WOULD_CHANGE)
    xid = task("xid", Status.FAILED, error="GPU 0: Xid 79")
    hung = task("ecc", Status.UNKNOWN, error="nvidia-smi timed out",
                findings=[Finding("driver_unresponsive", "failure", "nvidia-smi did not answer")])
    late = task("temperature", Status.UNKNOWN, error="the run's deadline came first")
    never = task("dcgm", Status.UNKNOWN, not_run="deadline", error="deadline")
    assert failure_reason(HostResult("n1", [drift]), True, drift_drains=False) is None  # on the node: drift is remediate's
    assert failure_reason(HostResult("n1", [drift]), True, drift_drains=True).startswith("gpuconf: drift: ")
    assert failure_reason(HostResult("n1", [drift, xid]), True, False) == "gpuconf: failed: xid: GPU 0: Xid 79"
    assert failure_reason(HostResult("n1", [late]), True, False) == "gpuconf: unknown: temperature: the run's " \
                                                                    "deadline came first"
    assert failure_reason(HostResult("n1", [late, never]), False, False) is None  # cut short: not the node's fault
    assert failure_reason(HostResult("n1", [late, hung]), False, False) == "gpuconf: unknown: ecc: nvidia-smi timed out"
    assert failure_reason(HostResult("n1", [task("ok", Status.OK), never]), True, False) is None
    held = task("gather facts", Status.FAILED, error="busy: another gpuconf run holds /run/gpuconf.lock on n1: apply")
    assert failure_reason(HostResult("n1", [held]), False, False) is None  # an apply holds the node: no verdict


class FakeNode:
    """One node's slurmctld state and its filesystem, answering the runner's ops as the real ones do."""

    def __init__(self, state: str = "IDLE", reason: str | None = None, by: str = "root"):
        self.state, self.reason, self.by, self.clock = state, reason, by, 0
        self.files: dict[str, bytes] = {}
        self.updates: list[str] = []

    def show(self) -> str:
        why = f"\n   Reason={self.reason} [{self.by}@2026-12-04T08:00:{self.clock:02d}]" if self.reason else ""
        return f"NodeName=n1 Arch=x86_64 CoresPerSocket=1\n   State={self.state} ThreadsPerCore=1{why}\n"

    def drain(self, reason: str, by: str = "alice") -> None:
        self.clock += 1
        self.state, self.reason, self.by = "IDLE+DRAIN", reason, by

    def call(self, ops, readonly):
        replies = []
        for op in ops:
            if op["op"] == "exec" and op["argv"][:2] == ["scontrol", "update"]:
                assert not readonly
                self.updates.append(shlex.join(op["argv"]))
                if "State=DRAIN" in op["argv"]:
                    self.drain(op["argv"][-1].removeprefix("Reason="), by="root")
                else:
                    self.state, self.reason = "IDLE", None
                replies.append({"rc": 0, "out": "", "err": "", "timed_out": False})
            elif op["op"] == "exec":
                assert op["argv"] == ["scontrol", "show", "node", "n1"] and readonly
                replies.append({"rc": 0, "out": self.show(), "err": "", "timed_out": False})
            elif op["op"] == "stat":
                data = self.files.get(op["path"])
                replies.append({"exists": False} if data is None else
                               {"exists": True, "content_b64": base64.b64encode(data).decode()})
            elif op["op"] == "mkdir":
                replies.append({"ok": True})
            elif op["op"] == "write":
                assert not readonly
                self.files[op["path"]] = base64.b64decode(op["content_b64"])
                replies.append({"ok": True})
        return replies


def run(fake: FakeNode, *tasks: TaskResult, complete: bool = True) -> str:
    action = reconcile(HostResult("n1", list(tasks)), "n1", Slurm(host_command(fake.call)), fake.call,
                       complete=complete, drift_drains=False, state_path="/state/healthcheck.json")
    assert action.error is None
    return action.action


def test_drain_then_resume_after_two_healthy_runs_with_the_memory_on_the_node():
    fake = FakeNode()
    failed, healthy = task("xid", Status.FAILED, error="GPU 0: Xid 79"), task("xid", Status.OK)
    assert run(fake, failed) == "drain"
    remembered = json.loads(fake.files["/state/healthcheck.json"])
    assert remembered == {"version": 1, "node": "n1", "reason": "gpuconf: failed: xid: GPU 0: Xid 79",
                          "stamp": "root@2026-12-04T08:00:01", "healthy": 0, "updated": remembered["updated"]}
    assert run(fake, failed) == "none"
    assert run(fake, healthy) == "wait"
    assert run(fake, healthy, complete=False) == "wait"  # cut short: the count starts over
    assert run(fake, healthy) == "wait"
    assert fake.state == "IDLE+DRAIN"
    assert run(fake, healthy) == "resume"
    assert fake.state == "IDLE" and json.loads(fake.files["/state/healthcheck.json"])["reason"] is None
    assert fake.updates == ["scontrol update NodeName=n1 State=DRAIN 'Reason=gpuconf: failed: xid: GPU 0: Xid 79'",
                            "scontrol update NodeName=n1 State=RESUME"]


def test_a_drain_with_the_same_words_set_since_is_not_the_checks():
    fake = FakeNode()
    failed, healthy = task("xid", Status.FAILED, error="GPU 0: Xid 79"), task("xid", Status.OK)
    assert run(fake, failed) == "drain"
    fake.drain("gpuconf: failed: xid: GPU 0: Xid 79", by="root")  # remediate takes the node over, same words
    assert [run(fake, healthy) for _ in range(3)] == ["kept", "kept", "kept"]
    assert fake.state == "IDLE+DRAIN" and len(fake.updates) == 1


def test_a_persons_drain_is_never_touched_and_nothing_is_written():
    fake = FakeNode("IDLE+DRAIN", "bad DIMM, ticket 4411", by="alice")
    assert run(fake, task("xid", Status.FAILED, error="Xid 79")) == "kept"
    assert [run(fake, task("xid", Status.OK)) for _ in range(3)] == ["kept", "kept", "kept"]
    assert fake.updates == [] and fake.files == {}


def test_memory_of_another_node_or_version_or_garbage_is_none():
    def stat(text: str) -> dict:
        return {"exists": True, "content_b64": base64.b64encode(text.encode()).decode()}
    assert read_memory(stat(memory_text(MINE, "n1")), "n1") == MINE
    assert read_memory(stat(memory_text(MINE, "n1")), "n2") == FORGET
    assert read_memory(stat(memory_text(MINE, "n1").replace('"version": 1', '"version": 9')), "n1") == FORGET
    assert read_memory(stat("{not json"), "n1") == FORGET
    assert read_memory(stat("[1, 2]"), "n1") == FORGET
    assert read_memory({"exists": False}, "n1") == FORGET
