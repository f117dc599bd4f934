"""The pure rules of a remediation: the budget, what to do with each node, the waves, and
how a journal left by a stopped run is carried on (the lemon rule is lemon.py's). No I/O here: the loop
(loop.py) feeds these what the check, the scheduler and the history said.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuconf.errors import UsageError
from gpuconf.remediate.decision import Decision
from gpuconf.remediate.history import Record
from gpuconf.scheduler.interface import FAILED_PREFIX, LEMON_PREFIX, PREFIX, Node, reason_text

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass(frozen=True)
class Budget:
    """--max-unavailable: a count, or a percentage of the nodes in scope."""

    count: int | None = None
    percent: float | None = None

    def limit(self, total: int) -> int:
        """Nodes that may be out of service at once: a percentage rounds down, but is at least 1
        (as Ansible's `serial` does), so that a small scope can still be remediated."""
        if self.count is not None:
            return self.count
        return max(1, math.floor(total * (self.percent or 0) / 100))

    def __str__(self) -> str:
        return str(self.count) if self.count is not None else f"{self.percent:g}%"


def parse_budget(text: str) -> Budget:
    value = text.strip()
    try:
        if value.endswith("%"):
            percent = float(value[:-1])
            if 0 < percent <= 100:
                return Budget(percent=percent)
        elif int(value) >= 1:
            return Budget(count=int(value))
    except ValueError:
        pass
    raise UsageError(f"--max-unavailable '{text}': give a count of at least 1 (2) or a percentage (10%)")


def parse_duration(text: str, flag: str) -> float:
    """90, 90s, 15m, 2h, 7d, 1w: seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"{flag} '{text}': give a duration like 90s, 15m, 2h or 7d")
    return float(match.group(1)) * UNITS[match.group(2) or "s"]


def duration_text(seconds: float) -> str:
    for unit in ("d", "h", "m"):
        if seconds >= UNITS[unit] and seconds % UNITS[unit] == 0:
            return f"{int(seconds // UNITS[unit])}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True)
class Verdict:
    """What the read-only check (the playbook and the health gate) said about one host."""

    host: str
    clean: bool
    finding: str = ""  # `gpuconf: <first finding>`, when not clean
    unreachable: bool = False
    cause: str = ""  # when not clean: "drift" (nothing failed, only drift) or "fault" (gpuconf.remediate.history)
    fingerprint: str = ""  # of the changes planned for the drift: the same drift, the same fingerprint
    decision: Decision | None = None  # the one recovery action the failed findings ask for (decision.py)
    changes: tuple[str, ...] = ()  # when drifted: what the apply would change, in its order (remediate --check)
    gpus: int | None = None  # the GPUs the check's findings named (None: not known, the host unreachable)


# what the loop does with a node
NOTHING = "in_sync"        # in service and clean
FOREIGN = "foreign"        # out of service for a reason gpuconf did not set: never touched
RESUME = "resume"          # gpuconf's own drain, and the check is clean now: verified, resume it
REMEDIATE = "remediate"    # drifted or unhealthy: drain, wait, apply, verify, resume
LEMON = "lemon"            # needs remediating, but was remediated too often: drained as a lemon
STILL_LEMON = "still_lemon"  # already drained as a lemon, and still one
UNREACHABLE = "unreachable"  # the check could not reach it: nothing is decided about it
NOT_IN_SCHEDULER = "not_in_scheduler"
HARDWARE_HELD = "hardware_held"  # drained as a hardware hold: a person's, whatever the check says now


def decide(verdict: Verdict, node: Node | None, lemon: bool) -> str:
    """What to do with one node, from the check's verdict, its scheduler state and the lemon rule."""
    if node is None:
        return NOT_IN_SCHEDULER
    if node.foreign:
        return FOREIGN
    if node.out_by_gpuconf and node.hardware_hold:
        return HARDWARE_HELD
    if verdict.unreachable:
        return UNREACHABLE
    if node.out_by_gpuconf and (node.reason or "").startswith(LEMON_PREFIX) and lemon:
        return STILL_LEMON
    if verdict.clean:
        return RESUME if node.out_by_gpuconf else NOTHING
    return LEMON if lemon else REMEDIATE


def replay(record: Record, node: Node | None) -> str | None:
    """A remediation a stopped run left open: the outcome to close it with now, or None to carry
    it on (the node is still out of service under gpuconf's reason: this run finishes it).

    Closed here: the node is back in service (the run stopped after `resume`, or before its drain
    took effect), or someone else's drain replaced gpuconf's (left to them: `foreign`)."""
    if node is not None and node.out_by_gpuconf:
        return None
    if node is not None and node.foreign:
        return FOREIGN
    if record.step in ("resume", "undrain"):
        return "resumed" if record.step == "resume" else "skipped_busy"
    return "interrupted"


@dataclass
class Wave:
    number: int
    nodes: list[str]


def next_wave(pending: Sequence[str], states: dict[str, Node], scope: Iterable[str], limit: int,
              number: int) -> Wave:
    """The next nodes to work on: those already out of service under gpuconf's reason cost
    nothing; the others are taken while the nodes out of service in scope (for any reason,
    gpuconf's or not) stay within `limit`."""
    out = sum(1 for name in scope if name in states and not states[name].in_service)
    free = limit - out
    wave = []
    for name in pending:
        node = states.get(name)
        if node is not None and not node.in_service:
            wave.append(name)
        elif free > 0:
            wave.append(name)
            free -= 1
    return Wave(number, wave)


def first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def failed_reason(why: str) -> str:
    return reason_text(f"{FAILED_PREFIX} {first_line(why).removeprefix(PREFIX).strip()}")
