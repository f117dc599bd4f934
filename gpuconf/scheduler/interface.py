"""The scheduler gpuconf works through: its nodes, drain, resume, reboot, and whose reason a node has.

Two parts of gpuconf take nodes out of service and put them back, and both go through this
interface only: `gpuconf remediate` (gpuconf/remediate/) and `check --slurm`'s step after the
run (gpuconf/scheduler/step.py). Slurm is the one implementation (gpuconf/scheduler/slurm.py); another
scheduler fits beside it without a change to the engine (docs/architecture.md shows where
Kubernetes' cordon, drain and taints would plug in).

`Node` is the one model of a node. Every reason gpuconf sets starts with `gpuconf:` (PREFIX): that
prefix is how a reason is known to be gpuconf's own (`Node.ours`), whatever the node's state.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from gpuconf.errors import GpuconfError

PREFIX = "gpuconf:"
# drains nobody resumes automatically: they wait for a person or a remediate run that verifies the node
FAILED_PREFIX = f"{PREFIX} remediation failed:"  # set by remediate when a node fails its verification
LEMON_PREFIX = f"{PREFIX} lemon"  # set by remediate for a node remediated too often
# set by remediate for a fault that needs the hardware looked at (an RMA): nothing of gpuconf's ever
# resumes it, not even a clean check; only a person does (docs/remediate.md, "Hardware holds")
HARDWARE_PREFIX = f"{PREFIX} hardware:"
HELD = (FAILED_PREFIX.rstrip(":"), LEMON_PREFIX, HARDWARE_PREFIX)
REASON_MAX = 120  # characters of a reason gpuconf sets: one line a person reads in sinfo -R

# base states that are out of service whatever the flags say
DOWN_STATES = {"DOWN", "ERROR", "FUTURE", "UNKNOWN"}
# flags that take a node out of service (or are about to)
OUT_FLAGS = {"DRAIN", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN",
             "POWERING_UP", "MAINTENANCE", "NOT_RESPONDING", "FAIL", "INVALID_REG"}
REBOOT_FLAGS = {"REBOOT_REQUESTED", "REBOOT_ISSUED"}
BUSY_STATES = {"ALLOCATED", "MIXED"}

# a scheduler's client program run somewhere (here, or on a host over the run's connection):
# argv and a timeout in, (exit status, stdout, stderr) out
Command = Callable[[list[str], float], "tuple[int, str, str]"]


class SchedulerError(GpuconfError):
    """A scheduler command failed or could not run: the node's state is not known or not changed."""

    exit_bit = 4


@dataclass(frozen=True)
class Node:
    """One node as the scheduler sees it."""

    name: str
    state: str  # as the scheduler prints it, e.g. IDLE, MIXED+DRAIN, DOWN*+DRAIN+REBOOT_ISSUED
    reason: str | None = None
    stamp: str | None = None  # who set the reason, and when: "root@2026-12-04T08:00:00"

    @property
    def base(self) -> str:
        return self.state.split("+")[0].rstrip("*~#!%$@^-")

    @property
    def flags(self) -> frozenset[str]:
        flags = set(self.state.split("+")[1:])
        if self.state.split("+")[0].endswith("*"):
            flags.add("NOT_RESPONDING")
        return frozenset(flags)

    @property
    def in_service(self) -> bool:
        """Accepts jobs: counts for nothing against --max-unavailable."""
        return self.base not in DOWN_STATES and not self.flags & OUT_FLAGS

    @property
    def drained(self) -> bool:
        """Drained or down: the health check's sense of a node it must not drain over someone else."""
        return "DRAIN" in self.flags or self.state.startswith(("DRAIN", "DOWN"))

    @property
    def busy(self) -> bool:
        """Jobs still run (or are completing) on it."""
        return self.base in BUSY_STATES or "COMPLETING" in self.flags

    @property
    def rebooting(self) -> bool:
        return bool(self.flags & REBOOT_FLAGS)

    @property
    def ours(self) -> bool:
        """The reason is gpuconf's (the check's or remediate's): it starts with `gpuconf:`."""
        return self.reason is not None and self.reason.startswith(PREFIX)

    @property
    def out_by_gpuconf(self) -> bool:
        """Out of service under gpuconf's own reason."""
        return not self.in_service and self.ours

    @property
    def foreign(self) -> bool:
        """Out of service for a reason gpuconf did not set (a person, another tool, a crash)."""
        return not self.in_service and not self.ours

    @property
    def held(self) -> bool:
        """`remediation failed`, `lemon` or `hardware`: never resumed, never overwritten, automatically."""
        return self.reason is not None and self.reason.startswith(HELD)

    def keeps_drain(self, mine: bool = False) -> bool:
        """The one rule of "drain unless drained already": a drain that is not the caller's own stays as
        it is, its reason kept (a person's, remediate's, another check's), and a held one even when it
        is. `mine`: the caller set this drain (the check's memory says so); the gate owns no drain."""
        return self.drained and (self.held or not mine)

    @property
    def hardware_hold(self) -> bool:
        """`gpuconf: hardware: ...`: not even a remediate whose check is clean resumes it."""
        return self.reason is not None and self.reason.startswith(HARDWARE_PREFIX)


class Scheduler(Protocol):
    """What gpuconf needs from a scheduler. Reasons start with `gpuconf: `."""

    name: str

    def nodes(self, names: Iterable[str]) -> dict[str, Node]:
        """The named nodes' states; a name the scheduler does not know is left out."""
        ...

    def drain(self, node: str, reason: str, exact: bool = False) -> None:
        """No new work on it; running work goes on to its end. The reason is kept as `reason_text` gives
        it, or, `exact`, as given (a person's words set back)."""
        ...

    def resume(self, node: str) -> None:
        """Back in service (the caller has checked that the drain is gpuconf's own)."""
        ...

    def reboot(self, node: str) -> None:
        """Reboot it (drained by gpuconf, idle); it stays out of service after the reboot. The
        scheduler may write its own words into the reason meanwhile (`rewritten_by_reboot`): gpuconf
        sets its reason again once the node is back."""
        ...

    def rewritten_by_reboot(self, reason: str | None, ours: str) -> bool:
        """`reason` is what the scheduler's own reboot made of gpuconf's reason `ours`."""
        ...

    def reason_before_reboot(self, reason: str | None) -> str | None:
        """The reason as it was before the scheduler's reboot added its words to it (None: none added)."""
        ...


def reason_text(reason: str) -> str:
    """A reason as the scheduler will keep it: one line, at most REASON_MAX characters."""
    text = " ".join(reason.split())
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 1] + "…"
