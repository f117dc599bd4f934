"""What a run is asked to do (`RunOptions`), which tasks the tags select, and the results
of tasks a run left out."""
from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuconf.playbook.models import Play, TaskDef
from gpuconf.results import Status, TaskResult, Verb

if TYPE_CHECKING:  # imported when used: every command reads FORKS, and a gate must not load paramiko
    from gpuconf.connection.resolve import ConnectionKind, Reach
    from gpuconf.engine.flow import StepGate

FORKS = 50  # hosts in parallel when neither -f nor the configuration says


@dataclass
class RunOptions:
    verb: Verb = "check"
    tags: set[str] = field(default_factory=set)
    skip_tags: set[str] = field(default_factory=set)
    extra_vars: dict[str, Any] = field(default_factory=dict)
    diff: bool = False
    forks: int = FORKS
    accept_new_host_keys: bool = False
    connection: ConnectionKind | None = None
    detailed_exitcodes: bool = False
    deadline: float | None = None
    lock_wait: float = 60.0  # seconds to wait for another run's lock on a host
    become_password: str | None = field(default=None, repr=False)  # from a prompt or the environment
    allow_reboot: bool = False  # --reboot: a reboot task may reboot this machine in local mode
    strict: bool = False  # --strict: health warnings count as failures
    become: bool | None = None  # the project configuration's default, below the inventory's `become`
    trace: bool = False  # -vvv: every connection and request is told to the events (Processor.remote)
    step: StepGate | None = None  # --step: asks before each task (engine/flow.py)
    today: datetime.date = field(default_factory=datetime.date.today)  # the run's clock (--today)
    # remediate: a reboot is asked of the scheduler, given the inventory host, instead
    # of running the reboot task's command on the host; the wait for the new boot id is the same
    reboot_via: Callable[[str], None] | None = None
    force_handlers: bool = False  # --force-handlers: a host that failed still runs its notified handlers

    @property
    def check_mode(self) -> bool:
        return self.verb == "check"

    @property
    def reach(self) -> Reach:
        """How the run reaches its hosts (gpuconf/connection/resolve.py), from these options."""
        from gpuconf.connection.base import CONNECTION_NAMES
        from gpuconf.connection.resolve import Reach
        from gpuconf.engine.variables import connection_variables

        extra = self.extra_vars
        return Reach(self.connection, extra, self.become, self.become_password, self.accept_new_host_keys,
                     lambda inventory, host: connection_variables(inventory, host, extra, CONNECTION_NAMES))


def task_selected(task: TaskDef, tags: set[str], skip: set[str]) -> bool:
    """Ansible's tag rules (Taggable.evaluate_tags): the special tags `always`, `never`, `all`,
    `tagged` and `untagged` (a task with no tag is `untagged`)."""
    own = set(task.tags) or {"untagged"}
    only = tags or {"all"}
    if "always" in own or own & only:
        selected = True
    else:
        selected = "never" not in own and ("all" in only or ("tagged" in only and own != {"untagged"}))
    if selected and skip:
        if "all" in skip:
            selected = "always" in own and "always" not in skip
        elif own & skip or ("tagged" in skip and own != {"untagged"}):
            selected = False
    return selected


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
