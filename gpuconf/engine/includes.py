"""Dynamic includes on one host (the link IncludeSteps of the chain HostPlanner -> Entries ->
IncludeSteps -> MetaSteps -> PlayOnHost): `include_tasks` and `include_role`, judged once (their
`when`, their `loop`, their templated names), then the tasks they bring run in place, as a list of
their own (their blocks, rescue and always), whose unrescued failure is the include's
(playbook/dynamic.py reads the tasks)."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from gpuconf.engine.entry import Entries
from gpuconf.engine.flow import loop_items
from gpuconf.errors import GpuconfError, TaskError, TemplateError
from gpuconf.playbook.models import TaskDef
from gpuconf.results import Status, TaskResult
from gpuconf.templating.render import render

DYNAMIC = ("include_tasks", "include_role")
MAX_DEPTH = 64   # includes within includes: past this, a recursion that never ends


@dataclass
class Outcome:
    """How a list of tasks ended on the host: its unrescued failures, and whether the host's play
    is over (meta: end_host, end_play, a batch stopped by another host's failure)."""

    failures: list[TaskResult] = field(default_factory=list)
    stop: bool = False


class IncludeSteps(Entries):
    """Dynamic includes, for PlayOnHost."""

    include_depth: int = 0

    def run_include(self, task: TaskDef) -> Outcome:
        started = time.monotonic()
        try:
            variables = self.task_vars(task)
            if not self._holds(task, variables):
                self._finish(task, self._result(task, Status.SKIPPED, message="condition is false"), started,
                             register=False)
                return Outcome()
            control = task.keywords.loop_control
            loop_var = control.loop_var if control else "item"
            items: list[Any] = loop_items(task, variables) if task.keywords.items is not None else [None]
        except (TemplateError, TaskError) as exc:
            return self._include_failed(task, f"{exc.message} in task '{task.name}' ({task.location})", started)
        if not items:
            self._finish(task, self._result(task, Status.SKIPPED, message="no items"), started, register=False)
            return Outcome()
        outcome = Outcome()
        for index, item in enumerate(items):
            looped = task.keywords.items is not None
            item_vars = {loop_var: item, "ansible_loop_var": loop_var,
                         "ansible_loop": {"index": index + 1, "index0": index}} if looped else {}
            one = dataclasses.replace(task, name=f"{task.name} (item={item})",
                                      item_vars={**task.item_vars, **item_vars}) if looped else task
            scope = self.task_vars(one)
            try:
                if self.include_depth >= MAX_DEPTH:
                    raise TaskError(f"{task.type}: more than {MAX_DEPTH} includes within includes")
                params = render({k: v for k, v in task.params.items() if k != "apply"}, scope)
                if task.type == "include_tasks":
                    brought = self.play.includes.include_tasks(one, str(params["file"]))
                    shown = f"included: {params['file']} for {self.host}"
                else:
                    brought = self.play.includes.include_role(one, {**params, "apply": task.params.get("apply")})
                    self.notifications.add(self.play.includes.handlers)
                    shown = f"included: {params['name']} for {self.host}"
            except (GpuconfError, TemplateError) as exc:
                failed = self._include_failed(one, str(exc), started)
                outcome.failures += failed.failures
                if not self.flag(task, "ignore_errors"):
                    return outcome
                continue
            self._finish(one, self._result(one, Status.OK, message=shown), started, register=False)
            brought = [dataclasses.replace(t, item_vars={**one.item_vars, **t.item_vars}) for t in brought] \
                if looped else brought
            self.include_depth += 1
            try:
                inner = self.run_tasks(brought, nested=True)
            finally:
                self.include_depth -= 1
            outcome.failures += inner.failures
            if inner.stop or inner.failures:
                outcome.stop = inner.stop
                return outcome
            started = time.monotonic()
        return outcome

    def _include_failed(self, task: TaskDef, error: str, started: float) -> Outcome:
        result = self._result(task, Status.FAILED, error=error)
        result.ignored = self.flag(task, "ignore_errors")
        self._finish(task, result, started, register=False)
        return Outcome([] if result.ignored else [result])

    # what MetaSteps and PlayOnHost define
    notifications: Any

    def run_tasks(self, tasks: list[TaskDef], nested: bool = False) -> Outcome:
        raise NotImplementedError
