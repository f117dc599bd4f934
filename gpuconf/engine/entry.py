"""What one entry of a host's task list runs: the task, once per loop item, or (`run_once`)
on the first host of the batch (engine/batch.py), or nothing when --step says no. Each task
it runs goes to the executor (engine/executor.py); what it decides itself goes to the log."""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from gpuconf.engine.batch import Batch
from gpuconf.engine.executor import TaskExecutor
from gpuconf.engine.flow import item_task, loop_items, loop_registered
from gpuconf.engine.hostlog import HostLog
from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.processors import Processors
from gpuconf.errors import TaskError, TemplateError
from gpuconf.playbook.models import TaskDef
from gpuconf.results import Status, TaskResult
from gpuconf.templating.render import evaluate_when


class Entries:
    """Loops, run_once and --step over the executor, for one host's play."""

    def __init__(self, planner: HostPlanner, executor: TaskExecutor, log: HostLog, processors: Processors,
                 stop: Callable[[], bool], batch: Batch | None = None):
        self.planner, self.executor, self.log = planner, executor, log
        self.processors, self.stop, self.batch = processors, stop, batch

    def run_entry(self, task: TaskDef, upcoming: list[TaskDef], index: int | None = None) -> list[TaskResult]:
        """One task of the list (the play's task `index`): once, once per loop item, or (run_once)
        on the batch's first host still in the play, for the whole batch."""
        planner, log = self.planner, self.log
        if task.keywords.run_once and self.batch is not None and index is not None and planner.flag(task, "run_once"):
            first, owner, done, shared = self.batch.claim(index, planner.host)
            if not first:
                self.batch.wait_for(owner, done, self.stop)
                planner.registered.update(shared)  # its register and set_fact, as Ansible gives them to the batch
                result = log.result(task, Status.SKIPPED, message=f"run_once: ran on {owner}")
                log.finish(task, result, time.monotonic(), register=False)
                return [result]
            try:
                before = dict(planner.registered)
                once = dataclasses.replace(task, keywords=task.keywords.model_copy(update={"run_once": False}))
                results = self.run_entry(once, upcoming)
                shared.update({k: v for k, v in planner.registered.items() if k not in before or before[k] is not v})
                return results
            finally:
                done.set()
        self.processors.task_started(planner.host, task.name)
        if planner.options.step is not None and not planner.options.step.allows(task):
            result = log.result(task, Status.SKIPPED, message="not run: --step answered no")
            log.finish(task, result, time.monotonic(), register=False)
            return [result]
        if task.keywords.items is None:
            return [self.executor.run_task(task, upcoming)]
        started = time.monotonic()
        try:
            variables = planner.task_vars(task)
            if task.role_when and not all(evaluate_when(c, variables) for c in task.role_when):
                items: list[Any] = []  # the block's or role's condition is false: no item runs
            else:
                items = loop_items(task, variables)
            each = [item_task(task, item, index, variables) for index, item in enumerate(items)]
        except (TemplateError, TaskError) as exc:  # the loop, or an item's label
            result = log.result(task, Status.FAILED, error=f"{exc.message} in task '{task.name}' ({task.location})")
            log.finish(task, result, started)
            return [result]
        # the items still to come are upcoming too: what they read rides on the round trip that
        # applies the item before them, not on a request of its own
        results = [self.executor.run_task(one, each[number + 1:] + upcoming) for number, one in enumerate(each)]
        if task.keywords.register:
            control = task.keywords.loop_control
            planner.registered[task.keywords.register] = loop_registered(
                task.keywords.register, results, items, control.loop_var if control else "item")
        if not items:
            log.finish(task, log.result(task, Status.SKIPPED, message="no items"), started, register=False)
        return results
