"""Dynamic includes on one host: `include_tasks` and `include_role`, judged once (their `when`,
their `loop`, their templated names), then the tasks they bring run in place, as a list of their
own (their blocks, rescue and always), whose unrescued failure is the include's
(playbook/dynamic.py reads the tasks; the play on the host, engine/hostrun.py, runs them)."""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuconf.engine.executor import TaskExecutor
from gpuconf.engine.flow import loop_item_vars, loop_items
from gpuconf.engine.hostlog import HostLog
from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.registered import skipped_value
from gpuconf.errors import GpuconfError, PlaybookError, TaskError, TemplateError
from gpuconf.playbook.models import ENGINE_ACTIONS, TaskDef
from gpuconf.results import Status, TaskResult
from gpuconf.tasks.registry import TASK_TYPES
from gpuconf.templating.render import render

DYNAMIC = ("include_tasks", "include_role")
MAX_DEPTH = 64   # includes within includes: past this, a recursion that never ends


@dataclass
class Outcome:
    """How a list of tasks ended on the host: its unrescued failures, and whether the host's play
    is over (meta: end_host, end_play, a batch stopped by another host's failure)."""

    failures: list[TaskResult] = field(default_factory=list)
    stop: bool = False
    fatal: bool = False   # the host has failed, whatever rescue there is (a task file that cannot be read)


RunTasks = Callable[[list[TaskDef]], Outcome]   # the play's own walk over a list, nested


def tasks_need_host(tasks: list[TaskDef]) -> bool:
    """Whether any of the tasks reads or writes on the host (set_fact, debug, assert, meta and the
    includes themselves do not)."""
    return any(task.type not in ENGINE_ACTIONS and task.type not in DYNAMIC and not (
        task.type in TASK_TYPES and TASK_TYPES[task.type].controller_only) or task.keywords.delegate_to
        for task in tasks)


class Includes:
    """The dynamic includes of one host's play."""

    def __init__(self, planner: HostPlanner, log: HostLog, executor: TaskExecutor):
        self.planner, self.log, self.executor = planner, log, executor
        self.depth = 0

    def run(self, task: TaskDef, run_tasks: RunTasks) -> Outcome:
        planner, log = self.planner, self.log
        started = time.monotonic()
        try:
            variables = planner.task_vars(task)
            if not planner.holds(task, variables):   # registered as skipped, as Ansible registers it
                skipped = skipped_value(planner.false_condition(task, variables))
                log.finish(task, log.result(task, Status.SKIPPED, message="condition is false", data=skipped), started)
                return Outcome()
            looped = task.keywords.items is not None
            items: list[Any] = loop_items(task, variables) if looped else [None]
        except (TemplateError, TaskError) as exc:
            return self._failed(task, f"{exc.message} in task '{task.name}' ({task.location})", started)
        if not items:
            log.finish(task, log.result(task, Status.SKIPPED, message="no items"), started, register=False)
            return Outcome()
        outcome = Outcome()
        for index, item in enumerate(items):
            item_vars = {"ansible_loop": {"index": index + 1, "index0": index},
                         **loop_item_vars(task, item, index, items)} if looped else {}
            one = dataclasses.replace(task, name=f"{task.name} (item={item})",
                                      item_vars={**task.item_vars, **item_vars}) if looped else task
            try:
                brought, shown = self._read(one)
            except PlaybookError as exc:   # a task file Ansible cannot read ends the host's play: no rescue
                return Outcome(self._failed(one, str(exc), started, fatal=True).failures, stop=True, fatal=True)
            except (GpuconfError, TemplateError) as exc:
                outcome.failures += self._failed(one, str(exc), started).failures
                if not planner.flag(task, "ignore_errors"):
                    return outcome
                continue
            log.finish(one, log.result(one, Status.OK, message=shown), started, register=False)
            if looped:
                brought = [dataclasses.replace(t, item_vars={**one.item_vars, **t.item_vars}) for t in brought]
            self.depth += 1
            try:
                inner = run_tasks(brought)
            finally:
                self.depth -= 1
            outcome.failures += inner.failures
            if inner.stop or inner.failures:
                outcome.stop, outcome.fatal = inner.stop, inner.fatal
                return outcome
            started = time.monotonic()
        return outcome

    def _read(self, task: TaskDef) -> tuple[list[TaskDef], str]:
        """The tasks the include brings, and Ansible's line for it ("included: FILE for HOST")."""
        if self.depth >= MAX_DEPTH:
            raise TaskError(f"{task.type}: more than {MAX_DEPTH} includes within includes")
        includes = self.planner.play.includes
        params = render({k: v for k, v in task.params.items() if k not in ("apply", "own")},
                        self.planner.task_vars(task))
        if task.type == "include_tasks":
            brought = includes.include_tasks(task, str(params["file"]))
            shown = f"included: {params['file']} for {self.planner.host}"
        else:
            brought, exposed = includes.include_role(task, {**params, "apply": task.params.get("apply")})
            if exposed is not None:   # public: its vars and defaults are this host's play's from now on
                self.planner.public_vars.update(exposed["vars"])
                self.planner.public_defaults.update(exposed["defaults"])
            shown = f"included: {params['name']} for {self.planner.host}"
        self.executor.notifications.add(includes.handlers)
        return brought, shown

    def _failed(self, task: TaskDef, error: str, started: float, fatal: bool = False) -> Outcome:
        result = self.log.result(task, Status.FAILED, error=error)
        result.ignored = not fatal and self.planner.flag(task, "ignore_errors")
        self.log.finish(task, result, started)
        return Outcome([] if result.ignored else [result])
