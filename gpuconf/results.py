"""Typed results: a task on a host, a host in a run, the run itself.

Results flow one way, from the runner to the reporters. Exit codes are one
bitmask for both verbs: 2 drift (or changes with --detailed-exitcodes),
4 a task failed or could not be checked, 8 a host was unreachable, 16 (apply)
a reboot is pending; 1 is bad input (nothing ran) and 130 an interrupted run.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from types import MappingProxyType
from typing import Literal, Protocol

from gpuconf.files.values import JSONValue


class Final:
    """Results are immutable once the run that made them ends (`RunResult.seal()`): the
    reporters read them, nothing changes them after the fact. Sealing gives the object its
    class's sealed twin, which refuses assignment; until then a result is a plain dataclass
    (a `__setattr__` that checked a flag on every field of every result was 2 % of a
    100-host check's CPU)."""

    def _seal(self) -> None:
        object.__setattr__(self, "__class__", _sealed(type(self)))


_SEALED: dict[type, type] = {}


def _sealed(cls: type) -> type:
    if "_unsealed" in cls.__dict__:
        return cls
    twin = _SEALED.get(cls)
    if twin is None:
        compared = fields(cls)

        def refuse(self: object, name: str, value: object = None) -> None:
            raise AttributeError(f"{cls.__name__}.{name}: results are final once the run has ended")

        def equal(self: object, other: object) -> object:   # sealed or not, equal fields are equal results
            if getattr(type(other), "_unsealed", type(other)) is not cls:
                return NotImplemented
            return all(getattr(self, f.name) == getattr(other, f.name) for f in compared if f.compare)

        def new(twin: type, *args: object, **kwargs: object) -> object:   # a copy (replace, copy.copy) is not sealed
            return cls(*args, **kwargs) if args or kwargs else object.__new__(cls)

        twin = _SEALED[cls] = type(cls.__name__, (cls,), {
            "__new__": new, "__setattr__": refuse, "__delattr__": refuse, "__eq__": equal, "__hash__": None,
            "_unsealed": cls, "__qualname__": cls.__qualname__, "__module__": cls.__module__})
    return twin


class Status(str, Enum):
    OK = "ok"
    WOULD_CHANGE = "would_change"
    CHANGED = "changed"
    FAILED = "failed"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"
    UNREACHABLE = "unreachable"
    REBOOT_PENDING = "reboot_pending"  # apply: a required reboot was not allowed (local mode without --reboot)


Verb = Literal["check", "apply"]  # what a run does: check (reads only) or apply

EXIT_OK, EXIT_USAGE, EXIT_DRIFT, EXIT_FAILED, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 1, 2, 4, 8, 130
EXIT_REBOOT_PENDING = 16  # apply converged what it could, but a reboot it needs has not happened


SEVERITIES = ("ok", "warning", "failure")


@dataclass(frozen=True)
class FaultCode:
    """The vendor's code a finding reports: an Xid of a GPU or an SXid of an NVSwitch."""

    family: str  # "Xid" or "SXid"
    number: int

    def __str__(self) -> str:
        return f"{self.family} {self.number}"


@dataclass
class Finding(Final):
    """One health observation: a probe's verdict, per GPU where it applies. What a decision needs
    is a field (the code, the GPU, its PCI address, the count, the table row that decided), never a
    phrase to parse back out of `message`, which is for people."""

    probe: str
    severity: str  # one of SEVERITIES
    message: str
    gpu: int | None = None  # the GPU's index as nvidia-smi numbers it
    bus_id: str | None = None  # the PCI address of the GPU or NVSwitch (canonical where the probe knows it)
    value: object = None
    # what the remediation loop should do about it (gpuconf.facts.xid.ACTIONS: reset_gpu, reboot_node,
    # drain, ...); None when the finding asks for nothing in particular
    action: str | None = None
    code: FaultCode | None = None  # the Xid or SXid it reports
    count: int | None = None  # how often it was seen (an Xid's lines this boot, errors counted)
    rule: str | None = None  # the table row that decided severity and action ("xid_catalog.csv: 79")

    @property
    def fails(self) -> bool:
        """The finding fails its task (and its host), whatever the task itself did: a health failure."""
        return self.severity == "failure"


@dataclass
class ChangeReport(Final):
    summary: str
    diff: str | None = None
    before: object = None
    after: object = None
    ops: list[str] = field(default_factory=list)


@dataclass
class TaskResult(Final):
    host: str
    play: str
    task: str
    status: Status
    type: str = ""
    role: str | None = None
    message: str = ""
    changes: list[ChangeReport] = field(default_factory=list)
    error: str | None = None
    duration: float = 0.0
    stdout: str = ""
    stderr: str = ""
    handler: bool = False
    reboot_required: bool = False
    location: str = ""
    secret: bool = False
    ignored: bool = False  # failed, but the task has ignore_errors: the play and the run go on
    not_run: str | None = None  # why the task never started: "deadline", "max_fail_percentage", "batch_failed",
    # "interrupted" (SIGINT) (status unknown)
    # extra values for `register` (rc, task-specific)
    data: dict[str, object] = field(default_factory=dict[str, object])
    # how the recap counts it, as Ansible's does (a key of TALLIES): the engine decides, once per task
    # (a loop's items count once, on the last); None: by its status alone
    counts_as: str | None = None
    findings: list[Finding] = field(default_factory=list)
    traceback: str | None = None  # an internal error's traceback: JSON report and -vvv only
    ansible_name: str = ""  # as Ansible names the task: its `name`, else its module as written ("debug")

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.severity == "warning")

    @property
    def unhealthy(self) -> bool:
        """A health probe found a failure (the task is failed, but the probe itself ran)."""
        return any(f.fails for f in self.findings)

    @property
    def failed(self) -> bool:
        """The task counts against its host: it failed, or its state could not be known (unknown),
        and it does not ignore errors. The one definition (Nornir's `Result.failed`): the recap, the
        exit code, the retry file, check --slurm's drain and remediate all read it."""
        return self.status in (Status.FAILED, Status.UNKNOWN) and not self.ignored


@dataclass(frozen=True)
class Registration:
    """A value `register:` stored: the task, the variable, the task's type, and the value as the
    tasks after it read it (None for a `no_log` task)."""

    task: str
    name: str
    type: str
    value: object


RECAP = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")  # Ansible's PLAY RECAP
# what one counted task adds to the recap: Ansible's ok includes changed and ignored failures;
# unknown and reboot_pending are gpuconf's own
TALLIES: dict[str, tuple[str, ...]] = {
    "ok": ("ok",), "changed": ("ok", "changed"), "failed": ("failed",), "skipped": ("skipped",),
    "rescued": ("rescued",), "ignored": ("ok", "ignored"), "ignored changed": ("ok", "ignored", "changed"),
    "unknown": ("unknown",), "reboot_pending": ("reboot_pending",), "": (),
}


def tally_of(task: TaskResult) -> str:
    """How the recap counts a task whose count the engine did not decide (its status alone)."""
    if task.counts_as is not None:
        return task.counts_as
    if task.status == Status.FAILED:
        return "ignored" if task.ignored else "failed"
    if task.status == Status.UNREACHABLE and task.ignored:   # ignore_unreachable
        return "ignored"
    return {Status.OK: "ok", Status.CHANGED: "changed", Status.WOULD_CHANGE: "changed", Status.SKIPPED: "skipped",
            Status.UNKNOWN: "unknown", Status.REBOOT_PENDING: "reboot_pending"}.get(task.status, "")


@dataclass
class HostResult(Final):
    host: str
    tasks: list[TaskResult] = field(default_factory=list)
    registered: list[Registration] = field(default_factory=list)  # in the order they were stored
    unreachable: bool = False
    error: str | None = None
    reboot_required: bool = False
    round_trips: int = 0
    connects: int = 0

    def count(self, status: Status) -> int:
        return sum(1 for t in self.tasks if t.status == status)

    def recap(self) -> dict[str, int]:
        """The PLAY RECAP's counts as Ansible's: per task (a loop once), ok includes changed; a
        failure that a block's rescue took is `rescued`, one ignored (ignore_errors) is ok and
        `ignored`; then gpuconf's unknown and reboot_pending."""
        counts = dict.fromkeys((*RECAP, "unknown", "reboot_pending"), 0)
        for task in self.tasks:
            for key in TALLIES[tally_of(task)]:
                counts[key] += 1
        counts["unreachable"] = int(self.unreachable)
        return counts

    @property
    def failed(self) -> bool:
        """A task of the host failed (TaskResult.failed); an unreachable host is `unreachable`."""
        return any(t.failed for t in self.tasks)

    def failed_under(self, strict: bool) -> bool:
        """Failed, or, under --strict, warned: what sets exit bit 4 (and fills the retry file)."""
        return self.failed or (strict and self.warned)

    def unclean(self, strict: bool = False) -> list[TaskResult]:
        """The tasks that keep the host from being clean, in order: the failed ones, the drifted
        ones and, under --strict, the ones with health warnings. remediate drains a host that has
        any; check --slurm drains one by the same tasks (its own rules on top: scheduler/healthcheck.py)."""
        return [t for t in self.tasks if t.failed or t.status == Status.WOULD_CHANGE or (strict and t.warnings)]

    @property
    def warned(self) -> bool:
        return any(t.warnings for t in self.tasks)

    @property
    def drifted(self) -> bool:
        return any(t.status == Status.WOULD_CHANGE for t in self.tasks)

    @property
    def changed(self) -> bool:
        return any(t.status == Status.CHANGED for t in self.tasks)

    @property
    def reboot_pending(self) -> bool:
        return any(t.status == Status.REBOOT_PENDING for t in self.tasks)

    @property
    def not_started(self) -> list[TaskResult]:
        """The tasks (and notified handlers) that SIGINT kept from starting on this host."""
        return [t for t in self.tasks if t.not_run == "interrupted"]

    @property
    def interrupted(self) -> bool:
        """SIGINT came before this host's work was done: it is not converged, whatever ran."""
        return any(t.not_run == "interrupted" for t in self.tasks)


@dataclass(frozen=True)
class RecapLine:
    """One line a section adds at the end of the text recap: `label: text`, the label in `style`."""

    label: str
    style: str  # a style of the text reporter: green, yellow, red, ...
    text: str


class Section(Protocol):
    """What a step after the run's tasks adds to the run's result (gpuconf/engine/after.py): a field
    of the JSON report, lines at the end of the text recap, and bits of the exit code (the scheduler's
    drains and resumes after a check are one). The results and the reporters know them by this shape only."""

    @property
    def key(self) -> str:
        """The JSON report's field."""
        ...

    def report(self) -> JSONValue:
        """The field's value, as JSON types."""
        ...

    def recap(self) -> list[RecapLine]:
        ...

    def exit_bits(self) -> int:
        """Bits it adds to the run's exit code (EXIT_FAILED: someone must look)."""
        ...


@dataclass
class RunResult(Final):
    verb: Verb
    playbook: str
    inventory: str
    started: float
    ended: float = 0.0
    hosts: dict[str, HostResult] = field(default_factory=dict)
    interrupted: bool = False
    detailed_exitcodes: bool = False
    strict: bool = False  # health warnings count as failures
    plays: list[str] = field(default_factory=list)
    deadline: float | None = None  # seconds, from --deadline
    deadline_reached: bool = False  # tasks left were marked unknown
    budget_spent: str = ""  # max_fail_percentage stopped the run: why (the hosts left are not started)
    sections: list[Section] = field(default_factory=list)  # what the steps after the tasks added

    def failed_hosts(self) -> dict[str, HostResult]:
        """The hosts that failed (under --strict, warned too) or were unreachable, in inventory
        order: Nornir's `AggregatedResult.failed_hosts`."""
        return {name: host for name, host in self.hosts.items() if host.unreachable or host.failed_under(self.strict)}

    def seal(self) -> None:
        """The run has ended: from now on every result of it is read-only."""
        for host in self.hosts.values():
            for task in host.tasks:
                for part in [*task.changes, *task.findings]:
                    part._seal()
                object.__setattr__(task, "changes", tuple(task.changes))
                object.__setattr__(task, "findings", tuple(task.findings))
                task._seal()
            object.__setattr__(host, "tasks", tuple(host.tasks))
            object.__setattr__(host, "registered", tuple(host.registered))
            host._seal()
        for section in self.sections:
            if isinstance(section, Final):
                section._seal()
        object.__setattr__(self, "plays", tuple(self.plays))
        object.__setattr__(self, "sections", tuple(self.sections))
        object.__setattr__(self, "hosts", MappingProxyType(dict(self.hosts)))
        self._seal()

    def host(self, name: str) -> HostResult:
        if name not in self.hosts:
            self.hosts[name] = HostResult(name)
        return self.hosts[name]

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        code = EXIT_OK
        for host in self.hosts.values():
            if host.unreachable:
                code |= EXIT_UNREACHABLE
            if host.failed_under(self.strict):
                code |= EXIT_FAILED
            if self.verb == "check" and host.drifted:
                code |= EXIT_DRIFT
            if self.verb == "apply" and self.detailed_exitcodes and host.changed:
                code |= EXIT_DRIFT
            if self.verb == "apply" and host.reboot_pending:
                code |= EXIT_REBOOT_PENDING
        for section in self.sections:
            code |= section.exit_bits()
        return code

