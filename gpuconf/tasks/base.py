"""The task contract: reads() declares, check() judges, apply() carries out.

A task type has a name, a pydantic `Params` model and three methods:
- `reads(params)` declares what the task needs to know: facts (`gpuconf.facts.base`),
  each a file path, a glob of small files, or an argv list of a read-only program. The
  engine gathers the reads of every task of a host in one batch, each source once.
- `check(params, facts)` is a pure function of those reads: no I/O, no mode flags. It
  returns a `Verdict`: in sync (with the reason), or the `Change`s apply would make. The
  same function serves check mode, apply, and the verified re-check after apply.
- `apply(ctx, params, changes)` carries the changes out; by default it runs their ops.

`check()` never sees a connection, so a bug in a task cannot mutate a host during a
drift check. After apply the engine reads again and calls the same `check()`: a change
still there fails the task ("not idempotent"), unless the change says it takes effect
only after a reboot (`Change.reboot`), which makes the host reboot-pending instead.
"""
from __future__ import annotations

import base64
import datetime
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, cast

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar

from gpuconf.facts.base import Fact, FactUnavailable, Output, Parsed
from gpuconf.facts.platform import Platform, PlatformUnknown
from gpuconf.facts.wire import MkdirRequest, RemoveRequest, Request, RunRequest, SymlinkRequest, WriteRequest
from gpuconf.files.values import JSONValue
from gpuconf.results import Finding


class Params(BaseModel):
    """Base of every task's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a timeout of 1e309 or .nan is no number


# -- operations: what apply sends to the host ----------------------------------

@dataclass(frozen=True)
class Op:
    """One remote operation, as the runner understands it (gpuconf/facts/wire.py), plus a
    description."""

    request: Request = field(compare=False)
    description: str = ""

    @property
    def command(self) -> str:
        """The shell command of a `run` op, as a change names what it will run ("" for others)."""
        return self.request["cmd"] if self.request["op"] == "run" else ""


def run(command: str | list[str], timeout: float = 600, check: bool = True, stdin: str | None = None,
        description: str | None = None, secret: bool = False) -> Op:
    """Run a command. A list is quoted part by part (never pasted raw)."""
    cmd = command if isinstance(command, str) else shlex.join(command)
    request: RunRequest = {"op": "run", "cmd": cmd, "timeout": timeout, "check": check}
    if stdin is not None:
        request["stdin"] = stdin
    return Op(request, description or ("run a command" if secret else f"run: {cmd}"))


def run_argv(argv: list[str], prefix: str = "", timeout: float = 600, stdin: str | None = None,
             description: str | None = None) -> Op:
    """Run a program with its words as given (Ansible's command: no shell; the host expands each
    word's $VAR and ~); `prefix` is sh text before it (`cd DIR && `)."""
    cmd = prefix + shlex.join(argv)
    request: RunRequest = {"op": "run", "cmd": cmd, "argv": list(argv), "prefix": prefix, "timeout": timeout,
                           "check": True}
    if stdin is not None:
        request["stdin"] = stdin
    return Op(request, description or f"run: {shlex.join(argv)}")


def write_file(path: str, content: bytes | str, mode: int | None = None, owner: str | None = None,
               group: str | None = None, backup: bool = False) -> Op:
    data = content.encode() if isinstance(content, str) else content
    request: WriteRequest = {"op": "write", "path": path, "content_b64": base64.b64encode(data).decode(),
                             "mode": mode, "owner": owner, "group": group, "backup": backup}
    return Op(request, f"write {path} ({len(data)} bytes" + (f", mode {mode:04o})" if mode is not None else ")"))


def make_directory(path: str, mode: int | None = None, owner: str | None = None, group: str | None = None) -> Op:
    request: MkdirRequest = {"op": "mkdir", "path": path, "mode": mode, "owner": owner, "group": group}
    return Op(request, f"create directory {path}")


def remove(path: str, recursive: bool = False) -> Op:
    request: RemoveRequest = {"op": "remove", "path": path, "recursive": recursive}
    return Op(request, f"remove {path}")


def symlink(path: str, target: str) -> Op:
    request: SymlinkRequest = {"op": "symlink", "path": path, "target": target}
    return Op(request, f"link {path} -> {target}")


# -- what check() returns ------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """One thing apply would change, with how (ops) and what it looks like (diff).

    `verify=False` marks a change that is an action rather than a state (a restart, a
    command without creates/unless): it is not expected to vanish on the re-check.
    `reboot=True` says the change takes effect only after a reboot: still found by the
    re-check, it makes the host reboot-pending rather than failing the task.
    """

    summary: str
    ops: list[Op] = field(default_factory=list)
    diff: str | None = None
    before: object = None  # what it is now and what it will be: shown, and read back by its own task's apply
    after: object = None
    verify: bool = True
    reboot: bool = False


@dataclass(frozen=True)
class Verdict:
    """What check() found: the changes, and a one-line reason when in sync."""

    changes: list[Change]
    message: str = ""
    data: Mapping[str, object] = field(default_factory=dict)  # extra values exposed to `register`
    findings: list[Finding] = field(default_factory=list)  # for health probes


def in_sync(message: str, **data: object) -> Verdict:
    return Verdict([], message, data)


def drift(*changes: Change, message: str = "", **data: object) -> Verdict:
    return Verdict(list(changes), message or "; ".join(c.summary for c in changes), data)


class Unknown(Exception):
    """The task cannot know the state (a probe hung): status `unknown`.

    `findings` (health probes) travel to the result: a hung nvidia-smi is reported as
    a failure finding `driver_unresponsive` on an `unknown` task, never as a pass."""

    def __init__(self, message: str = "", findings: list[Finding] | None = None):
        super().__init__(message)
        self.findings = list(findings or [])


class Refused(Exception):
    """The task refuses to act (an unsafe or impossible request): status `failed`. `data` is
    what it read, for `register` (a probe's output that did not match)."""

    def __init__(self, message: str = "", data: Mapping[str, object] | None = None):
        super().__init__(message)
        self.data = dict(data or {})


# -- what check() and apply() see ----------------------------------------------

class HostFacts(Mapping[str, JSONValue]):
    """The host facts a task declared (`TaskType.host_facts`), gathered whether the play gathers
    facts or not. Reading one it did not declare is a bug in the task, as for reads."""

    def __init__(self, facts: Mapping[str, JSONValue], declared: frozenset[str]):
        self._facts, self._declared = facts, declared

    def __getitem__(self, key: str) -> JSONValue:
        if key not in self._declared:
            raise LookupError(f"host fact {key!r} was read but not declared in host_facts")
        return self._facts[key]

    def __iter__(self) -> Iterator[str]:
        return (key for key in self._facts if key in self._declared)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Facts:
    """The values of a task's declared reads, the host facts it declared, the host's platform,
    the reboots already pending on the host, and the run's day (`today`, for end-of-life dates).
    Reading a fact the task did not declare is a bug in the task."""

    def __init__(self, values: Mapping[str, object], declared: list[Fact], host: Mapping[str, JSONValue],
                 reboot_pending: tuple[str, ...] = (), today: datetime.date | None = None,
                 platform: Platform | PlatformUnknown | None = None, host_facts: frozenset[str] | None = None):
        self._values = values
        self.today = today or datetime.date.today()  # the run's clock: --today, GPUCONF_TODAY
        self._declared = {f.key for f in declared}
        self.host: Mapping[str, JSONValue] = host if host_facts is None else HostFacts(host, host_facts)
        self.reboot_pending = reboot_pending
        self._platform = platform

    @property
    def platform(self) -> Platform:
        """The host's platform (package backend, initramfs tool, driver naming). A host whose
        platform cannot be known fails here, with the reason, in the task that needed it."""
        if isinstance(self._platform, PlatformUnknown):
            raise self._platform
        if self._platform is None:
            raise LookupError("the host's platform was not resolved before the task ran")
        return self._platform

    def __getitem__(self, fact: Fact[Parsed]) -> Parsed:
        if fact.key not in self._declared:
            raise LookupError(f"fact {fact.key!r} was read but not declared by reads()")
        value = self._values.get(fact.key, FactUnavailable(f"{fact.key}: not read"))
        if isinstance(value, FactUnavailable):
            raise value
        return cast(Parsed, value)  # the cache holds what this fact's parse returned

    def host_text(self, name: str) -> str | None:
        """A declared host fact that is text (`kernel`, `architecture`), or None when it is not known."""
        value = self.host.get(name)
        return value if isinstance(value, str) else None


class Resolver(Protocol):
    """What a task may use while its parameters are rendered, before check(): the play's
    template and source files, and conditions over the task's variables."""

    def template(self, name: str, settings: dict[str, Any] | None = None, dest: str | None = None) -> str: ...

    def source(self, name: str) -> str: ...

    def holds(self, condition: str | bool) -> bool: ...

    def defined(self, name: str) -> bool:
        """Whether the task's variables have `name`."""
        ...

    def variable(self, name: str) -> Any:
        """The value of the task's variable `name`, rendered."""
        ...


class ApplyContext(Protocol):
    """What apply() may do: run ops on the host, read a fact afresh (polling), reboot."""

    host: str

    def execute(self, ops: list[Op], explains_failures: bool = False) -> list[Output]:
        """Run `ops` in one round trip, in order: a failed `run` skips the ops after it on the host
        (they come back not run, exit -1). A failure raises TaskError, unless the task
        `explains_failures`: then it reads the outputs and says itself what went wrong."""
        ...

    def read(self, fact: Fact[Parsed]) -> Parsed: ...

    def reboot(self, command: str, timeout: float, via: Callable[[], None] | None = None) -> float:
        """Reboot with `command` on the host, or by calling `via` (a power cycle through the
        node's BMC), and wait for the new boot; the seconds it took."""
        ...


# A task type's parameters (its `Params` model). A type names its own (`class Probe(TaskType[ProbeParams])`);
# the engine holds every type as a bare TaskType, whose parameters are any model's.
P = TypeVar("P", bound=Params, default=Any)


class TaskType(Generic[P]):
    """Base of task types. Subclasses set `name` and `Params` and write reads() and check()."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[Params]] = Params
    # The host facts check() reads (`facts.host[...]`: kernel, gpus, ...), gathered for it even
    # when the play does not gather facts (gpuconf/facts/gather.py names them).
    host_facts: ClassVar[frozenset[str]] = frozenset()
    # With `check_mode: false` its author says it only reads: check mode runs it, as a read.
    reads_when_told: ClassVar[bool] = False
    # Its apply reboots the host: in local mode (an image build) that waits for --reboot.
    reboots: ClassVar[bool] = False
    # The kind of change it can carry out together with the tasks right after it of the same
    # kind ("package": one package transaction): the engine (gpuconf/engine/joint.py) then asks
    # the first task's type to `join` their `batch_ops` and `apply_joined` them, and re-checks
    # each task as its own. "" (the default): every apply goes alone.
    batch: ClassVar[str] = ""
    # It is judged on the controller alone (assert): a play of such tasks never connects to its hosts.
    controller_only: ClassVar[bool] = False

    def check_mode_data(self, params: P) -> dict[str, object] | None:
        """What check mode registers instead of running it (with `skipped: True` the task is skipped
        there, as Ansible skips a command it cannot judge), or None: check mode reports what it
        would change. A command that ran and failed has changed (Ansible's command)."""
        return None

    def resolve(self, values: dict[str, object], resolver: Resolver) -> dict[str, object]:
        """Rendered parameter values, completed from files or conditions before validation
        (a `template:` becomes its rendered content). Runs on the controller, never on a host."""
        return values

    def reads(self, params: P) -> list[Fact]:
        """Facts check() will read, so the engine can gather them in one batch."""
        return []

    def check(self, params: P, facts: Facts) -> Verdict:
        raise NotImplementedError

    def apply(self, ctx: ApplyContext, params: P, changes: list[Change]) -> dict[str, object] | None:
        ctx.execute([op for change in changes for op in change.ops])
        return None

    # -- a `batch` kind's apply together ----------------------------------------
    def batch_ops(self, params: P, changes: list[Change]) -> list[Op] | None:
        """This task's ops, to be joined with others', or None when its changes must go alone."""
        return None

    def join(self, parts: list[list[Op]]) -> list[Op] | None:
        """The ops of several tasks of this `batch` kind (their batch_ops, in order) as one list,
        or None when they cannot go together."""
        return None

    def apply_joined(self, ctx: ApplyContext, ops: list[Op]) -> None:
        """Run what `join` made, in one round trip; a failure raises TaskError."""
        ctx.execute(ops)
