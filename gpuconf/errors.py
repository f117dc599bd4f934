"""One exception tree. Every error says what, where, and what to do.

Errors are turned into results at one boundary (the runner) or into a
`gpuconf: error: ...` line and exit code 1 (the CLI). Nothing else catches them.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import ValidationError


@dataclass(frozen=True)
class Location:
    """A place in a source file; line and column are 1-based."""

    file: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


class GpuconfError(Exception):
    """Base class: a message plus an optional source location. `exit_bit` is what the error
    means in the exit-code bitmask when it ends a command (1: bad input, nothing ran), or
    when it becomes a host's result (4 failed, 8 unreachable)."""

    exit_bit = 1

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        if self.location is not None:
            return f"{self.location}: {self.message}"
        return self.message


class UsageError(GpuconfError):
    """Bad command-line usage."""


class InventoryError(GpuconfError):
    """An inventory that cannot be loaded or a pattern that cannot be resolved."""


class PlaybookError(GpuconfError):
    """A playbook, role or variable file that does not validate."""


class TemplateError(GpuconfError):
    """A Jinja2 template that does not render (undefined variable, syntax)."""


class UndefinedVariable(TemplateError):
    """A template used a variable that no layer defines: `name`."""

    def __init__(self, name: str, message: str, location: Location | None = None):
        super().__init__(message, location)
        self.name = name

    @property
    def shown(self) -> str:
        """What Ansible's `debug: var=` shows for it."""
        return f"'{self.name}' is undefined"


class UndefinedAttribute(TemplateError):
    """A template used a key or attribute its value lacks; `shown` says so as ansible-core 2.19 does
    ("object of type 'dict' has no attribute 'rc'")."""

    def __init__(self, shown: str, message: str, location: Location | None = None):
        super().__init__(message, location)
        self.shown = shown


class ConnectError(GpuconfError):
    """A host that cannot be reached. `transient` errors are retried."""

    exit_bit = 8

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


class HostKeyError(ConnectError):
    """An unknown or changed host key: never retried, never accepted silently."""


class RemoteError(GpuconfError):
    """The remote runner failed (python3 missing, sudo wants a password, ...)."""

    exit_bit = 4


class TaskError(GpuconfError):
    """A task that cannot do its job on a host (refused, failed command). `data` is what the
    failure leaves to `register` (a failed command's rc, stdout and stderr)."""

    exit_bit = 4

    def __init__(self, message: str, location: Location | None = None, data: dict[str, object] | None = None):
        super().__init__(message, location)
        self.data = dict(data or {})


class Interrupted(GpuconfError):
    """The run was interrupted (SIGINT)."""

    exit_bit = 130


# Readable messages for bad input: 'did you mean' hints for misspelled names, and the first
# error of a pydantic validation said plainly.
def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """Return ` (did you mean 'x'?)` for the closest candidate, or ''."""
    matches = difflib.get_close_matches(str(word), sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean '{matches[0]}'?)" if matches else ""


def validation_message(exc: ValidationError,
                       allowed: tuple[str, ...] | list[str] = ()) -> tuple[tuple[int | str, ...], str]:
    """The first pydantic error as (path, readable message)."""
    error = exc.errors()[0]
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        key = loc[-1]
        return loc, f"unknown key '{key}'{did_you_mean(str(key), allowed)}"
    if error["type"] == "missing":
        return loc, f"missing required key '{loc[-1]}'"
    where = ".".join(str(p) for p in loc)
    value = error.get("input")
    shown = f" (got {value!r})" if value is not None and not isinstance(value, (dict, list)) else ""
    return loc, f"'{where}': {error['msg']}{shown}" if where else error["msg"]
