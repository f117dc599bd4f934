"""What one entry of a host's task list runs: the task, once per loop item, or (`run_once`)
on the first host of the batch (engine/batch.py); and a `check_mode: false` command, which
check mode runs as a read. The middle of the chain HostPlanner (planner.py) -> Entries ->
PlayOnHost (hostrun.py): typed, with what it needs of PlayOnHost declared here."""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from gpuconf.engine.batch import Batch
from gpuconf.engine.delegate import Delegates, delegate_target
from gpuconf.engine.flow import item_task, loop_items, loop_registered
from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.session import HostSession
from gpuconf.errors import TaskError, TemplateError
from gpuconf.facts.base import user_command
from gpuconf.playbook.models import TaskDef
from gpuconf.results import RunEvents, Status, TaskResult
from gpuconf.tasks.base import Verdict
from gpuconf.templating.render import evaluate_when


class Entries(HostPlanner):
    """Loops, run_once and check-mode reads, for PlayOnHost, which defines the methods below
    that raise NotImplementedError."""

    session: HostSession
    delegates: Delegates
    batch: Batch | None
    stop: Callable[[], bool]
    events: RunEvents

    def run_task(self, task: TaskDef, upcoming: list[TaskDef], is_handler: bool = False) -> TaskResult:
        raise NotImplementedError

    def _result(self, task: TaskDef | None, status: Status, **kw: Any) -> TaskResult:
        raise NotImplementedError

    def _finish(self, task: TaskDef, result: TaskResult, started: float, register: bool = True) -> None:
        raise NotImplementedError

    def task_session(self, task: TaskDef) -> HostSession:
        """The session that reads and writes for `task`: its delegate's or its host's, as its
        `become_user`."""
        session = self.session
        if task.keywords.delegate_to:
            session = self.delegates.session(delegate_target(task, self.task_vars(task)))
        return session.as_user(task.become_user)

    def run_entry(self, task: TaskDef, upcoming: list[TaskDef], index: int | None = None) -> list[TaskResult]:
        """One task of the list (the play's task `index`): once, once per loop item, or (run_once)
        on the batch's first host still in the play, for the whole batch."""
        if task.keywords.run_once and self.batch is not None and index is not None and self.flag(task, "run_once"):
            first, owner, done, shared = self.batch.claim(index, self.host)
            if not first:
                self.batch.wait_for(owner, done, self.stop)
                self.registered.update(shared)  # its register and set_fact, as Ansible gives them to the batch
                result = self._result(task, Status.SKIPPED, message=f"run_once: ran on {owner}")
                self._finish(task, result, time.monotonic(), register=False)
                return [result]
            try:
                before = dict(self.registered)
                once = dataclasses.replace(task, keywords=task.keywords.model_copy(update={"run_once": False}))
                results = self.run_entry(once, upcoming)
                shared.update({k: v for k, v in self.registered.items() if k not in before or before[k] is not v})
                return results
            finally:
                done.set()
        self.events.task_started(self.host, task.name)
        if self.options.step is not None and not self.options.step.allows(task):
            result = self._result(task, Status.SKIPPED, message="not run: --step answered no")
            self._finish(task, result, time.monotonic(), register=False)
            return [result]
        if task.keywords.items is None:
            return [self.run_task(task, upcoming)]
        started = time.monotonic()
        try:
            variables = self.task_vars(task)
            if task.role_when and not all(evaluate_when(c, variables) for c in task.role_when):
                items: list[Any] = []  # the block's or role's condition is false: no item runs
            else:
                items = loop_items(task, variables)
            each = [item_task(task, item, index, variables) for index, item in enumerate(items)]
        except (TemplateError, TaskError) as exc:  # the loop, or an item's label
            result = self._result(task, Status.FAILED, error=f"{exc.message} in task '{task.name}' ({task.location})")
            self._finish(task, result, started)
            return [result]
        # the items still to come are upcoming too: what they read rides on the round trip that
        # applies the item before them, not on a request of its own
        results = [self.run_task(one, each[index + 1:] + upcoming) for index, one in enumerate(each)]
        if task.keywords.register:
            control = task.keywords.loop_control
            self.registered[task.keywords.register] = loop_registered(
                task.keywords.register, results, items, control.loop_var if control else "item")
        if not items:
            self._finish(task, self._result(task, Status.SKIPPED, message="no items"), started, register=False)
        return results


    def read_command(self, task: TaskDef, verdict: Verdict) -> TaskResult:
        """`check_mode: false` on a command: its author says it only reads, so check mode runs it,
        as a read (a read-only request, under the shared run lock): ok, with its output registered."""
        text = verdict.changes[0].ops[0].command
        read = user_command(str(text), lambda output: output, timeout=task.keywords.timeout or 60)
        out = self.task_session(task).get(read, task.become)
        data = {"rc": out.rc, "stdout": out.stdout, "stderr": out.stderr}
        if out.rc != 0 or out.timed_out:
            raise TaskError(f"{text} failed (exit {out.rc}): {(out.stderr or out.stdout).strip()[-800:]}", data=data)
        result: TaskResult = self._result(task, Status.OK, message=f"ran (check_mode: false): {text}", data=data)
        result.stdout, result.stderr = out.stdout, out.stderr
        return result
