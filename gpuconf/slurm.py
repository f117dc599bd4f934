"""`check --slurm`: drain a node that failed, resume it once it is healthy again.

Run on the node itself as Slurm's HealthCheckProgram (`gpuconf check PLAYBOOK -c local --slurm`,
docs/slurm.md), or from a controller over SSH: either way `scontrol` runs on the host, through its
own connection, as slurmd's health check would. The rules are NHC's, made stricter:

* a failure (a failed task, or an unknown one in a run that was not cut short; from a controller,
  drift too): `scontrol update NodeName=<node> State=DRAIN Reason="gpuconf: <short reason>"`,
  unless the node is already drained for another reason (an operator's drain, remediate's, a
  `remediation failed` or `lemon` one: never overwritten) or for this same reason;
* healthy: `State=RESUME`, but only for a drain this check set itself (remembered on the node,
  `gpuconf/slurm_step.py`) and only after two healthy runs in a row, so a node never flaps.
  A drain set by a person or by another tool is never undone; neither is a `gpuconf:
  remediation failed` or `gpuconf: lemon` drain, which waits for a person or a verifying remediate.

The node's Slurm name is the inventory name, or the `slurm_node_name` host variable.
Deciding is pure (`decide`, `settle`, `parse_show_node`), so the rules are tested without a host.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from gpuconf.connection.base import BUSY
from gpuconf.report.redact import visible_changes, visible_error
from gpuconf.results import HostResult, Status, TaskResult

PREFIX = "gpuconf:"
# Slurm 22.05's slurmd kills a HealthCheckProgram after 60 s (run_script_health_check: max_wait
# 60 * 1000 ms; `man slurm.conf`, HealthCheckProgram). The tasks get DEADLINE, the Slurm step
# STEP_BUDGET after them, and the rest is left for starting Python and exiting.
DEADLINE = 35.0  # --deadline under --slurm
STEP_BUDGET = 15.0  # seconds for the Slurm step of one host (scontrol and the remembered state)
RESUME_AFTER = 2  # healthy runs in a row before the check resumes its own drain
# drains nobody resumes automatically: they wait for a person or a remediate run that verifies the node
FAILED_PREFIX = f"{PREFIX} remediation failed:"  # set by remediate when a node fails its verification
LEMON_PREFIX = f"{PREFIX} lemon"  # set by remediate for a node remediated too often
HELD = (FAILED_PREFIX.rstrip(":"), LEMON_PREFIX)
REASON_MAX = 120
SCONTROL_TIMEOUT = 10
REASON_STAMP = re.compile(r"\s*\[([^\[\]@]*@[^\[\]]*)\]\s*$")  # Slurm appends " [user@time]"


@dataclass
class NodeState:
    name: str
    state: str  # e.g. IDLE, MIXED+DRAIN, DOWN*+DRAIN
    reason: str | None
    stamp: str | None = None  # who set the reason, and when: "root@2026-12-04T08:00:00"

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state.split("+")[1:] or self.state.startswith(("DRAIN", "DOWN"))

    @property
    def ours(self) -> bool:
        """A reason gpuconf set (the check's or remediate's)."""
        return self.reason is not None and self.reason.startswith(PREFIX)

    @property
    def held(self) -> bool:
        """`remediation failed` or `lemon`: never resumed, never overwritten, automatically."""
        return self.reason is not None and self.reason.startswith(HELD)


def parse_show_node(text: str) -> NodeState:
    """`scontrol show node NAME` (multi-line or -o): the state and the reason, without its stamp."""
    name = state = ""
    reason = stamp = None
    for line in text.splitlines():
        stripped = line.strip()
        tail = None
        if stripped.startswith("Reason="):
            tail, stripped = stripped[len("Reason="):], ""
        elif " Reason=" in stripped:  # the one-line form: the reason runs to the end of the line
            stripped, _, tail = stripped.partition(" Reason=")
        if tail is not None:
            found = REASON_STAMP.search(tail)
            stamp = found.group(1) if found else None
            reason = REASON_STAMP.sub("", tail) or None
        for token in stripped.split():
            key, _, value = token.partition("=")
            if key == "NodeName":
                name = value
            elif key == "State":
                state = value
    if not name or not state:
        raise ValueError(f"not the output of scontrol show node: {text.strip()[:200]!r}")
    return NodeState(name, state, reason, stamp if reason else None)


def drain_reason(host: HostResult) -> str | None:
    """`gpuconf: <what>`, short, or None when the host is in sync."""
    failed = [t for t in host.tasks if t.status in (Status.FAILED, Status.UNKNOWN) and not t.ignored]
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


def decide(reason: str | None, node: NodeState) -> str:
    """'drain', 'resume', 'kept' (someone else's drain, or a held one) or 'none', without memory:
    any `gpuconf:` drain but a held one counts as gpuconf's. The check itself uses `settle`."""
    if node.drained and node.held:
        return "kept"
    if reason is not None:
        if node.drained and not node.ours:
            return "kept"
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
            return task.not_run is None and (complete or any(f.severity == "failure" for f in task.findings))
        return True
    return drain_reason(HostResult(host.host, [t for t in host.tasks if counts(t)]))


def busy(task: TaskResult) -> bool:
    """The task could not run: another gpuconf run (an apply, remediate) held the host's lock."""
    return (task.error or "").startswith(BUSY)


@dataclass(frozen=True)
class Memory:
    """What the check remembers on the node between runs: the drain it set (its reason, and
    Slurm's stamp of it read back, so that anyone's later drain, even with the same words, is
    not mistaken for it) and how many healthy runs in a row it has seen since."""

    reason: str | None = None
    stamp: str | None = None
    healthy: int = 0

    def mine(self, node: NodeState) -> bool:
        """The node is drained, still by the drain this check set."""
        if self.reason is None or not node.drained or node.reason != self.reason:
            return False
        return self.stamp is None or node.stamp is None or node.stamp == self.stamp


FORGET = Memory()


def settle(reason: str | None, complete: bool, node: NodeState, memory: Memory,
           drift_drains: bool = True) -> tuple[str, Memory]:
    """The check's decision and what it remembers next. `reason`: the failure found (None: healthy);
    `complete`: the run was not cut short; `drift_drains`: the run judges drift (from a controller).
    Actions: 'drain', 'resume', 'wait' (its own drain, not yet healthy twice in a row), 'kept' (a
    drain it did not set) or 'none'."""
    mine = memory.mine(node)
    if reason is not None:
        if node.drained and not mine:
            return "kept", FORGET
        if mine and node.reason == reason:
            return "none", replace(memory, healthy=0)
        return "drain", Memory(reason)  # Slurm's stamp is read back once it is set
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


def show_command(node: str) -> str:
    return shlex.join(["scontrol", "show", "node", node])


def update_command(node: str, action: str, reason: str | None) -> str:
    if action == "drain":
        return shlex.join(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"])
    return shlex.join(["scontrol", "update", f"NodeName={node}", "State=RESUME"])
