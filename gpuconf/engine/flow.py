"""Control flow on one host, with Ansible's semantics: blocks (rescue, always), loops,
`changed_when`/`failed_when`, and `run_once`. The loader has already flattened blocks
and includes into one task list (gpuconf/playbook/blocks.py); this module decides, task
by task, what runs.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from gpuconf.engine.registered import registered_value
from gpuconf.errors import TaskError, TemplateError
from gpuconf.playbook.models import TaskDef
from gpuconf.results import Status, TaskResult
from gpuconf.templating.render import Vars, Verbatim, evaluate_when, render


class BlockRun:
    """Which tasks of a flattened list run, given the failures so far.

    A failure in a block's tasks skips the rest of them and runs its `rescue`; `always`
    runs whatever happened. A block whose failure was rescued is not a failure (its failed
    tasks count as ignored); one that was not passes the failure to the block around it,
    and at the top the host has failed."""

    def __init__(self, tasks: list[TaskDef]):
        self.tasks = tasks
        self.failed: dict[str, set[int]] = {"block": set(), "rescue": set(), "always": set()}
        self.has_rescue = {bid for t in tasks for bid, section in t.blocks if section == "rescue"}
        self.failures: dict[int, list[TaskResult]] = {}
        self.host_failed = False

    def why_not(self, task: TaskDef) -> str | None:
        """Why `task` does not run, or None when it does."""
        for bid, section in task.blocks:
            if section == "block" and bid in self.failed["block"]:
                return "an earlier task of its block failed"
            if section == "rescue" and bid not in self.failed["block"]:
                return "rescue: its block did not fail"
            if section == "rescue" and bid in self.failed["rescue"]:
                return "an earlier task of its rescue failed"
        return None

    def after(self, index: int, failures: list[TaskResult]) -> None:
        """Task `index` is done (run or not); `failures` are its failed results that count."""
        task = self.tasks[index]
        if failures:
            self._fail(task.blocks, failures)
        following = {bid for bid, _ in self.tasks[index + 1].blocks} if index + 1 < len(self.tasks) else set()
        for depth in range(len(task.blocks) - 1, -1, -1):
            bid = task.blocks[depth][0]
            if bid in following:
                break
            if self._unrescued(bid):
                self._fail(task.blocks[:depth], [])
            elif bid in self.failed["block"]:
                for result in self.failures.get(bid, []):
                    result.ignored = True  # rescued, as Ansible's `rescued=1`: the host goes on
        return None

    def rescuing(self, task: TaskDef) -> bool:
        """Whether a failure of `task` is one a rescue takes: a block around it, in its own tasks,
        has a rescue (Ansible's is_any_block_rescuing: its rescue, and the always sections on the
        way, see ansible_failed_task and ansible_failed_result)."""
        return any(section == "block" and bid in self.has_rescue for bid, section in task.blocks)

    def clear(self) -> None:
        """meta: clear_host_errors: the failures so far no longer fail the host (nor its blocks);
        those already reported count as ignored."""
        for results in self.failures.values():
            for result in results:
                result.ignored = True
        for section in self.failed.values():
            section.clear()
        self.failures.clear()
        self.host_failed = False

    def _fail(self, path: tuple[tuple[int, str], ...], failures: list[TaskResult]) -> None:
        for bid, _ in path:
            self.failures.setdefault(bid, []).extend(failures)
        if not path:
            self.host_failed = True
            return
        bid, section = path[-1]
        self.failed[section].add(bid)

    def _unrescued(self, bid: int) -> bool:
        failed, rescued = bid in self.failed["block"], bid in self.has_rescue and bid not in self.failed["rescue"]
        return bid in self.failed["always"] or (failed and not rescued) or bid in self.failed["rescue"]


def loop_items(task: TaskDef, variables: Vars) -> list[Any]:
    """The items of `loop:`/`with_items:`, rendered; a list, or a TaskError that says what it was."""
    items = task.keywords.items
    value = render(items, variables)
    if isinstance(value, str) and value.strip() and not isinstance(items, list):
        raise TaskError(f"loop: '{items}' rendered to the string {value!r}, not a list")
    if isinstance(value, dict) or not isinstance(value, (list, tuple)):
        raise TaskError(f"loop: expected a list, got {type(value).__name__} "
                        "(a dictionary becomes a list with `| dict2items`)")
    return list(value)


def item_task(task: TaskDef, item: Any, index: int, variables: Vars) -> TaskDef:
    """The task for one item: `item` (or loop_control.loop_var) set, named by its label."""
    control = task.keywords.loop_control
    loop_var = control.loop_var if control else "item"
    item_vars = {loop_var: item, "ansible_loop_var": loop_var,
                 "ansible_loop": {"index": index + 1, "index0": index}}
    label: Any = item
    if control and control.label is not None:
        label = render(control.label, variables.child(Verbatim(item_vars)))
    keywords = task.keywords.model_copy(update={"loop": None, "with_items": None, "with_dict": None, "register": None,
                                                "run_once": False})
    return dataclasses.replace(task, name=f"{task.name} (item={label})", keywords=keywords,
                               item_vars={**task.item_vars, **item_vars})


def loop_registered(name: str, results: list[TaskResult], items: list[Any], loop_var: str) -> dict[str, Any]:
    """What `register:` holds after a loop: Ansible's `results` list and the totals."""
    each = [{**registered_value(name, r), loop_var: item, "item": item} for r, item in zip(results, items)]
    return {"results": each, "changed": any(r["changed"] for r in each), "failed": any(r["failed"] for r in each),
            "skipped": bool(each) and all(r["skipped"] for r in each), "msg": f"{len(each)} items"}


def judge(task: TaskDef, result: TaskResult, variables: Vars, check_mode: bool) -> None:
    """`failed_when` and `changed_when`, over the task's variables and its own registered result."""
    keywords = task.keywords
    if keywords.failed_when is None and keywords.changed_when is None:
        return
    if result.status in (Status.SKIPPED, Status.UNKNOWN, Status.UNREACHABLE):
        return
    own = {keywords.register: registered_value(keywords.register, result)} if keywords.register else {}
    scope = variables.child(Verbatim(own)) if own else variables
    try:
        if keywords.failed_when is not None:
            if evaluate_when(keywords.failed_when, scope):
                if result.status != Status.FAILED:
                    result.status, result.error = Status.FAILED, f"failed_when: {keywords.failed_when}"
            elif result.status == Status.FAILED:
                ran = result.data.get("rc") is not None and not check_mode  # a command that ran: it changed
                result.status = Status.CHANGED if ran else Status.OK
                result.message = result.message or f"not failed (failed_when: {keywords.failed_when})"
                result.error = None
        if keywords.changed_when is not None and result.status != Status.FAILED:
            changed = evaluate_when(keywords.changed_when, scope)
            if not changed:
                result.status = Status.OK
            elif result.status == Status.OK:
                result.status = Status.WOULD_CHANGE if check_mode else Status.CHANGED
    except TemplateError as exc:
        kind = Status.UNKNOWN if type(exc).__name__ == "KnownOnlyAfterApply" else Status.FAILED
        result.status, result.error = kind, f"{exc.message} (in changed_when/failed_when)"


class StepGate:
    """`--step`: before a task first runs on any host, ask: yes, no (skip it on every host), or
    continue (run the rest without asking). One question per task, whatever the host count."""

    def __init__(self, ask: Callable[[str], str]):
        self.ask = ask
        self.lock = threading.Lock()
        self.answers: dict[int, bool] = {}
        self.asking = True

    def allows(self, task: TaskDef) -> bool:
        with self.lock:
            if id(task) in self.answers:
                return self.answers[id(task)]
            if not self.asking:
                return True
            answer = self.ask(task.name).strip().lower()[:1]
            if answer == "c":
                self.asking = False
            self.answers[id(task)] = answer in ("y", "c")
            return self.answers[id(task)]


def failed_task_vars(task: TaskDef, result: TaskResult) -> dict[str, Any]:
    """What a rescue sees of the failure it takes: ansible_failed_task (the task, as Ansible
    serializes it: name, action, args, ...) and ansible_failed_result (its registered result,
    whose msg is the error)."""
    failed_task = {"name": task.keywords.name or "", "action": task.action or task.type,
                   "args": dict(task.params), "tags": sorted(task.tags), "when": task.keywords.when,
                   "register": task.keywords.register, "ignore_errors": task.keywords.ignore_errors}
    failed_result = dict(registered_value("ansible_failed_result", result))
    if not failed_result.get("msg") and result.error:
        failed_result["msg"] = result.error
    return {"ansible_failed_task": failed_task, "ansible_failed_result": failed_result}
