"""What one entry of a host's task list runs: the task, once per loop item, or (`run_once`)
on the first host of the batch that reaches it; and a `check_mode: false` command, which
check mode runs as a read."""
from __future__ import annotations

import dataclasses
import time
from typing import Any

from gpuconf.engine.delegate import task_session
from gpuconf.engine.flow import RunOnce, item_task, loop_items, loop_registered
from gpuconf.errors import TaskError, TemplateError
from gpuconf.facts.base import user_command
from gpuconf.playbook.models import TaskDef
from gpuconf.results import Status, TaskResult
from gpuconf.tasks.base import Verdict
from gpuconf.templating import evaluate_when

# `self` below is the host's PlayOnHost (gpuconf/engine/hostrun.py), typed Any: hostrun imports
# this module, and an import back, even for types only, would be a circle (tests/unit/test_layers.py).

def run_entry(self: Any, task: TaskDef, upcoming: list[TaskDef]) -> list[TaskResult]:
    """One task of the list: once, once per loop item, or (run_once) on one host for the batch."""
    if task.keywords.run_once and self.run_once is not None:
        first, owner, done, box = self.run_once.claim(task, self.host)
        if not first:
            RunOnce.wait(done, self.stop)
            if task.keywords.register and box:
                self.registered[task.keywords.register] = box[0]
            result = self._result(task, Status.SKIPPED, message=f"run_once: ran on {owner}")
            self._finish(task, result, time.monotonic(), register=False)
            return [result]
        try:
            once = dataclasses.replace(task, keywords=task.keywords.model_copy(update={"run_once": False}))
            results = run_entry(self, once, upcoming)
            if task.keywords.register and task.keywords.register in self.registered:
                box.append(self.registered[task.keywords.register])
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
    except (TemplateError, TaskError) as exc:
        result = self._result(task, Status.FAILED, error=f"{exc.message} in task '{task.name}' ({task.location})")
        self._finish(task, result, started)
        return [result]
    results = [self.run_task(item_task(task, item, index, variables), upcoming) for index, item in
               enumerate(items)]
    if task.keywords.register:
        control = task.keywords.loop_control
        self.registered[task.keywords.register] = loop_registered(
            task.keywords.register, results, items, control.loop_var if control else "item")
    if not items:
        self._finish(task, self._result(task, Status.SKIPPED, message="no items"), started, register=False)
    return results


def read_command(self: Any, task: TaskDef, verdict: Verdict) -> TaskResult:
    """`check_mode: false` on a command: its author says it only reads, so check mode runs it,
    as a read (a read-only request, under the shared run lock): ok, with its output registered."""
    text = verdict.changes[0].ops[0].request["cmd"]
    read = user_command(str(text), lambda output: output, timeout=task.keywords.timeout or 60)
    out = task_session(self, task).get(read, task.become)
    data = {"rc": out.rc, "stdout": out.stdout, "stderr": out.stderr}
    if out.rc != 0 or out.timed_out:
        raise TaskError(f"{text} failed (exit {out.rc}): {(out.stderr or out.stdout).strip()[-800:]}", data=data)
    result: TaskResult = self._result(task, Status.OK, message=f"ran (check_mode: false): {text}", data=data)
    result.stdout, result.stderr = out.stdout, out.stderr
    return result
