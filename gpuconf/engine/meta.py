"""Ansible's `meta:` steps on one host: what each decides (the play on the host, engine/hostrun.py,
acts on it).

- `flush_handlers` runs the handlers notified so far (engine/handlers.py), as the play does at the
  end of pre_tasks, of roles and tasks, and of post_tasks;
- `end_host` ends the play for this host, `end_play` and `end_batch` for every host of the batch
  (which then meets after each task: engine/batch.py), `end_role` skips the rest of its role;
- `noop`, `clear_host_errors`, `clear_facts`, `refresh_inventory`, `reset_connection` change
  nothing gpuconf keeps between tasks: each is reported as done.
"""
from __future__ import annotations

import time
from enum import Enum

from gpuconf.engine.hostlog import HostLog
from gpuconf.engine.planner import HostPlanner
from gpuconf.errors import GpuconfError, TaskError
from gpuconf.playbook.models import Play, TaskDef
from gpuconf.results import Status

ENDS_BATCH = ("end_play", "end_batch")   # for every host of the batch: the hosts meet after each task
# what a task reads of the other hosts' progress: where it appears, the hosts meet after each task
READS_HOSTS = ("hostvars", "ansible_play_hosts", "ansible_play_batch", "play_hosts")
MESSAGES = {"end_play": "ending play", "end_batch": "ending batch", "noop": "noop",
            "clear_host_errors": "cleared host errors", "clear_facts": "facts cleared",
            "refresh_inventory": "inventory successfully refreshed", "reset_connection": "reset connection"}


class Next(Enum):
    """What the host does after a meta step."""

    GO_ON = "go on"
    FLUSH = "flush handlers"
    END_ROLE = "end role"
    CLEAR_ERRORS = "clear host errors"
    FAIL_HOST = "fail host"   # not a meta step: what an include that cannot read its file does
    END_HOST = "end host"
    END_BATCH = "end batch"


def ends_batch(tasks: list[TaskDef]) -> bool:
    return any(t.type == "meta" and t.params.get("_raw_params") in ENDS_BATCH for t in tasks)


def play_meets(play: Play) -> bool:
    """`meets` for the play, worked out once."""
    if play.meets is None:
        play.meets = meets(play.tasks + play.handlers, play.keywords.any_errors_fatal)
    return play.meets


def meets(tasks: list[TaskDef], any_errors_fatal: bool) -> bool:
    """Whether the hosts of a batch meet after each task, as Ansible's linear strategy has them: where
    its result depends on it (any_errors_fatal, meta: end_play or end_batch, a task that reads
    another host's variables through `hostvars`, or which hosts are left). Elsewhere each host goes
    at its own pace."""
    return any_errors_fatal or ends_batch(tasks) or any(
        t.keywords.any_errors_fatal or any(name in text for name in READS_HOSTS)
        for t in tasks for text in [repr((t.params, t.keywords.when, t.role_when))])


def run_meta(task: TaskDef, planner: HostPlanner, log: HostLog, in_handler: bool) -> Next:
    """A meta step on the host: its `when`, then what it does (recorded in `log`). TaskError where
    Ansible refuses it (flush_handlers or end_role as a handler, end_role outside a role)."""
    action = str(task.params.get("_raw_params"))
    host = planner.host
    started = time.monotonic()
    try:
        holds = planner.render_task(task) is not None
    except GpuconfError as exc:
        raise TaskError(f"{exc} in task '{task.name}'") from None
    if not holds:
        result = log.result(task, Status.SKIPPED, message=f"{action} conditional evaluated to False")
        result.handler = in_handler
        log.finish(task, result, started, register=False)
        return Next.GO_ON
    if action == "flush_handlers" and in_handler:
        raise TaskError("flush_handlers cannot be used as a handler")
    if action == "end_role" and task.role is None:
        raise TaskError("Cannot execute 'end_role' from outside of a role")
    if action == "end_role" and in_handler:
        raise TaskError("Cannot execute 'end_role' from a handler")
    message = {"flush_handlers": f"triggered running handlers for {host}", "end_host": f"ending play for {host}",
               "end_role": f"ending role {task.role} for {host}"}.get(action) or MESSAGES.get(action, action)
    result = log.result(task, Status.OK, message=message)
    result.handler = in_handler
    log.finish(task, result, started, register=False)
    return {"flush_handlers": Next.FLUSH, "end_role": Next.END_ROLE, "end_host": Next.END_HOST,
            "clear_host_errors": Next.CLEAR_ERRORS,
            "end_play": Next.END_BATCH, "end_batch": Next.END_BATCH}.get(action, Next.GO_ON)
