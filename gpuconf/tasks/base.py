"""The task contract: check() reads and returns changes; apply() carries them out.

A task type has a name, a pydantic `Params` model, `check()` and optionally
`apply()`. `check(ctx, params)` receives a `CheckContext`, which can only
read: it has no method that writes or runs a command that changes state, so a
bug in a task cannot mutate a host during a drift check. Each `Change` lists
the operations (`Op`) that apply would perform; the default `apply()` runs
exactly those, in one round trip. The engine then runs `check()` again and a
non-empty result fails the task as "not idempotent".
"""
from __future__ import annotations

import base64
import shlex
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from gpuconf.facts.base import Fact, Output


class Params(BaseModel):
    """Base of every task's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


# -- operations: what apply sends to the host ----------------------------------

@dataclass(frozen=True)
class Op:
    """One remote operation, as the runner understands it, plus a description."""

    request: dict = field(compare=False)
    description: str = ""


def run(command: str | list[str], timeout: float = 600, check: bool = True, stdin: str | None = None,
        description: str | None = None, secret: bool = False) -> Op:
    """Run a command. A list is quoted part by part (never pasted raw)."""
    cmd = command if isinstance(command, str) else shlex.join(command)
    request = {"op": "run", "cmd": cmd, "timeout": timeout, "check": check}
    if stdin is not None:
        request["stdin"] = stdin
    return Op(request, description or ("run a command" if secret else f"run: {cmd}"))


def write_file(path: str, content: bytes | str, mode: int | None = None, owner: str | None = None,
               group: str | None = None, backup: bool = False) -> Op:
    data = content.encode() if isinstance(content, str) else content
    request = {"op": "write", "path": path, "content_b64": base64.b64encode(data).decode(), "mode": mode,
               "owner": owner, "group": group, "backup": backup}
    return Op(request, f"write {path} ({len(data)} bytes" + (f", mode {mode:04o})" if mode is not None else ")"))


def make_directory(path: str, mode: int | None = None, owner: str | None = None, group: str | None = None) -> Op:
    return Op({"op": "mkdir", "path": path, "mode": mode, "owner": owner, "group": group}, f"create directory {path}")


def remove(path: str, recursive: bool = False) -> Op:
    return Op({"op": "remove", "path": path, "recursive": recursive}, f"remove {path}")


def symlink(path: str, target: str) -> Op:
    return Op({"op": "symlink", "path": path, "target": target}, f"link {path} -> {target}")


# -- results of check ----------------------------------------------------------

@dataclass
class Change:
    """One thing apply would change, with how (ops) and what it looks like (diff).

    `verify=False` marks a change that is an action rather than a state (a
    restart, a command without creates/unless): it is not expected to vanish
    on the re-check. `reboot` says the change only takes effect after a reboot.
    """

    summary: str
    ops: list[Op] = field(default_factory=list)
    diff: str | None = None
    before: Any = None
    after: Any = None
    verify: bool = True
    reboot: bool = False


@dataclass
class Check:
    """What check() found: the changes, and a one-line reason when in sync."""

    changes: list[Change]
    message: str = ""
    reboot_required: bool = False
    data: dict = field(default_factory=dict)  # extra values exposed to `register`
    findings: list = field(default_factory=list)  # engine.results.Finding, for health probes


def in_sync(message: str, reboot_required: bool = False, **data: Any) -> Check:
    return Check([], message, reboot_required, data)


def drift(*changes: Change, message: str = "", **data: Any) -> Check:
    return Check(list(changes), message or "; ".join(c.summary for c in changes), False, data)


class Unknown(Exception):
    """The task cannot know the state (a probe hung): status `unknown`.

    `findings` (health probes) travel to the result: a hung nvidia-smi is reported as
    a failure finding `driver_unresponsive` on an `unknown` task, never as a pass."""

    def __init__(self, message: str = "", findings: list | None = None):
        super().__init__(message)
        self.findings = list(findings or [])


class Refused(Exception):
    """The task refuses to act (an unsafe or impossible request): status `failed`."""


# -- contexts ------------------------------------------------------------------

class CheckContext(Protocol):
    """What check() may do: read facts. Nothing here can change a host."""

    host: str
    facts: dict[str, Any]
    vars: Any
    check_mode: bool
    after_apply: bool  # the re-check right after apply
    reboot_required: bool

    def get(self, fact: Fact) -> Any: ...

    def get_all(self, facts: list[Fact]) -> list[Any]: ...


class ApplyContext(CheckContext, Protocol):
    """What apply() may do in addition: run ops on the host."""

    def execute(self, ops: list[Op]) -> list[Output]: ...


class TaskType:
    """Base of task types. Subclasses set `name` and `Params` and write check()."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[Params]] = Params

    def facts(self, params: Any) -> list[Fact]:
        """Facts check() will read, so the engine can gather them in one batch."""
        return []

    def check(self, ctx: CheckContext, params: Any) -> Check:
        raise NotImplementedError

    def apply(self, ctx: ApplyContext, params: Any, changes: list[Change]) -> None:
        ctx.execute([op for change in changes for op in change.ops])
