"""One host's results in one play, as they happen. A finished task is registered (its
`register:`), redacted, kept and told to the run's processors, in that order and only here:
the entries (engine/entry.py), the executor (engine/executor.py) and the play (engine/hostrun.py)
all record through it."""
from __future__ import annotations

import time
from typing import Any

from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.processors import Processors
from gpuconf.engine.registered import registered_value
from gpuconf.engine.secrets import mark_known, redact_result, redact_value
from gpuconf.playbook.models import TaskDef
from gpuconf.results import Registration, Status, TaskResult


def ansible_name(task: TaskDef) -> str:
    """Ansible's name of a task: its `name`, else the module as the playbook wrote it."""
    if task.keywords.name:
        return task.name.split(" (item=")[0] if task.item_vars else task.name
    return task.action or task.type


class HostLog:
    def __init__(self, planner: HostPlanner, processors: Processors):
        self.planner, self.processors = planner, processors
        self.results: list[TaskResult] = []
        self.registrations: list[Registration] = []  # each value `register:` stored, in order (the JSON report's)

    def result(self, task: TaskDef | None, status: Status, **fields: Any) -> TaskResult:
        """A result of `task` on this host (None: the connection itself)."""
        return TaskResult(
            host=self.planner.host, play=self.planner.play.name, task=task.name if task else "connect",
            status=status, type=task.type if task else "", role=task.role if task else None,
            location=str(task.location) if task else "", secret=bool(task and task.keywords.no_log),
            ansible_name=ansible_name(task) if task else "", **fields)

    def finish(self, task: TaskDef, result: TaskResult, started: float, register: bool = True) -> None:
        """`task` is done: its duration, its registered value, then the result recorded."""
        result.duration = round(time.monotonic() - started, 3)
        if task.keywords.register and register:
            self.register(task, registered_value(task.keywords.register, result))
        self.add(result)

    def register(self, task: TaskDef, value: dict[str, Any], report: bool = True) -> None:
        """`register:` stores the task's result for the tasks after it (and, `report`, the report's)."""
        name = str(task.keywords.register)
        self.planner.registered[name] = mark_known(value, self.planner.secrets)
        if not report:
            return
        shown = None if task.keywords.no_log else redact_value(dict(value), self.planner.secrets)
        self.registrations.append(Registration(task.name, name, task.type, shown))

    def add(self, result: TaskResult) -> None:
        result = redact_result(result, self.planner.secrets)
        self.results.append(result)
        self.processors.task_completed(result)
