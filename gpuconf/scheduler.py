"""The scheduler a remediation works through: which nodes are in service, drain, resume, reboot.

`gpuconf remediate` takes nodes out of service and puts them back only through this
interface, so that another scheduler fits beside Slurm (docs/remediate.md says how
Kubernetes' cordon, drain and taints map onto it). The Slurm implementation runs the Slurm
client commands on the machine gpuconf runs on (a login or admin node: `SLURM_CONF` and
munge as for any `scontrol`), each under a timeout.

Every reason gpuconf sets starts with `gpuconf: ` (gpuconf.slurm.PREFIX): that prefix is
how a drain is known to be gpuconf's own. Slurm 22.05 verbs used (`man scontrol`):
`show node`, `update NodeName= State=DRAIN Reason=`, `update ... State=RESUME`, and
`reboot NODE` on a node gpuconf has drained and whose jobs have ended. Neither ASAP
nor nextstate=: "The node's DRAIN state flag will be cleared if the reboot was ASAP,
nextstate=resume or down", so with ASAP or nextstate=RESUME the node would be back in service
before gpuconf has verified it, and nextstate=DOWN would leave it DOWN rather than drained. A
plain reboot keeps the drain and its reason. Nor `reason=`: slurmctld sets the node's reason to
it, whoever set the one before, where a reboot without it keeps the reason the node has and
appends " : reboot issued" (seen on the lab's Slurm 22.05.8). gpuconf reads the reason right
before it reboots and never reboots a node whose reason is not its own; without `reason=`, an
operator who drains in between keeps their words.
"""
from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from gpuconf.errors import GpuconfError
from gpuconf.slurm import PREFIX, REASON_MAX, SCONTROL_TIMEOUT, parse_show_node

# base states that are out of service whatever the flags say
DOWN_STATES = {"DOWN", "ERROR", "FUTURE", "UNKNOWN"}
# flags that take a node out of service (or are about to)
OUT_FLAGS = {"DRAIN", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN",
             "POWERING_UP", "MAINTENANCE", "NOT_RESPONDING", "FAIL", "INVALID_REG"}
REBOOT_FLAGS = {"REBOOT_REQUESTED", "REBOOT_ISSUED"}
BUSY_STATES = {"ALLOCATED", "MIXED"}


class SchedulerError(GpuconfError):
    """A scheduler command failed or could not run: the node's state is not known or not changed."""

    exit_bit = 4


@dataclass(frozen=True)
class Node:
    """One node as the scheduler sees it."""

    name: str
    state: str  # as the scheduler prints it, e.g. MIXED+DRAIN, DOWN*+DRAIN+REBOOT_ISSUED
    reason: str | None = None

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
    def busy(self) -> bool:
        """Jobs still run (or are completing) on it."""
        return self.base in BUSY_STATES or "COMPLETING" in self.flags

    @property
    def rebooting(self) -> bool:
        return bool(self.flags & REBOOT_FLAGS)

    @property
    def ours(self) -> bool:
        """Out of service with a reason gpuconf set."""
        return not self.in_service and self.reason is not None and self.reason.startswith(PREFIX)

    @property
    def foreign(self) -> bool:
        """Out of service for a reason gpuconf did not set (a person, another tool, a crash)."""
        return not self.in_service and not self.ours


class Scheduler(Protocol):
    """What remediation needs from a scheduler. Reasons start with `gpuconf: `."""

    name: str

    def nodes(self, names: Iterable[str]) -> dict[str, Node]:
        """The named nodes' states; a name the scheduler does not know is left out."""
        ...

    def drain(self, node: str, reason: str) -> None:
        """No new work on it; running work goes on to its end."""
        ...

    def resume(self, node: str) -> None:
        """Back in service (the caller has checked that the drain is gpuconf's own)."""
        ...

    def reboot(self, node: str) -> None:
        """Reboot it (drained by gpuconf, idle); it stays out of service after the reboot, and keeps
        the reason it has (gpuconf's own drain)."""
        ...


def reason_text(reason: str) -> str:
    """A reason as the scheduler will keep it: one line, at most REASON_MAX characters."""
    text = " ".join(reason.split())
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 1] + "…"


Runner = Callable[[list[str], float], "tuple[int, str, str]"]


def run_local(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """A Slurm client command on this machine, bounded in time."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise SchedulerError(f"{argv[0]} not found: gpuconf remediate runs where the Slurm client commands work "
                             "(install slurm-client; SLURM_CONF names the cluster)") from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"{shlex.join(argv)}: no answer within {timeout:g} s (is slurmctld up?)") from None
    return done.returncode, done.stdout, done.stderr


class Slurm:
    """The Slurm cluster, through scontrol on this machine."""

    name = "slurm"

    def __init__(self, run: Runner = run_local, timeout: float = SCONTROL_TIMEOUT):
        self._run = run
        self.timeout = timeout

    def _scontrol(self, *args: str) -> str:
        argv = ["scontrol", *args]
        rc, out, err = self._run(argv, self.timeout)
        if rc != 0:
            said = (err or out).strip().splitlines()
            raise SchedulerError(f"{shlex.join(argv)} failed (exit {rc}): {said[-1] if said else 'no message'}")
        return out

    def nodes(self, names: Iterable[str]) -> dict[str, Node]:
        wanted = set(names)
        return {n.name: n for n in parse_nodes(self._scontrol("show", "node")) if n.name in wanted}

    def drain(self, node: str, reason: str) -> None:
        self._scontrol("update", f"NodeName={node}", "State=DRAIN", f"Reason={reason_text(reason)}")

    def resume(self, node: str) -> None:
        self._scontrol("update", f"NodeName={node}", "State=RESUME")

    def reboot(self, node: str) -> None:
        self._scontrol(*reboot_args(node))


def reboot_args(node: str) -> list[str]:
    """`scontrol reboot` as remediation asks for it, the node drained and idle: it reboots now, and
    comes back still drained with the reason it had (see the module's docstring for why neither
    ASAP nor reason=)."""
    return ["reboot", node]


def parse_nodes(text: str) -> list[Node]:
    """`scontrol show node`: one block per node, each starting with NodeName= (the reason has a
    line of its own there, which the one-line form cannot promise)."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.lstrip().startswith("NodeName="):
            blocks.append([])
        if blocks and line.strip():
            blocks[-1].append(line)
    nodes = []
    for block in blocks:
        try:
            state = parse_show_node("\n".join(block))
        except ValueError as exc:
            raise SchedulerError(str(exc)) from None
        nodes.append(Node(state.name, state.state, state.reason))
    return nodes
