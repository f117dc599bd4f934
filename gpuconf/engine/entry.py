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
from gpuconf.engine.flow import entry_tally, failed_task_vars, item_registered, item_task, loop_items, loop_registered
from gpuconf.engine.hostlog import HostLog
from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.processors import Processors
from gpuconf.engine.registered import skipped_value
from gpuconf.errors import TaskError, TemplateError, UndefinedVariable
from gpuconf.playbook.models import TaskDef
from gpuconf.results import Status, TaskResult


class Entries:
    """Loops, run_once and --step over the executor, for one host's play."""

    def __init__(self, planner: HostPlanner, executor: TaskExecutor, log: HostLog, processors: Processors,
                 stop: Callable[[], bool], batch: Batch | None = None):
        self.planner, self.executor, self.log = planner, executor, log
        self.processors, self.stop, self.batch = processors, stop, batch
        self.rescue_blocks: set[int] = set()  # the blocks (ids) that have a rescue: a failure inside one is `rescued`

    def run_entry(self, task: TaskDef, upcoming: list[TaskDef], index: int | None = None) -> list[TaskResult]:
        """One task of the list (the play's task `index`): once, once per loop item, or (run_once)
        on the batch's first host still in the play, for the whole batch."""
        planner, log = self.planner, self.log
        if task.keywords.run_once and self.batch is not None and index is not None and planner.flag(task, "run_once"):
            first, owner, done, shared = self.batch.claim(index, planner.host)
            if not first:
                self.batch.wait_for(owner, done, self.stop)
                planner.registered.update(shared)  # its register and set_fact, as Ansible gives them to the batch
                result = log.result(task, Status.SKIPPED, message=f"run_once: ran on {owner}", counts_as="")
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
            result = log.result(task, Status.SKIPPED, message="not run: --step answered no", counts_as="")
            log.finish(task, result, time.monotonic(), register=False)
            return [result]
        if task.keywords.items is None:
            return self.tally(task, [self.executor.run_task(task, upcoming)])
        started = time.monotonic()
        try:
            variables = planner.task_vars(task)
            try:
                items = loop_items(task, variables)
            except UndefinedVariable:
                # as Ansible: a loop over what is not defined is skipped whole when the task's
                # conditions (judged without an item) are false, and fails when they hold
                false = planner.false_condition(task, variables)
                if false is None:
                    raise
                result = log.result(task, Status.SKIPPED, message="condition is false", data=skipped_value(false))
                log.finish(task, result, started)
                return self.tally(task, [result])
            each = [item_task(task, item, index, variables, items) for index, item in enumerate(items)]
        except (TemplateError, TaskError) as exc:  # the loop, or an item's label
            result = log.result(task, Status.FAILED, error=f"{exc.message} in task '{task.name}' ({task.location})")
            result.ignored = planner.flag(task, "ignore_errors")
            log.finish(task, result, started, register=False)
            if task.keywords.register:   # as ansible-core's task executor gives an error it caught: no `changed`
                log.register(task, {"failed": True, "msg": result.error})
            return self.tally(task, [result])
        # the items still to come are upcoming too: what they read rides on the round trip that
        # applies the item before them, not on a request of its own
        results = []
        for number, one in enumerate(each):
            results.append(self.executor.run_task(one, each[number + 1:] + upcoming))
            if task.keywords.register:   # as Ansible: the items after it see this item's result
                self.log.register(task, item_registered(task.keywords.register, task, results[-1], items, number),
                                  report=False)
        if task.keywords.register:
            log.register(task, loop_registered(task.keywords.register, task, results, items))
        if not items:
            log.finish(task, log.result(task, Status.SKIPPED, message="no items", counts_as="skipped"), started,
                       register=False)
            return results
        for result in results[:-1]:
            result.counts_as = ""  # the loop counts once, on its last item
        # a rescue's ansible_failed_result is the loop's result (its msg 'One or more items
        # failed'), registered or not, as Ansible's
        value = self.planner.registered.get(task.keywords.register) if task.keywords.register else \
            loop_registered("ansible_failed_result", task, results, items) if self.rescuable(task) else None
        return self.tally(task, results, value)

    def tally(self, task: TaskDef, results: list[TaskResult], value: Any = None) -> list[TaskResult]:
        """The task's results, the last one saying how the recap counts the task (engine/flow.py).
        A failure a rescue takes is told to it, as Ansible tells it: `ansible_failed_task` and
        `ansible_failed_result` (`value`: a loop's registered value)."""
        ignored = any(r.ignored for r in results if r.status == Status.FAILED)  # ignore_errors, as judged
        counts_as = entry_tally(results, ignored, self.rescuable(task))
        results[-1].counts_as = counts_as
        if counts_as == "rescued":
            failed = next(r for r in reversed(results) if r.status == Status.FAILED)
            told = failed_task_vars(task, failed)
            self.planner.registered["ansible_failed_task"] = told["ansible_failed_task"]
            self.planner.registered["ansible_failed_result"] = value if value is not None else \
                told["ansible_failed_result"]
        return results

    def rescuable(self, task: TaskDef) -> bool:
        """A failure here is Ansible's `rescued`: the task is in the tasks of a block that has a rescue."""
        return any(section == "block" and bid in self.rescue_blocks for bid, section in task.blocks)
