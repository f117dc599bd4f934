"""The Slurm step of a `--slurm` run, after its tasks: read the node's Slurm state and what the
check remembers on the node, decide (`gpuconf.slurm.settle`), drain or resume, remember.

Every round trip goes through the run's own connection to the host (inside its run lock), and
the step has its own time budget (`STEP_BUDGET`), so that a run that reached its deadline still
drains a failed node and ends before slurmd kills it. The memory is one small JSON file on the
node (`--slurm-state`, default /var/lib/gpuconf/healthcheck.json), written atomically, and
only when it changes.
"""
from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

from gpuconf.errors import GpuconfError
from gpuconf.results import HostResult, RunResult, SlurmAction
from gpuconf.slurm import (
    FORGET,
    SCONTROL_TIMEOUT,
    Memory,
    failure_reason,
    parse_show_node,
    settle,
    show_command,
    update_command,
)

STATE_PATH = "/var/lib/gpuconf/healthcheck.json"
STATE_VERSION = 1

Call = Callable[[list[dict[str, Any]], bool], list[dict[str, Any]]]


def read_memory(reply: dict[str, Any], node: str) -> Memory:
    """The remembered drain from a `stat` reply of the state file; nothing remembered when the file
    is missing, unreadable, of another version or of another node name (the safe side: a drain
    the check cannot prove it set is never resumed)."""
    if not reply.get("exists") or "content_b64" not in reply:
        return FORGET
    try:
        data = json.loads(base64.b64decode(reply["content_b64"]).decode("utf-8"))
        if data.get("version") != STATE_VERSION or data.get("node") != node:
            return FORGET
        return Memory(data.get("reason"), data.get("stamp"), int(data.get("healthy", 0)))
    except (ValueError, TypeError, AttributeError):
        return FORGET


def memory_text(memory: Memory, node: str) -> str:
    data = {"version": STATE_VERSION, "node": node, "reason": memory.reason, "stamp": memory.stamp,
            "healthy": memory.healthy, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def _said(reply: dict[str, Any]) -> str:
    return (reply.get("err") or reply.get("out") or reply.get("error") or "").strip()


def _show(call: Call, node: str, state_path: str | None = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    ops: list[dict[str, Any]] = [{"op": "exec", "argv": ["scontrol", "show", "node", node],
                                  "timeout": SCONTROL_TIMEOUT}]
    if state_path:
        ops.append({"op": "stat", "path": state_path, "follow": True, "content": True})
    replies = call(ops, True)
    return replies[0], (replies[1] if state_path else None)


def reconcile(host: HostResult, node: str, call: Call | None, *, complete: bool = True,
              drift_drains: bool = True, state_path: str = STATE_PATH) -> SlurmAction:
    """Read the node's Slurm state and drain or resume it. `call(ops, readonly)` is one round trip."""
    action = SlurmAction(host=host.host, node=node, action="none")
    if host.unreachable or call is None:
        action.action, action.error = "error", "host unreachable: its Slurm state was not read"
        return action
    shown, stored = _show(call, node, state_path)
    if shown.get("rc") != 0:
        action.action, action.error = "error", f"{show_command(node)}: {_said(shown)}"
        return action
    try:
        state = parse_show_node(shown.get("out", ""))
    except ValueError as exc:
        action.action, action.error = "error", str(exc)
        return action
    action.previous_state, action.previous_reason = state.state, state.reason
    memory = read_memory(stored or {}, node)
    reason = failure_reason(host, complete, drift_drains)
    action.action, remembered = settle(reason, complete, state, memory, drift_drains)
    action.healthy = remembered.healthy if action.action == "wait" else None
    if action.action in ("drain", "resume"):
        action.reason = reason if action.action == "drain" else None
        command = update_command(node, action.action, reason)
        done = call([{"op": "run", "cmd": command, "timeout": SCONTROL_TIMEOUT, "check": False}], False)[0]
        if done.get("rc") != 0:
            action.action, action.error = "error", f"{command}: {_said(done)}"
            return action  # nothing changed: the memory stays as it was
        if action.action == "drain":
            again, _ = _show(call, node)
            if again.get("rc") == 0:
                try:
                    stamp = parse_show_node(again.get("out", "")).stamp
                    remembered = Memory(remembered.reason, stamp, 0)
                except ValueError:
                    pass  # without the stamp the reason's words alone identify the drain
    if remembered != memory:
        _remember(call, remembered, node, state_path, action)
    return action


def _remember(call: Call, memory: Memory, node: str, path: str, action: SlurmAction) -> None:
    directory = path.rsplit("/", 1)[0] or "/"
    content = base64.b64encode(memory_text(memory, node).encode()).decode()
    replies = call([{"op": "mkdir", "path": directory},
                    {"op": "write", "path": path, "content_b64": content, "mode": 0o644}], False)
    problem = next((r["error"] for r in replies if r.get("error")), None)
    if problem:
        # Slurm's state is set; only the count is lost, so a resume waits longer: say so, and fail the run
        action.action, action.error = "error", f"cannot remember the check's state in {path}: {problem}"


def reconcile_all(run: RunResult, node_names: dict[str, str], caller: Callable[[str], Call | None], *,
                  complete: Callable[[str], bool] = lambda host: True, drift_drains: bool = True,
                  state_path: str = STATE_PATH) -> list[SlurmAction]:
    """Reconcile every host of the run. `caller(host)` gives the run's own round trip to that
    host (inside its lock, with the step's own budget), or None when the host was never reached;
    `complete(host)` says whether that host's run was not cut short."""
    actions = []
    for name, host in run.hosts.items():
        node = node_names.get(name, name)
        try:
            actions.append(reconcile(host, node, caller(name), complete=complete(name), drift_drains=drift_drains,
                                     state_path=state_path))
        except GpuconfError as exc:
            actions.append(SlurmAction(host=name, node=node, action="error", error=str(exc)))
        except Exception as exc:  # noqa: BLE001 - a Slurm problem is reported, never a traceback
            actions.append(SlurmAction(host=name, node=node, action="error", error=f"{type(exc).__name__}: {exc}"))
    return actions
