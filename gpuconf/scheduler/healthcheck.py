"""`check --slurm`'s rules: drain a node that failed, resume it once it is healthy again.

Run on the node itself as Slurm's HealthCheckProgram (`gpuconf check PLAYBOOK -c local --slurm`,
docs/slurm.md), or from a controller over SSH. The rules are NHC's, made stricter:

* a failure (a failed task, or an unknown one in a run that was not cut short; from a controller,
  drift too): drain with `gpuconf: <short reason>`, unless the node is already drained for another
  reason (an operator's drain, remediate's, a `remediation failed` or `lemon` one: never
  overwritten) or for this same reason;
* healthy: resume, but only a drain this check set itself (remembered on the node,
  gpuconf/scheduler/step.py) and only after two healthy runs in a row, so a node never flaps.
  A drain set by a person or by another tool is never undone; neither is a `gpuconf:
  remediation failed` or `gpuconf: lemon` drain, which waits for a person or a verifying remediate,
  nor a `gpuconf: hardware:` hold, which waits for a person alone.

Deciding is pure (`decide`, `settle`), so the rules are tested without a host or a scheduler.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from gpuconf.engine.after import busy
from gpuconf.report.redact import visible_changes, visible_error
from gpuconf.results import HostResult, Status, TaskResult
from gpuconf.scheduler.interface import PREFIX, REASON_MAX, Node

RESUME_AFTER = 2  # healthy runs in a row before the check resumes its own drain


def drain_reason(host: HostResult) -> str | None:
    """`gpuconf: <what>`, short, or None when the host is in sync."""
    failed = [t for t in host.tasks if t.failed]
    drifted = [t for t in host.tasks if t.status == Status.WOULD_CHANGE]
    if failed:
        first = failed[0]
        error = (visible_error(first) or first.status.value).strip().splitlines()
        text = f"{first.status.value}: {first.task}: {error[0] if error else ''}"
        others = len(failed) - 1
    elif drifted:
        changes = visible_changes(drifted[0])
        text = f"drift: {changes[0].summary if changes else drifted[0].task}"
        others = len(drifted) - 1
    else:
        return None
    if others:
        text += f" (+{others} more)"
    reason = f"{PREFIX} {text}"
    return reason if len(reason) <= REASON_MAX else reason[: REASON_MAX - 1] + "…"


def decide(reason: str | None, node: Node) -> str:
    """'drain', 'resume', 'kept' (someone else's drain, or a held one) or 'none', without memory:
    any `gpuconf:` drain but a held one counts as gpuconf's. The check itself uses `settle`."""
    if node.keeps_drain(node.ours) and (reason is not None or node.held):
        return "kept"
    if reason is not None:
        if node.drained and node.reason == reason:
            return "none"
        return "drain"
    if node.drained and node.ours:
        return "resume"
    return "kept" if node.drained else "none"


def failure_reason(host: HostResult, complete: bool, drift_drains: bool) -> str | None:
    """What drains the node, as `drain_reason` words it, or None when it is healthy. A run cut short
    (the deadline, an interrupt, another gpuconf run holding the host: `busy`) did not judge the tasks
    it never finished: theirs is no failure of the node's. Drift drains only when `drift_drains`
    (a run from a controller)."""
    def counts(task: TaskResult) -> bool:
        if busy(task):
            return False
        if task.status == Status.WOULD_CHANGE:
            return drift_drains
        if task.status == Status.UNKNOWN:
            return task.not_run is None and (complete or task.unhealthy)
        return True
    return drain_reason(HostResult(host.host, [t for t in host.tasks if counts(t)]))


@dataclass(frozen=True)
class Memory:
    """What the check remembers on the node between runs: the drain it set (its reason, and the
    scheduler's stamp of it read back, so that anyone's later drain, even with the same words, is
    not mistaken for it) and how many healthy runs in a row it has seen since."""

    reason: str | None = None
    stamp: str | None = None
    healthy: int = 0

    def mine(self, node: Node) -> bool:
        """The node is drained, still by the drain this check set."""
        if self.reason is None or not node.drained or node.reason != self.reason:
            return False
        return self.stamp is None or node.stamp is None or node.stamp == self.stamp


FORGET = Memory()


def settle(reason: str | None, complete: bool, node: Node, memory: Memory,
           drift_drains: bool = True) -> tuple[str, Memory]:
    """The check's decision and what it remembers next. `reason`: the failure found (None: healthy);
    `complete`: the run was not cut short; `drift_drains`: the run judges drift (from a controller).
    Actions: 'drain', 'resume', 'wait' (its own drain, not yet healthy twice in a row), 'kept' (a
    drain it did not set) or 'none'."""
    mine = memory.mine(node)
    # someone else's drain, or a held one (failed, lemon, hardware: a person's or remediate's to lift)
    if node.keeps_drain(mine) and (reason is not None or node.held):
        return "kept", FORGET
    if reason is not None:
        if mine and node.reason == reason:
            return "none", replace(memory, healthy=0)
        return "drain", Memory(reason)  # the scheduler's stamp is read back once it is set
    if not mine:
        return ("kept" if node.drained else "none"), FORGET  # resumed by hand, or not ours: forget
    if not complete:
        return "wait", replace(memory, healthy=0)  # a run cut short is not a healthy one
    if not drift_drains and (memory.reason or "").startswith(f"{PREFIX} drift:"):
        return "wait", memory  # a drift drain (a controller's check): a run that ignores drift cannot clear it
    healthy = memory.healthy + 1
    if healthy >= RESUME_AFTER:
        return "resume", FORGET
    return "wait", replace(memory, healthy=healthy)
