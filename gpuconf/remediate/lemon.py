"""The lemon rule: a node is a lemon when it keeps failing, or when its fault keeps coming back.

Which remediations of a node count (docs/remediate.md, "Failures and lemons"):

* one that failed: its apply failed, or its verification did. The node did not get well.
* one that fixed a fault: the check found a failed health probe, or a task that failed or could
  not tell its state. Something on the node broke and needed an action (a reset, a reboot).
* one that fixed the same drift as the drift fixed last on this node: the same changes planned
  again (the same fingerprint), so the desired state did not change, and something keeps
  undoing it. Only the last fix compares: a playbook rolled back to an earlier version plans
  that version's changes again, and that is the fleet's change too.

Drift fixed for the first time does not count. A new version of the playbook, its roles or its
variables makes every node of the fleet drift once: counting that would make the whole fleet
lemons after a few playbook changes in a week. Nor does what applied nothing: verified clean,
skipped busy, a lemon drain, an interrupted run, a node left to someone else's drain.
"""
from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuconf.remediate.history import (
    DRIFT,
    FAILED,
    FOREIGN,
    HARDWARE,
    INTERRUPTED,
    LEMON,
    RESUMED,
    SKIPPED_BUSY,
    VERIFIED,
    Record,
    cause_of,
)
from gpuconf.remediate.plan import duration_text
from gpuconf.scheduler.interface import LEMON_PREFIX, PREFIX, reason_text

UNCOUNTED = {
    VERIFIED: "found clean: nothing applied",
    SKIPPED_BUSY: "jobs still running: nothing applied",
    LEMON: "a lemon drain: nothing applied",
    INTERRUPTED: "interrupted, then closed",
    FOREIGN: "left to someone else's drain",
    HARDWARE: "a hardware hold: the hardware's fault, for a person and an RMA, not the node's to keep failing",
    "reported": "restart_app reported: the node stayed in service",
}


@dataclass(frozen=True)
class Judged:
    """One remediation as the lemon rule sees it."""

    record: Record
    counted: bool
    why: str  # the history prints it
    label: str = ""  # counted: the word the lemon's drain reason gives it (failed, fault, drift back)


def judge(records: Sequence[Record]) -> list[Judged]:
    """Each remediation of one host, oldest first: whether it counts towards a lemon, and why."""
    last: Record | None = None  # the latest drift fixed before this remediation
    judged = []
    for record in sorted(records, key=lambda r: (r.started, r.id)):
        judged.append(_judge(record, last))
        if record.outcome == RESUMED and _cause(record) == DRIFT:
            last = record
    return judged


def _judge(record: Record, last: Record | None) -> Judged:
    what = record.finding.removeprefix(PREFIX).strip()
    if record.open:
        return Judged(record, False, "open: a run stopped in it, the next run carries it on")
    if record.outcome == FAILED:
        return Judged(record, True, f"counts: the remediation failed ({record.detail or what})", "failed")
    if record.outcome != RESUMED:
        return Judged(record, False, UNCOUNTED.get(record.outcome or "", record.outcome or ""))
    if _cause(record) != DRIFT:
        return Judged(record, True, f"counts: a fault needed fixing ({what})", "fault")
    if record.fingerprint and last is not None and last.fingerprint == record.fingerprint:
        return Judged(record, True, f"counts: the same drift came back (fixed {_day(last.started, True)})",
                      "drift back")
    if not record.fingerprint:
        return Judged(record, False, "drift, fixed (recorded without the changes' fingerprint)")
    return Judged(record, False, "drift new to this node (a change of the playbook, its roles or variables), fixed")


def _cause(record: Record) -> str:
    return record.cause or cause_of(record.finding)


def _day(at: float, hour: bool = False) -> str:
    when = datetime.datetime.fromtimestamp(at, datetime.UTC)
    return f"{when:%m-%d %H:%M} UTC" if hour else f"{when:%m-%d}"


@dataclass(frozen=True)
class LemonRule:
    """--lemon-after counted remediations within --lemon-window make a lemon; 0: never."""

    after: int = 3
    window: float = 7 * 86400.0

    def counted(self, records: Iterable[Record], now: float) -> list[Judged]:
        return [j for j in judge(list(records)) if j.counted and j.record.started >= now - self.window]

    def is_lemon(self, records: Iterable[Record], now: float) -> bool:
        return self.after > 0 and len(self.counted(records, now)) >= self.after

    def reason(self, records: Iterable[Record], now: float) -> str:
        counted = self.counted(records, now)
        days = ", ".join(f"{_day(j.record.started)} {j.label}" for j in counted[-self.after:])
        return reason_text(f"{LEMON_PREFIX} ({len(counted)} remediations in {duration_text(self.window)}: {days})")
