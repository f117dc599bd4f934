"""`check --slurm`'s step after the run's tasks: for each host, read its node through the scheduler
and what the check remembers on the node, decide (`gpuconf.scheduler.healthcheck.settle`), drain or resume,
remember.

It is a step after the run (gpuconf/engine/after.py): the scheduler's client command runs on the
host itself, through the run's own connection (inside its run lock), as slurmd's health check would,
and the step has its own time budget (STEP_BUDGET), so that a run that reached its deadline still
drains a failed node and ends before slurmd kills it. The memory is one small JSON file on the node
(`--slurm-state`, default /var/lib/gpuconf/healthcheck.json), written atomically, and only when it
changes. What the step did is its own section of the report (`SchedulerActions`): the JSON report's
field named after the scheduler (`slurm`), lines at the end of the recap, exit bit 4 on an error.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuconf.engine.after import Call, OpenHosts
from gpuconf.engine.processors import NoEvents
from gpuconf.errors import GpuconfError
from gpuconf.facts.base import check_read_only
from gpuconf.facts.wire import Reply
from gpuconf.files.values import JSONValue
from gpuconf.results import EXIT_FAILED, EXIT_OK, Final, HostResult, RecapLine, RunResult
from gpuconf.scheduler.healthcheck import FORGET, RESUME_AFTER, Memory, failure_reason, settle
from gpuconf.scheduler.interface import Command, Scheduler, SchedulerError, reason_text
from gpuconf.scheduler.slurm import STEP_BUDGET

STATE_PATH = "/var/lib/gpuconf/healthcheck.json"
STATE_VERSION = 1


@dataclass
class NodeAction(Final):
    """What the check did to one node's scheduler state."""

    host: str
    node: str
    action: str  # drain, resume, wait (its own drain, not yet healthy twice), none, kept (not its drain), error
    reason: str | None = None
    previous_state: str | None = None
    previous_reason: str | None = None
    error: str | None = None
    healthy: int | None = None  # wait: healthy runs in a row so far


@dataclass
class SchedulerActions(Final):
    """The step's section of the run's result: one action per host."""

    scheduler: str  # its name: the JSON report's field and the recap lines' label
    actions: list[NodeAction] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.scheduler

    def report(self) -> JSONValue:
        return [dataclasses.asdict(action) for action in self.actions]

    def recap(self) -> list[RecapLine]:
        return [recap_line(self.scheduler, action) for action in self.actions]

    def exit_bits(self) -> int:
        # a node that could not be drained or resumed: someone must look
        return EXIT_FAILED if any(action.action == "error" for action in self.actions) else EXIT_OK

    def _seal(self) -> None:
        for action in self.actions:
            action._seal()
        object.__setattr__(self, "actions", tuple(self.actions))
        super()._seal()


def recap_line(label: str, action: NodeAction) -> RecapLine:
    what = {"drain": f"drained: {action.reason}", "resume": f"resumed (was: {action.previous_reason})",
            "wait": f"stays drained ({action.previous_reason}): healthy {action.healthy or 0} run(s) in a row, "
                    f"resumed after {RESUME_AFTER}",
            "kept": f"left as it is: not drained by this check ({action.previous_reason})",
            "none": f"nothing to do ({action.previous_state})", "error": f"FAILED: {action.error}"}[action.action]
    style = "red" if action.action == "error" else "yellow" if action.action in ("drain", "wait", "kept") else "green"
    return RecapLine(label, style, f"[{action.node}] {what}")


class SchedulerStep(NoEvents):
    """`check --slurm` after the tasks: drain the nodes that failed, resume the check's own drains
    once healthy. `scheduler` makes the scheduler from a command that runs on the host (`Slurm`);
    `nodes` maps an inventory host to its node name (default: the same name)."""

    def __init__(self, name: str, scheduler: Callable[[Command], Scheduler], nodes: dict[str, str], *,
                 drift_drains: bool = True, state_path: str = STATE_PATH, budget: float = STEP_BUDGET):
        self.name, self.scheduler, self.nodes = name, scheduler, nodes
        self.drift_drains, self.state_path, self.budget = drift_drains, state_path, budget

    def run_completed(self, run: RunResult, hosts: OpenHosts) -> SchedulerActions:
        actions = []
        for name, host in run.hosts.items():
            node = self.nodes.get(name, name)
            try:
                call = hosts.call(name, self.budget)
                scheduler = None if call is None else self.scheduler(host_command(call))
                actions.append(reconcile(host, node, scheduler, call, complete=hosts.complete(name),
                                         drift_drains=self.drift_drains, state_path=self.state_path))
            except GpuconfError as exc:
                actions.append(NodeAction(host=name, node=node, action="error", error=str(exc)))
            except Exception as exc:  # noqa: BLE001 - a scheduler problem is reported, never a traceback
                actions.append(NodeAction(host=name, node=node, action="error", error=f"{type(exc).__name__}: {exc}"))
        return SchedulerActions(self.name, actions)


def host_command(call: Call) -> Command:
    """A scheduler's client command on the host, through the run's own connection: a read-only use
    (`scontrol show`) goes as a read, inside a check's shared run lock; any other as a write."""
    def run(argv: list[str], timeout: float) -> tuple[int, str, str]:
        try:
            check_read_only(argv)
            readonly = True
        except ValueError:
            readonly = False
        reply = call([{"op": "exec", "argv": argv, "timeout": timeout}], readonly)[0]
        if reply.get("error"):
            raise SchedulerError(f"{shlex.join(argv)}: {reply['error']}")
        if reply.get("timed_out"):
            raise SchedulerError(f"{shlex.join(argv)}: no answer within {timeout:g} s (is slurmctld up?)")
        return int(reply.get("rc", 1)), str(reply.get("out", "")), str(reply.get("err", ""))
    return run


def read_memory(reply: Reply, node: str) -> Memory:
    """The remembered drain from a `stat` reply of the state file; nothing remembered when the file
    is missing, unreadable, of another version or of another node name (the safe side: a drain
    the check cannot prove it set is never resumed)."""
    content = reply.get("content_b64")
    if not reply.get("exists") or content is None:
        return FORGET
    try:
        data = json.loads(base64.b64decode(content).decode("utf-8"))
        if data.get("version") != STATE_VERSION or data.get("node") != node:
            return FORGET
        return Memory(data.get("reason"), data.get("stamp"), int(data.get("healthy", 0)))
    except (ValueError, TypeError, AttributeError):
        return FORGET


def memory_text(memory: Memory, node: str) -> str:
    data = {"version": STATE_VERSION, "node": node, "reason": memory.reason, "stamp": memory.stamp,
            "healthy": memory.healthy, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def reconcile(host: HostResult, node: str, scheduler: Scheduler | None, call: Call | None, *,
              complete: bool = True, drift_drains: bool = True, state_path: str = STATE_PATH) -> NodeAction:
    """Read the node's scheduler state and drain or resume it. `call(ops, readonly)` is one round
    trip to the host, for the check's memory on it."""
    action = NodeAction(host=host.host, node=node, action="none")
    if host.unreachable or call is None or scheduler is None:
        action.action, action.error = "error", "host unreachable: its scheduler state was not read"
        return action
    try:
        state = scheduler.nodes([node]).get(node)
    except SchedulerError as exc:
        action.action, action.error = "error", str(exc)
        return action
    if state is None:
        action.action = "error"
        action.error = f"{scheduler.name} has no node '{node}' (the host variable slurm_node_name names it)"
        return action
    action.previous_state, action.previous_reason = state.state, state.reason
    memory = read_memory(call([{"op": "stat", "path": state_path, "follow": True, "content": True}], True)[0], node)
    reason = failure_reason(host, complete, drift_drains)
    # as the scheduler will keep it: the memory compares the node's reason with it word for word
    reason = reason_text(reason) if reason else None
    action.action, remembered = settle(reason, complete, state, memory, drift_drains)
    action.healthy = remembered.healthy if action.action == "wait" else None
    if action.action in ("drain", "resume"):
        action.reason = reason if action.action == "drain" else None
        try:
            if reason is not None and action.action == "drain":
                scheduler.drain(node, reason)
            else:
                scheduler.resume(node)
        except SchedulerError as exc:
            action.action, action.error = "error", str(exc)
            return action  # nothing changed: the memory stays as it was
        if action.action == "drain":
            try:
                again = scheduler.nodes([node]).get(node)
                if again is not None:
                    remembered = Memory(remembered.reason, again.stamp, 0)
            except SchedulerError:
                pass  # without the stamp the reason's words alone identify the drain
    if remembered != memory:
        _remember(call, remembered, node, state_path, action)
    return action


def _remember(call: Call, memory: Memory, node: str, path: str, action: NodeAction) -> None:
    directory = path.rsplit("/", 1)[0] or "/"
    content = base64.b64encode(memory_text(memory, node).encode()).decode()
    replies = call([{"op": "mkdir", "path": directory},
                    {"op": "write", "path": path, "content_b64": content, "mode": 0o644}], False)
    problem = next((r["error"] for r in replies if r.get("error")), None)
    if problem:
        # the scheduler's state is set; only the count is lost, so a resume waits longer: say so, and fail the run
        action.action, action.error = "error", f"cannot remember the check's state in {path}: {problem}"
