"""What `register:` stores: a task's result as Ansible users read it.

Every registered result has `status`, `changed`, `failed`, `skipped`, `msg`, `rc`,
`stdout`, `stdout_lines`, `stderr` and `stderr_lines`, plus what the task itself
reported (a probe's output, a command's exit code). In check mode a task that would
change has not run: what only running it yields is `PendingResult`'s to refuse.
"""
from __future__ import annotations

from typing import Any

from gpuconf.errors import TemplateError
from gpuconf.results import Status, TaskResult


class KnownOnlyAfterApply(TemplateError):
    """A template used part of a registered result that check mode cannot have."""


class PendingResult(dict[str, Any]):
    """What check mode registers for a task that would change: its status is
    known, but what running it yields (rc, stdout, ...) exists only in apply.
    Using that makes the reading task `unknown`, never a silent empty value."""

    def __init__(self, name: str, task: str, known: dict[str, Any]):
        super().__init__(known)
        self._register, self._task = name, task  # underscored: never shadow a key in `probe.task`

    def __getitem__(self, key: str) -> Any:
        if key in self:
            return super().__getitem__(key)
        raise KnownOnlyAfterApply(f"'{self._register}.{key}' is known only after apply runs task '{self._task}'")


def _lines(text: Any) -> list[str]:
    return str(text).splitlines() if text else []


def _text(output: Any) -> str:
    return str(output).rstrip("\r\n") if output else ""


def registered_value(name: str, result: TaskResult) -> dict[str, Any]:
    """The value `register: name` gives the later tasks."""
    known: dict[str, Any] = {
        "status": result.status.value, "changed": result.status in (Status.CHANGED, Status.WOULD_CHANGE),
        "failed": result.status == Status.FAILED, "skipped": result.status == Status.SKIPPED,
        "msg": result.message, "error": result.error, "changes": [c.summary for c in result.changes],
    }
    data = dict(result.data)
    if result.status == Status.WOULD_CHANGE:
        # what the check itself read (a probe's output) is known; what running the task yields is not
        for key in ("stdout", "stderr"):
            if key in data:
                data[f"{key}_lines"] = _lines(data[key])
                data[key] = _text(data[key])
        return PendingResult(name, result.task, {**known, **data})
    stdout = data.pop("stdout", result.stdout)
    stderr = data.pop("stderr", result.stderr)
    value = {**known, "rc": 1 if result.status == Status.FAILED else 0, **data}
    # as Ansible: a trailing newline is cut, so `r.stdout == 'debian'` and `{{ r.stdout }}-x` read as meant
    value.update(stdout=_text(stdout), stdout_lines=_lines(stdout), stderr=_text(stderr), stderr_lines=_lines(stderr))
    return value
