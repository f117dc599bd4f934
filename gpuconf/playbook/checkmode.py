"""`check_mode:` as Ansible takes it, on a task, a block or a play: `true` makes the task a check
(it reports what it would change and changes nothing, in apply too); `false` runs it for real in a
check. A check never writes: `check_mode: false` is taken by `gpuconf check` only where the task
reads (a command its author marks as a read, a probe), and refused before anything runs otherwise."""
from __future__ import annotations

from gpuconf.errors import PlaybookError
from gpuconf.playbook.models import ENGINE_ACTIONS, Play, Playbook, TaskDef
from gpuconf.tasks.registry import TASK_TYPES

READS = ("command", "probe")   # what check mode may run when told: its author's word that it reads


def mode(task: TaskDef, play: Play) -> bool | None:
    """The task's check_mode: its own (or its block's), else its play's; None when neither says."""
    return task.keywords.check_mode if task.keywords.check_mode is not None else play.keywords.check_mode


def refuse_writes_in_check(playbook: Playbook) -> None:
    """Before a check runs: a task told `check_mode: false` that would write is refused."""
    for play in playbook.plays:
        for task in play.tasks + play.handlers:
            if mode(task, play) is False and task.type not in READS and task.type not in ENGINE_ACTIONS \
                    and task.type not in ("include_tasks", "include_role") and not (
                        task.type in TASK_TYPES and TASK_TYPES[task.type].controller_only):
                raise PlaybookError(f"check_mode: false would run task '{task.name}' ({task.type}) for real in a "
                                    "check: `gpuconf check` never writes (a command that only reads may say "
                                    "check_mode: false; run `gpuconf apply` to change the host)", task.location)
