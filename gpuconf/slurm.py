"""`check --slurm`: drain a node that drifted or failed, resume it once it is back in sync.

Meant for Slurm's HealthCheckProgram or a prolog, run on the node itself (pull mode), or
from a controller over SSH: either way `scontrol` runs on the host, through its own
connection, as slurmd's health check would. The rules are NHC's:

* drift, a failed or unknown task: `scontrol update NodeName=<node> State=DRAIN
  Reason="gpuconf: <short reason>"`, unless the node is already drained for another
  reason (an operator's drain is never overwritten) or for this same reason;
* in sync: `State=RESUME`, but only when the current reason starts with `gpuconf:`.
  A drain an operator set by hand is never undone.

The node's Slurm name is the inventory name, or the `slurm_node_name` host variable.
Deciding is pure (`decide`, `parse_show_node`), so the rules are tested without a host.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from gpuconf.errors import GpuconfError
from gpuconf.report.redact import visible_changes, visible_error
from gpuconf.results import HostResult, RunResult, SlurmAction, Status

PREFIX = "gpuconf:"
DEADLINE = 45.0  # --deadline under --slurm: Slurm kills a HealthCheckProgram after 60 s
REASON_MAX = 120
SCONTROL_TIMEOUT = 10
REASON_STAMP = re.compile(r"\s*\[[^\[\]@]*@[^\[\]]*\]\s*$")  # Slurm appends " [user@time]"


@dataclass
class NodeState:
    name: str
    state: str  # e.g. IDLE, MIXED+DRAIN, DOWN*+DRAIN
    reason: str | None

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state.split("+")[1:] or self.state.startswith(("DRAIN", "DOWN"))

    @property
    def ours(self) -> bool:
        return self.reason is not None and self.reason.startswith(PREFIX)


def parse_show_node(text: str) -> NodeState:
    """`scontrol show node NAME` (multi-line or -o): the state and the reason, without its stamp."""
    name = state = ""
    reason = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Reason="):
            reason = REASON_STAMP.sub("", stripped[len("Reason="):]) or None
            continue
        if " Reason=" in stripped:  # the one-line form: the reason runs to the end of the line
            stripped, _, tail = stripped.partition(" Reason=")
            reason = REASON_STAMP.sub("", tail) or None
        for token in stripped.split():
            key, _, value = token.partition("=")
            if key == "NodeName":
                name = value
            elif key == "State":
                state = value
    if not name or not state:
        raise ValueError(f"not the output of scontrol show node: {text.strip()[:200]!r}")
    return NodeState(name, state, reason)


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
    """'drain', 'resume', 'kept' (someone else's drain) or 'none'."""
    if reason is not None:
        if node.drained and not node.ours:
            return "kept"
        if node.drained and node.reason == reason:
            return "none"
        return "drain"
    if node.drained and node.ours:
        return "resume"
    return "kept" if node.drained else "none"


def show_command(node: str) -> str:
    return shlex.join(["scontrol", "show", "node", node])


def update_command(node: str, action: str, reason: str | None) -> str:
    if action == "drain":
        return shlex.join(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"])
    return shlex.join(["scontrol", "update", f"NodeName={node}", "State=RESUME"])


def reconcile(host: HostResult, node: str, call) -> SlurmAction:
    """Read the node's Slurm state and drain or resume it. `call(ops, readonly)` is one round trip."""
    action = SlurmAction(host=host.host, node=node, action="none")
    if host.unreachable or call is None:
        action.action, action.error = "error", "host unreachable: its Slurm state was not read"
        return action
    reply = call([{"op": "exec", "argv": ["scontrol", "show", "node", node], "timeout": SCONTROL_TIMEOUT}], True)[0]
    if reply.get("rc") != 0:
        action.action = "error"
        said = reply.get("err") or reply.get("out") or reply.get("error") or ""
        action.error = f"{show_command(node)}: {said.strip()}"
        return action
    try:
        state = parse_show_node(reply.get("out", ""))
    except ValueError as exc:
        action.action, action.error = "error", str(exc)
        return action
    action.previous_state, action.previous_reason = state.state, state.reason
    reason = drain_reason(host)
    action.action = decide(reason, state)
    if action.action in ("drain", "resume"):
        action.reason = reason if action.action == "drain" else None
        command = update_command(node, action.action, reason)
        done = call([{"op": "run", "cmd": command, "timeout": SCONTROL_TIMEOUT, "check": False}], False)[0]
        if done.get("rc") != 0:
            action.action = "error"
            action.error = f"{command}: {(done.get('err') or done.get('out') or done.get('error') or '').strip()}"
    return action


def reconcile_all(run: RunResult, node_names: dict[str, str],
                  caller: Callable[[str], Callable[[list[dict], bool], list[dict]] | None]) -> list[SlurmAction]:
    """Reconcile every host of the run. `caller(host)` gives the run's own round trip to that
    host (inside its lock and deadline), or None when the host was never reached."""
    actions = []
    for name, host in run.hosts.items():
        node = node_names.get(name, name)
        try:
            actions.append(reconcile(host, node, caller(name)))
        except GpuconfError as exc:
            actions.append(SlurmAction(host=name, node=node, action="error", error=str(exc)))
        except Exception as exc:  # noqa: BLE001 - a Slurm problem is reported, never a traceback
            actions.append(SlurmAction(host=name, node=node, action="error", error=f"{type(exc).__name__}: {exc}"))
    return actions
