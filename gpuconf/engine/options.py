"""What a run is asked to do (`RunOptions`), which tasks the tags select, and the results
of tasks a run left out."""
from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuconf.playbook.models import Play, TaskDef
from gpuconf.results import Status, TaskResult

FORKS = 50  # hosts in parallel when neither -f nor the configuration says


@dataclass
class RunOptions:
    verb: str = "check"
    tags: set[str] = field(default_factory=set)
    skip_tags: set[str] = field(default_factory=set)
    extra_vars: dict[str, Any] = field(default_factory=dict)
    diff: bool = False
    forks: int = FORKS
    accept_new_host_keys: bool = False
    connection: str | None = None
    detailed_exitcodes: bool = False
    deadline: float | None = None
    lock_wait: float = 60.0  # seconds to wait for another run's lock on a host
    become_password: str | None = field(default=None, repr=False)  # from a prompt or the environment
    allow_reboot: bool = False  # --reboot: a reboot task may reboot this machine in local mode
    strict: bool = False  # --strict: health warnings count as failures
    become: bool | None = None  # the project configuration's default, below the inventory's `become`
    trace: bool = False  # -vvv: every connection and request is told to the events (Processor.remote)
    step: Any = None  # --step: a StepGate (engine/flow.py) that asks before each task
    today: datetime.date = field(default_factory=datetime.date.today)  # the run's clock (--today)
    # remediate: a reboot is asked of the scheduler, given the inventory host, instead
    # of running the reboot task's command on the host; the wait for the new boot id is the same
    reboot_via: Callable[[str], None] | None = None

    @property
    def check_mode(self) -> bool:
        return self.verb == "check"


def task_selected(task: TaskDef, tags: set[str], skip: set[str]) -> bool:
    """Ansible's tag rules, including the special tags `always` and `never`."""
    if task.tags & skip:
        return False
    if "never" in task.tags and not (task.tags - {"never"}) & tags and "never" not in tags:
        return False
    if not tags or "all" in tags:
        return True
    return bool(task.tags & tags) or "always" in task.tags


def not_run_results(play: Play, host: str, tasks: list[TaskDef], deadline: float | None,
                    handler: bool = False, reason: str = "deadline", error: str = "") -> list[TaskResult]:
    """Tasks the run left out (past its deadline, once max_fail_percentage stopped it, or after
    SIGINT): `unknown`, never silently absent from the report."""
    if not error and reason == "interrupted":
        error = "not started: the run was interrupted (SIGINT)"
    elif not error:
        error = f"not run: the run's deadline ({deadline:g} s) was reached" if deadline is not None else "not run"
    return [TaskResult(host=host, play=play.name, task=t.name, status=Status.UNKNOWN, type=t.type, role=t.role,
                       location=str(t.location), secret=bool(t.keywords.no_log), error=error, handler=handler,
                       not_run=reason) for t in tasks]
