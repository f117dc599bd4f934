"""What `register:` stores: a task's result shaped as Ansible's (ansible-core 2.19), so that a
playbook reads it the same way (tests/ansible_fuzz compares them).

Every value has `changed` and, unless the task was skipped, `failed`. A task that `when` skipped
has `skipped`, `skip_reason` and `false_condition`, and nothing else (no `rc`). A command has
`rc`, `stdout`, `stderr` (each without its trailing newlines), `stdout_lines`, `stderr_lines`
and `msg` ('' or 'non-zero return code'); debug its `msg` (or the variable), set_fact its
`ansible_facts`, assert 'All assertions passed'; a failure's `msg` is its error. gpuconf's own
task types also keep `status`, `msg` and `changes`, and what the task reported (a probe's output).
A loop's value is built in flow.py (`results`, 'All items completed').

In check mode a task of gpuconf's own types that would change has not run: what only running it
yields is `PendingResult`'s to refuse. An Ansible-shaped one registers in check mode what it
registers in apply (a copy, file or lineinfile has no rc or stdout either way).
"""
from __future__ import annotations

from typing import Any

from gpuconf.errors import TemplateError
from gpuconf.results import Status, TaskResult

CONDITION_FALSE = "Conditional result was False"
# gpuconf's task types whose registered value is Ansible's module's, key for key
ANSIBLE_SHAPED = ("command", "debug", "set_fact", "assert", "file", "directory", "line")


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


def output_text(output: Any) -> str:
    """A command's output as registered: without its trailing newlines (Ansible's strip_empty_ends)."""
    return str(output).rstrip("\r\n") if output else ""


def output_lines(output: Any) -> list[str]:
    return output_text(output).splitlines()


def skipped_value(condition: Any) -> dict[str, Any]:
    """A task that `when` skipped (its first condition that was false)."""
    return {"changed": False, "false_condition": condition, "skip_reason": CONDITION_FALSE, "skipped": True}


def registered_value(name: str, result: TaskResult) -> dict[str, Any]:
    """The value `register: name` gives the later tasks."""
    data = dict(result.data)
    failed = result.status == Status.FAILED
    # a failed result says whether it changed (a command that ran and failed has)
    changed = bool(data.pop("changed", False)) if failed else result.status in (Status.CHANGED, Status.WOULD_CHANGE)
    if result.status == Status.SKIPPED:
        return {"changed": False, **data, "skipped": True}
    if result.type in ANSIBLE_SHAPED:
        return _ansible_shaped(result, changed, failed, data)
    known: dict[str, Any] = {
        "status": result.status.value, "changed": changed, "failed": failed, "skipped": False,
        "msg": result.error if failed and result.error else result.message,
        "changes": [c.summary for c in result.changes],
    }
    if result.status == Status.WOULD_CHANGE:
        # what the check itself read (a probe's output) is known; what running the task yields is not
        for key in ("stdout", "stderr"):
            if key in data:
                data[f"{key}_lines"] = output_lines(data[key])
                data[key] = output_text(data[key])
        return PendingResult(name, result.task, {**known, **data})
    stdout = data.pop("stdout", result.stdout)
    stderr = data.pop("stderr", result.stderr)
    value = {**known, "rc": 1 if failed else 0, **data}
    value.update(stdout=output_text(stdout), stdout_lines=output_lines(stdout), stderr=output_text(stderr),
                 stderr_lines=output_lines(stderr))
    return value


def _ansible_shaped(result: TaskResult, changed: bool, failed: bool, data: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = {"changed": changed, "failed": failed}
    if result.type == "command" and failed and data.get("rc") is None and not (
            result.stdout or result.stderr or "stdout" in data or "stderr" in data):
        # it never ran (its `when` or a parameter could not be rendered): Ansible's task error,
        # no module result
        value.update(changed=False, msg=data.pop("msg", result.error or ""))
        data.pop("rc", None)
        value.update(data)
        return value
    if result.type == "command":
        stdout, stderr = data.pop("stdout", result.stdout), data.pop("stderr", result.stderr)
        rc = data.pop("rc", None)
        if rc is None and not failed and result.status != Status.WOULD_CHANGE:
            rc = 0
        message = data.pop("msg", None)
        if message is None:  # the module's own: only a command that could not run says why
            message = ("non-zero return code" if rc != 0 else "") if rc is not None else \
                (result.error or "") if failed else ""
        value.update(msg=message, stdout=output_text(stdout), stdout_lines=output_lines(stdout),
                     stderr=output_text(stderr), stderr_lines=output_lines(stderr))
        if rc is not None:
            value["rc"] = rc
    elif result.type == "assert" and not failed:
        value["msg"] = data.pop("msg", "All assertions passed")
    elif failed:
        value["msg"] = data.pop("msg", result.error or "")
    value.update(data)
    return value  # in check mode too: running the task would add no key (Ansible's copy, file,
    # lineinfile register no rc or stdout either), so one it lacks is undefined, never pending
