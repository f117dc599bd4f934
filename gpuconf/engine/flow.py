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
from gpuconf.errors import GpuconfError, TaskError, TemplateError
from gpuconf.playbook.models import LOOP_KEYWORDS, LookupLoop, TaskDef
from gpuconf.results import Status, TaskResult
from gpuconf.templating.conditions import evaluate_when
from gpuconf.templating.lookups import loop_lookup
from gpuconf.templating.render import Vars, Verbatim, render


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
            if section == "always" and bid in self.failed["always"]:  # as Ansible's: the host's always ends there
                return "an earlier task of its always failed"
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
    """The items of `loop:` or `with_NAME:`, rendered; a list, or a TaskError that says what it was."""
    items = task.keywords.items
    if isinstance(items, LookupLoop):  # with_NAME: the lookup of the templated terms, as Ansible's
        terms = render(items.terms, variables)
        try:
            return loop_lookup(items.name, terms, task.search_paths)
        except GpuconfError as exc:
            raise TaskError(f"with_{items.name}: {exc.message}") from None
    value = render(items, variables)
    if isinstance(value, str) and value.strip() and not isinstance(items, list):
        raise TaskError(f"loop: '{items}' rendered to the string {value!r}, not a list")
    if isinstance(value, dict) or not isinstance(value, (list, tuple)):
        raise TaskError(f"loop: expected a list, got {type(value).__name__} "
                        "(a dictionary becomes a list with `| dict2items`)")
    return list(value)


def item_task(task: TaskDef, item: Any, index: int, variables: Vars, items: list[Any] | None = None) -> TaskDef:
    """The task for one item: `item` (or loop_control.loop_var) set, with index_var and, with
    `extended`, Ansible's `ansible_loop`; named by its label."""
    control = task.keywords.loop_control
    item_vars = loop_item_vars(task, item, index, items)
    label: Any = item
    if control and control.label is not None:
        label = render(control.label, variables.child(Verbatim(item_vars)))
    keywords = task.keywords.model_copy(update={**dict.fromkeys(LOOP_KEYWORDS), "register": None, "run_once": False})
    return dataclasses.replace(task, name=f"{task.name} (item={label})", keywords=keywords,
                               item_vars={**task.item_vars, **item_vars})


def loop_item_vars(task: TaskDef, item: Any, index: int, items: list[Any] | None = None) -> dict[str, Any]:
    """What one item of a task's loop (or a looped include's) sets: `item` (or loop_control.loop_var),
    ansible_loop_var, index_var and ansible_index_var, and with `extended` ansible_loop."""
    control = task.keywords.loop_control
    loop_var = control.loop_var if control else "item"
    item_vars: dict[str, Any] = {loop_var: item, "ansible_loop_var": loop_var}
    if control and control.index_var:
        item_vars.update({control.index_var: index, "ansible_index_var": control.index_var})
    if control and control.extended:
        item_vars["ansible_loop"] = extended_loop(list(items or []), index, control.extended_allitems)
    return item_vars


def extended_loop(items: list[Any], index: int, allitems: bool) -> dict[str, Any]:
    """`loop_control: {extended: true}`: ansible_loop as Ansible's task executor makes it."""
    count = len(items)
    loop: dict[str, Any] = {"index": index + 1, "index0": index, "first": index == 0, "last": index + 1 == count,
                            "length": count, "revindex": count - index, "revindex0": count - index - 1}
    if allitems:
        loop["allitems"] = items
    if index + 1 < count:
        loop["nextitem"] = items[index + 1]
    if index > 0:
        loop["previtem"] = items[index - 1]
    return loop


def item_registered(name: str, task: TaskDef, result: TaskResult, items: list[Any], index: int) -> dict[str, Any]:
    """One item's result as `register:` holds it: in the loop's `results`, and, as Ansible's task
    executor sets it, the registered variable itself for the items after it."""
    control = task.keywords.loop_control
    loop_var = control.loop_var if control else "item"
    value = {**registered_value(name, result), loop_var: items[index], "ansible_loop_var": loop_var}
    if control and control.index_var:
        value.update({control.index_var: index, "ansible_index_var": control.index_var})
    if control and control.extended:
        value["ansible_loop"] = extended_loop(items, index, control.extended_allitems)
    return value


def loop_registered(name: str, task: TaskDef, results: list[TaskResult], items: list[Any]) -> dict[str, Any]:
    """What `register:` holds after a loop, as Ansible's: each item's result with the item (under
    its loop_var), `results`, and the totals; a loop with no items is skipped."""
    if not items:
        return {"changed": False, "skipped": True, "skipped_reason": "No items in the list", "results": []}
    each = [item_registered(name, task, result, items, index) for index, result in enumerate(results)]
    skipped = all(r.get("skipped") for r in each)
    aggregate: dict[str, Any] = {"changed": any(r.get("changed") for r in each), "msg": "All items completed",
                                 "results": each, "skipped": skipped}
    if any(r.get("failed") for r in each):
        aggregate.update(failed=True, msg="One or more items failed")
    elif skipped:
        aggregate["msg"] = "All items skipped"
    return aggregate


def entry_tally(results: list[TaskResult], ignore_errors: bool, rescuable: bool) -> str:
    """How Ansible's recap counts one task on a host (a loop once, over its items): a failure is
    `ignored` with ignore_errors, `rescued` inside a block that has a rescue, else failed; an
    empty loop and a loop whose items were all skipped are skipped (gpuconf/results.py TALLIES)."""
    statuses = {r.status for r in results}
    if not results:
        return "skipped"
    if Status.UNREACHABLE in statuses:   # ignore_unreachable: ok and ignored, as Ansible counts it
        return "ignored" if all(r.ignored for r in results if r.status == Status.UNREACHABLE) else ""
        # (else the host is unreachable: counted once, by the host)
    changed = bool(statuses & {Status.CHANGED, Status.WOULD_CHANGE}) or any(
        r.status == Status.FAILED and r.data.get("changed") for r in results)
    if Status.FAILED in statuses:
        if ignore_errors:
            return "ignored changed" if changed else "ignored"
        return "rescued" if rescuable else "failed"
    if Status.UNKNOWN in statuses:
        return "unknown"
    if statuses == {Status.SKIPPED}:
        return "skipped"
    if Status.REBOOT_PENDING in statuses:
        return "reboot_pending"
    return "changed" if changed else "ok"


def judge(task: TaskDef, result: TaskResult, variables: Vars, check_mode: bool) -> None:
    """`changed_when`, then `failed_when`, as Ansible judges them: over the task's variables and
    its own registered result; a failed result keeps whether it changed (`data["changed"]`: a
    command that ran and failed has changed) and `failed_when_result` is registered."""
    keywords = task.keywords
    if keywords.failed_when is None and keywords.changed_when is None:
        return
    if result.status in (Status.SKIPPED, Status.UNKNOWN, Status.UNREACHABLE):
        return
    own = {keywords.register: registered_value(keywords.register, result)} if keywords.register else {}
    scope = variables.child(Verbatim(own)) if own else variables
    failed = result.status == Status.FAILED
    changed = result.status in (Status.CHANGED, Status.WOULD_CHANGE) or bool(failed and result.data.get("changed"))
    which = "changed"
    try:
        if keywords.changed_when is not None:
            changed = evaluate_when(keywords.changed_when, scope)
        which = "failed"
        if keywords.failed_when is not None:
            failed = evaluate_when(keywords.failed_when, scope)
            result.data["failed_when_result"] = failed
    except TemplateError as exc:  # as Ansible: the task fails, and keeps what it was otherwise
        if type(exc).__name__ == "KnownOnlyAfterApply":
            result.status, result.error = Status.UNKNOWN, f"{exc.message} (in {which}_when)"
            return
        result.data[f"{which}_when_result"] = exc.message
        result.data["changed"] = changed
        result.status, result.error = Status.FAILED, f"{exc.message} (in {which}_when)"
        return
    if failed:
        if result.status != Status.FAILED:
            result.status, result.error = Status.FAILED, f"failed_when: {keywords.failed_when}"
        result.data["changed"] = changed
        return
    if result.status == Status.FAILED:
        result.message = result.message or f"not failed (failed_when: {keywords.failed_when})"
        result.error = None
    result.data.pop("changed", None)
    result.status = (Status.WOULD_CHANGE if check_mode else Status.CHANGED) if changed else Status.OK


def until_holds(task: TaskDef, result: TaskResult, variables: Vars) -> bool:
    """`until` (without it: the task did not fail), over the task's own registered result."""
    keywords = task.keywords
    if result.status in (Status.UNREACHABLE, Status.UNKNOWN):
        return True
    if keywords.until is None:
        return result.status != Status.FAILED
    own = {keywords.register: registered_value(keywords.register, result)} if keywords.register else {}
    try:
        return evaluate_when(keywords.until, variables.child(Verbatim(own)) if own else variables)
    except TemplateError as exc:
        result.status, result.error = Status.FAILED, f"{exc.message} (in until)"
        return True


def retried_out(result: TaskResult, attempts: int) -> None:
    """Every attempt made and `until` still false: failed, as Ansible's (its `attempts` one short,
    as Ansible registers it), the last attempt's values kept."""
    if result.status != Status.FAILED:
        result.data.setdefault("msg", registered_value("until", result).get("msg", ""))
        result.data["changed"] = result.status in (Status.CHANGED, Status.WOULD_CHANGE)
        result.status = Status.FAILED
        result.error = f"until: still false after {attempts + 1} attempts"
    result.data["attempts"] = attempts


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
