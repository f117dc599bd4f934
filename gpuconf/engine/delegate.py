"""delegate_to, the documented subset (docs/task-contract.md, "delegate_to").

The loader allows it on a step the controller runs (`localhost`, `127.0.0.1`: command,
probe, assert, debug, set_fact) and on a read of another inventory host (a probe, or a
command marked `check_mode: false`); anything that would change another host is refused
at load. At run time the task talks to its target through a session of its own (opened
on first use, closed when the host's play ends) and, as in Ansible, its result and any
registered or set variables are the original host's; so are the facts: a delegated read
neither refreshes nor invalidates them.

A delegated session takes no run lock: it only reads, or runs on the controller, and the
target may be a host of the same run that holds its lock exclusively.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuconf.engine.session import HostSession
from gpuconf.errors import ConnectError, TaskError
from gpuconf.playbook.models import DELEGATE_LOCAL, DELEGATE_TO_HOST, TaskDef
from gpuconf.templating.render import render_string


def reads_elsewhere(task: TaskDef) -> bool:
    """Delegated to another host, where it may only read (the loader saw to it): a command there
    runs as a read-only request in apply too."""
    target = task.keywords.delegate_to
    return bool(target) and str(target).strip() not in DELEGATE_LOCAL


def delegate_target(task: TaskDef, variables: Any) -> str:
    """The host `delegate_to` names, rendered with the task's variables. A templated one the loader
    let through for a step the controller may run: where it renders to another host, the step
    must only read there (a probe, a command marked `check_mode: false`), as the loader asks of a
    literal one."""
    value = render_string(str(task.keywords.delegate_to), variables)
    target = str(value).strip() if value is not None else ""
    if not target:
        raise TaskError(f"delegate_to '{task.keywords.delegate_to}' names no host")
    if target not in DELEGATE_LOCAL and (task.type not in DELEGATE_TO_HOST or (
            task.type == "command" and task.keywords.check_mode is not False)):
        raise TaskError(f"delegate_to another host is supported for reads only: a probe, or a command marked "
                        f"`check_mode: false`; '{task.type}' would change {target}, not this task's host")
    return target


class Delegates:
    """The sessions of one host's delegated tasks, one per target."""

    def __init__(self, open_session: Callable[[str], HostSession] | None,
                 redact: Callable[[str], str] | None = None):
        self._open = open_session
        self._redact = redact  # -vvv: the requests it sends hold the original host's secrets
        self._sessions: dict[str, HostSession] = {}

    def session(self, target: str) -> HostSession:
        if target not in self._sessions:
            if self._open is None:
                raise TaskError("delegate_to is not available in this run")
            try:
                self._sessions[target] = self._open(target)
            except ConnectError as exc:  # the delegate is unreachable, not the task's host
                raise TaskError(f"delegate_to {target}: {exc}") from None
            if self._redact is not None:
                self._sessions[target].redact = self._redact
        return self._sessions[target]

    def close(self) -> None:
        for session in self._sessions.values():
            try:
                session.connection.close()
            except Exception:  # noqa: BLE001 - a delegate gone away has nothing left to close
                pass
        self._sessions.clear()
