"""A play's tasks in order on one host, with Ansible's `meta:` steps and the flush of handlers (the
link of the chain HostPlanner -> Entries -> MetaSteps -> PlayOnHost that walks the task list,
notifies and flushes).

- `flush_handlers` runs the handlers notified so far (engine/handlers.py), as the play does at the
  end of pre_tasks, of roles and tasks, and of post_tasks;
- `end_host` ends the play for this host, `end_play` and `end_batch` for every host of the batch
  (which then meets after each task: engine/batch.py), `end_role` skips the rest of its role;
- `noop`, `clear_host_errors`, `clear_facts`, `refresh_inventory`, `reset_connection` change
  nothing gpuconf keeps between tasks: each is reported as done.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum
from typing import Any

from gpuconf.engine.flow import BlockRun
from gpuconf.engine.handlers import Notifications
from gpuconf.engine.includes import DYNAMIC, IncludeSteps, Outcome
from gpuconf.engine.options import task_selected
from gpuconf.errors import GpuconfError, TaskError, TemplateError
from gpuconf.playbook.models import TaskDef
from gpuconf.results import Status, TaskResult
from gpuconf.templating.render import Vars, render

ENDS_BATCH = ("end_play", "end_batch")   # for every host of the batch: the hosts meet after each task


class Next(Enum):
    """What the host does after a meta step."""

    GO_ON = "go on"
    END_HOST = "end host"
    END_BATCH = "end batch"


def ends_batch(tasks: list[TaskDef]) -> bool:
    return any(t.type == "meta" and t.params.get("_raw_params") in ENDS_BATCH for t in tasks)


class MetaSteps(IncludeSteps):
    """Notify, flush and the other meta steps, for PlayOnHost."""

    notifications: Notifications
    failed_by_batch: bool = False  # any_errors_fatal: another host's failure ended this one's play
    ended_roles: set[int]
    running_handlers: bool
    deadline_reached: Callable[[], bool]

    def start_notifications(self) -> None:
        self.notifications = Notifications(self.play.handlers, self._handler_name)
        self.ended_roles = set()
        self.running_handlers = False

    def _handler_name(self, name: str) -> str | None:
        """A templated handler name, rendered with the play's variables (None: it cannot be)."""
        try:
            return str(render(name, Vars(self.options.extra_vars, self.play.vars, self.host_vars, self.magic)))
        except (TemplateError, GpuconfError):
            return None

    def notify(self, task: TaskDef, result: TaskResult) -> None:
        """A changed result notifies the task's handlers (names rendered with its variables)."""
        if not task.keywords.notify or result.status not in (Status.CHANGED, Status.WOULD_CHANGE):
            return
        try:
            variables = self.task_vars(task)
            names = [str(render(name, variables)) for name in task.keywords.notify]
            self.notifications.notify(names)
        except (TemplateError, TaskError) as exc:
            result.status, result.error = Status.FAILED, str(exc)

    def flush_handlers(self) -> None:
        """Run the notified handlers, in the order they are defined, each once."""
        self.running_handlers = True
        try:
            while due := self.notifications.next_due():
                for handler in due:
                    if self.stop():
                        if self.deadline_reached():
                            self.mark_not_run([handler], handler=True)
                        continue
                    if handler.type in DYNAMIC:
                        self.run_include(handler)
                    else:
                        self.run_entry(handler, [])
        finally:
            self.running_handlers = False
            self.notifications.end_flush()

    def run_meta(self, task: TaskDef) -> Next:
        """A meta step: its `when`, then what it does."""
        action = str(task.params.get("_raw_params"))
        started = time.monotonic()
        try:
            holds = self.render_task(task) is not None
        except GpuconfError as exc:
            self._finish(task, self._result(task, Status.FAILED, error=f"{exc} in task '{task.name}'"), started)
            return Next.GO_ON
        if not holds:
            self._report(task, self._result(task, Status.SKIPPED, message=f"{action} conditional evaluated to False"),
                         started)
            return Next.GO_ON
        if action == "flush_handlers":
            if self.running_handlers:
                raise TaskError("flush_handlers cannot be used as a handler")
            self._report(task, self._result(task, Status.OK, message=f"triggered running handlers for {self.host}"),
                         started)
            self.flush_handlers()
            return Next.GO_ON
        if action == "end_role":
            if task.role is None:
                raise TaskError("Cannot execute 'end_role' from outside of a role")
            if self.running_handlers:
                raise TaskError("Cannot execute 'end_role' from a handler")
            self.ended_roles.add(task.role_instance)
        messages = {"end_host": f"ending play for {self.host}", "end_play": "ending play", "end_batch": "ending batch",
                    "end_role": f"ending role {task.role} for {self.host}", "noop": "noop",
                    "clear_host_errors": "cleared host errors", "clear_facts": "facts cleared",
                    "refresh_inventory": "inventory successfully refreshed", "reset_connection": "reset connection"}
        self._report(task, self._result(task, Status.OK, message=messages.get(action, action)), started)
        if action == "end_host":
            return Next.END_HOST
        if action in ENDS_BATCH:
            return Next.END_BATCH
        return Next.GO_ON

    def _report(self, task: TaskDef, result: TaskResult, started: float) -> None:
        result.handler = self.running_handlers
        self._finish(task, result, started, register=False)

    def run_tasks(self, tasks: list[TaskDef], nested: bool = False) -> Outcome:
        """Each task in order, with its block's rescue and always; then (for the play's own list)
        the handlers. `nested`: the tasks a dynamic include brought."""
        blocks = BlockRun(tasks)
        for index, task in enumerate(tasks):
            if index and task.section != tasks[index - 1].section and not nested:
                self.flush_handlers()   # the end of pre_tasks, or of roles and tasks
            if self.stop() and id(task) not in self._applied:  # what was done is still reported
                if not self.deadline_reached():  # interrupted: no new task starts, and the report
                    self._interrupted(tasks[index:])  # says which ones it left out
                    return Outcome(stop=True)
                if not (self.options.check_mode and self._answerable(task)):
                    self.mark_not_run([task])
                    if not nested:
                        self._task_done(index)
                    continue
            if nested and not task_selected(task, self.options.tags, self.options.skip_tags):
                continue   # a task an include brought, which the tags leave out
            step, results = self._step(task, tasks[index + 1:], None if nested else index, blocks.why_not(task)
                                       if id(task) not in self._applied else None)
            failures = [r for r in results if r.status == Status.FAILED and not r.ignored and not r.unhealthy]
            met = self._fatal(task, index, failures, nested)
            if met is False:
                return Outcome(stop=True)
            injected = met is not None and not failures and self.batch is not None and index in self.batch.fatal
            if injected:   # Ansible shows nothing on this host: its block fails all the same
                failures = [self._result(task, Status.FAILED, error="any_errors_fatal: it failed on another host")]
            blocks.after(index, failures)   # a health probe that found a failure has still run fine
            if blocks.host_failed:
                self.failed_by_batch = self.failed_by_batch or injected
                for later in tasks[index + 1:]:  # applied with the failed task: reported all the same
                    if id(later) in self._applied:
                        self.run_entry(later, [])
                if nested:
                    return Outcome(failures=failures or [r for r in results if r.status == Status.FAILED])
                if self._forces_handlers():
                    self.flush_handlers()
                return Outcome(failures=failures, stop=True)
            if step == Next.END_BATCH and self.batch is not None:
                self.batch.end()
            if step != Next.GO_ON:
                return Outcome(stop=True)
            if nested:
                if self.batch is not None and (self.batch.ended or self.batch.budget_spent()):
                    return Outcome(stop=True)
                continue
            if met is None and not self._task_done(index):  # another host's failure ended the play
                if self.batch is not None and self.batch.ended:
                    return Outcome(stop=True)   # meta: end_play on another host
                limit = self.play.keywords.max_fail_percentage
                limit = 0 if limit is None else limit
                self.mark_not_run(tasks[index + 1:], reason="max_fail_percentage",
                                  error=f"not run: max_fail_percentage {limit:g} % exceeded in play "
                                        f"'{self.play.name}' (another host failed)")
                return Outcome(stop=True)
        if not nested:
            self.flush_handlers()
        return Outcome()

    def _step(self, task: TaskDef, upcoming: list[TaskDef], index: int | None,
              why: str | None) -> tuple[Next, list[TaskResult]]:
        """One task of a list: what comes next, and its results (those whose failure counts)."""
        if task.role_instance in self.ended_roles:
            return Next.GO_ON, []   # meta: end_role ended its role: Ansible shows nothing of the rest
        if why is not None:  # never silently absent: a rescue that did not run says why
            self._finish(task, self._result(task, Status.SKIPPED, message=why), time.monotonic())
            return Next.GO_ON, []
        if task.type == "meta":
            try:
                return self.run_meta(task), []
            except TaskError as exc:
                result = self._result(task, Status.FAILED, error=str(exc))
                self._finish(task, result, time.monotonic(), register=False)
                return Next.GO_ON, [result]
        if task.type in DYNAMIC:
            outcome = self.run_include(task)
            return (Next.END_HOST if outcome.stop and not outcome.failures else Next.GO_ON), outcome.failures
        return Next.GO_ON, self.run_entry(task, upcoming, index)

    def _fatal(self, task: TaskDef, index: int, failures: list[TaskResult], nested: bool) -> bool | None:
        """any_errors_fatal (the play's, or the task's or its block's): a failure here is told to the
        batch, and the hosts meet; None where it does not apply, else whether the host goes on."""
        fatal = task.keywords.any_errors_fatal if task.keywords.any_errors_fatal is not None \
            else self.play.keywords.any_errors_fatal
        if not fatal or self.batch is None or nested:
            return None
        if failures:
            self.batch.fail_all(index)
        return self._task_done(index) or index in self.batch.fatal

    def _forces_handlers(self) -> bool:
        """force_handlers: the play's, else --force-handlers: a host that failed still runs the
        handlers notified before its failure."""
        forced = self.play.keywords.force_handlers
        return self.options.force_handlers if forced is None else forced

    # what PlayOnHost defines
    _applied: dict[int, Any]

    def _interrupted(self, left: list[TaskDef]) -> None:
        raise NotImplementedError

    def _answerable(self, task: TaskDef) -> bool:
        raise NotImplementedError

    def _task_done(self, index: int) -> bool:
        raise NotImplementedError

    def mark_not_run(self, tasks: list[TaskDef], handler: bool = False, reason: str = "deadline",
                     error: str = "") -> None:
        raise NotImplementedError
