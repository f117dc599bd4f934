"""Consecutive changes of one kind carried out together: a run of package tasks is one package
transaction, not one per task (issue 27, item 7).

A task type says it can join others (`TaskType.batch`, a kind such as "package") and how its
ops and theirs become one list (`join`, `apply_joined`). The engine knows no task by name: it
decides which of the tasks right after a changed one may go with it, by these rules, and
(gpuconf/engine/hostrun.py) applies them in one round trip, then re-checks and reports each
task as its own, at its turn. Where the joint apply fails, each task runs alone again and fails
with its own error.

A task joins the one before it when nothing between them could depend on it:
- its type has the same non-empty `batch`: any other task type (a file, a service, set_fact,
  a reboot) ends the run;
- it runs the same way: `become`, `become_user`, `timeout`, the same blocks (a rescue is not
  run unless its block failed), no loop, no `run_once`, no `delegate_to`, no `check_mode`;
- its conditions and params, judged before the first task applies, read no result that a task
  of the run registers (checked by the variables they looked up, not by their text);
- its check finds its own changes, and its type can join them (a dnf module stream switch goes
  alone). A task in sync is passed over: it is checked again at its turn.
Handlers run at the end of the play, so a `notify` is no boundary.
"""
from __future__ import annotations

from gpuconf.playbook.models import ENGINE_ACTIONS, TaskDef
from gpuconf.tasks.registry import TASK_TYPES

EVERY_NAME = "\0every name"  # what a lookup records when it reads every variable (Vars.__iter__)


def batch_of(task: TaskDef) -> str:
    """The kind of change the task's type can join with others ("" for none)."""
    if task.type in ENGINE_ACTIONS or task.type not in TASK_TYPES:
        return ""
    return TASK_TYPES[task.type].batch


def refusal(first: TaskDef, later: TaskDef) -> str | None:
    """Why `later` cannot be applied together with `first` (the first task of a run), or None.
    What only the host's facts and the variables tell (conditions, registered results, the
    check) is decided on the host (HostPlanner.joinable)."""
    kind = batch_of(first)
    if not kind or batch_of(later) != kind:
        return "another kind of task in between"
    if TASK_TYPES[later.type].reboots:
        return "it reboots"
    if first.keywords.items is not None or first.item_vars or later.keywords.items is not None or later.item_vars:
        return "a loop"
    keywords = later.keywords
    if keywords.run_once or keywords.delegate_to or keywords.check_mode is not None:
        return "run_once, delegate_to or check_mode"
    if (later.become, later.become_user, keywords.timeout) != (first.become, first.become_user, first.keywords.timeout):
        return "it runs as another user or under another timeout"
    if later.blocks != first.blocks:
        return "another block"
    return None


def registered_names(tasks: list[TaskDef]) -> set[str]:
    """The names the tasks register their results under."""
    return {t.keywords.register for t in tasks if t.keywords.register}
