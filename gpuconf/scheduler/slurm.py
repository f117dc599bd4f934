"""Slurm behind the `Scheduler` interface: `scontrol`, run where a `Command` runs it.

`gpuconf remediate` runs scontrol on the machine gpuconf runs on (a login or admin node:
`SLURM_CONF` and munge as for any `scontrol`); `check --slurm` runs it on each host through
the run's own connection, as slurmd's health check would (gpuconf/scheduler/step.py). Each
call is bounded in time.

Slurm 22.05 verbs used (`man scontrol`): `show node`, `update NodeName= State=DRAIN Reason=`,
`update ... State=RESUME`, and `reboot NODE` on a node gpuconf has drained and whose jobs have
ended. Neither ASAP nor nextstate=: "The node's DRAIN state flag will be cleared if the reboot
was ASAP, nextstate=resume or down", so with ASAP or nextstate=RESUME the node would be back in
service before gpuconf has verified it, and nextstate=DOWN would leave it DOWN rather than
drained. A plain reboot keeps the drain. Nor `reason=`: slurmctld sets the node's reason to it,
whoever set the one before, where a reboot without it keeps the reason the node has and appends
" : reboot issued", or replaces a reason that holds those words already with the bare words
(REBOOT_WORDS below): the remediation loop sets its reason again after every reboot. gpuconf reads the reason right
before it reboots and never reboots a node whose reason is not its own; without `reason=`, an
operator who drains in between keeps their words.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from gpuconf.facts.local import run_local as run_program
from gpuconf.scheduler.interface import Command, Node, SchedulerError, reason_text

# Slurm 22.05's slurmd kills a HealthCheckProgram after 60 s (run_script_health_check: max_wait
# 60 * 1000 ms; `man slurm.conf`, HealthCheckProgram). The tasks get DEADLINE, the step after
# them STEP_BUDGET, and the rest is left for starting Python and exiting.
DEADLINE = 35.0  # --deadline under --slurm
STEP_BUDGET = 15.0  # seconds for the scheduler step of one host (scontrol and the remembered state)
SCONTROL_TIMEOUT = 10
REASON_STAMP = re.compile(r"\s*\[([^\[\]@]*@[^\[\]]*)\]\s*$")  # Slurm appends " [user@time]"
# What slurmctld 22.05.8 writes into a node's reason when it reboots it (set_node_reboot_reason,
# src/slurmctld/node_mgr.c): " : <words>" appended, or, when the reason holds the words already, the
# bare words in its place. So a second plain reboot turns "gpuconf: ... : reboot issued" into
# "reboot issued", and a node that misses ResumeTimeout gets " : reboot timed out".
REBOOT_WORDS = ("reboot issued", "reboot complete", "reboot timed out")


def run_local(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """A Slurm client command on this machine, bounded in time (its process group killed at the
    timeout: gpuconf/facts/local.py)."""
    try:
        done = run_program(argv, timeout)
    except FileNotFoundError:
        raise SchedulerError(f"{argv[0]} not found: gpuconf remediate runs where the Slurm client commands work "
                             "(install slurm-client; SLURM_CONF names the cluster)") from None
    except OSError as exc:
        raise SchedulerError(f"{argv[0]}: {exc.strerror or exc}") from None
    if done.timed_out:
        raise SchedulerError(f"{shlex.join(argv)}: no answer within {timeout:g} s (is slurmctld up?)")
    return done.rc, done.out.decode("utf-8", "replace"), done.err.decode("utf-8", "replace")


class Slurm:
    """The Slurm cluster, through scontrol where `run` runs it (this machine by default)."""

    name = "slurm"

    def __init__(self, run: Command = run_local, timeout: float = SCONTROL_TIMEOUT):
        self._run = run
        self.timeout = timeout

    def _scontrol(self, *args: str) -> str:
        argv = ["scontrol", *args]
        rc, out, err = self._run(argv, self.timeout)
        if rc != 0:
            raise SchedulerError(f"{shlex.join(argv)} failed (exit {rc}): {last_line(err or out)}")
        return out

    def nodes(self, names: Iterable[str]) -> dict[str, Node]:
        wanted = list(dict.fromkeys(names))
        if len(wanted) == 1:
            # one node (the health check on each node of the cluster, every interval): ask for it
            # alone, not for the whole cluster's state
            rc, out, err = self._run(["scontrol", "show", "node", wanted[0]], self.timeout)
            if rc != 0 and re.search(r"\bnot found\b", err or out, re.IGNORECASE):
                return {}
            if rc != 0:
                raise SchedulerError(f"scontrol show node {shlex.quote(wanted[0])} failed (exit {rc}): "
                                     f"{last_line(err or out)}")
            return {n.name: n for n in parse_nodes(out) if n.name in wanted}
        return {n.name: n for n in parse_nodes(self._scontrol("show", "node")) if n.name in wanted}

    def drain(self, node: str, reason: str, exact: bool = False) -> None:
        words = reason if exact else reason_text(reason)
        self._scontrol("update", f"NodeName={node}", "State=DRAIN", f"Reason={words}")

    def resume(self, node: str) -> None:
        self._scontrol("update", f"NodeName={node}", "State=RESUME")

    def reboot(self, node: str) -> None:
        self._scontrol(*reboot_args(node))

    def rewritten_by_reboot(self, reason: str | None, ours: str) -> bool:
        return rewritten_by_reboot(reason, ours)

    def reason_before_reboot(self, reason: str | None) -> str | None:
        return reason_before_reboot(reason)


def reason_before_reboot(reason: str | None) -> str | None:
    """The reason a node had before slurmctld's reboot appended its words (`X : reboot issued` -> X);
    None when the reason has none of them, or is nothing but them (the words before are lost)."""
    if reason is None:
        return None
    base = reason
    while True:
        head, sep, tail = base.rpartition(" : ")
        if not sep or tail not in REBOOT_WORDS:
            break
        base = head
    return base if base != reason and base not in REBOOT_WORDS else None


def rewritten_by_reboot(reason: str | None, ours: str) -> bool:
    """`reason` is what slurmctld's reboot made of gpuconf's `ours`: `ours : reboot issued` (and
    further words), or the bare words that replaced it (REBOOT_WORDS)."""
    if reason is None or not ours:
        return False
    tail = reason[len(ours):] if reason.startswith(ours) else " : " + reason
    parts = tail.split(" : ")
    return len(parts) > 1 and parts[0] == "" and all(part in REBOOT_WORDS for part in parts[1:])


def last_line(text: str) -> str:
    said = text.strip().splitlines()
    return said[-1] if said else "no message"


def reboot_args(node: str) -> list[str]:
    """`scontrol reboot` as remediation asks for it, the node drained and idle: it reboots now, and
    comes back still drained with the reason it had (see the module's docstring for why neither
    ASAP nor reason=)."""
    return ["reboot", node]


def parse_show_node(text: str) -> Node:
    """`scontrol show node NAME` (multi-line or -o): the state and the reason, without its stamp."""
    name = state = ""
    reason = stamp = None
    for line in text.splitlines():
        stripped = line.strip()
        tail = None
        if stripped.startswith("Reason="):
            tail, stripped = stripped[len("Reason="):], ""
        elif " Reason=" in stripped:  # the one-line form: the reason runs to the end of the line
            stripped, _, tail = stripped.partition(" Reason=")
        if tail is not None:
            found = REASON_STAMP.search(tail)
            stamp = found.group(1) if found else None
            reason = REASON_STAMP.sub("", tail) or None
        for token in stripped.split():
            key, _, value = token.partition("=")
            if key == "NodeName":
                name = value
            elif key == "State":
                state = value
    if not name or not state:
        raise ValueError(f"not the output of scontrol show node: {text.strip()[:200]!r}")
    return Node(name, state, reason, stamp if reason else None)


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
            nodes.append(parse_show_node("\n".join(block)))
        except ValueError as exc:
            raise SchedulerError(str(exc)) from None
    return nodes
