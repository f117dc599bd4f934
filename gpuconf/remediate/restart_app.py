"""restart_app: NVIDIA's action for a fault of the application, not of the node (Xid catalog
RESTART_APP: "the application restarts; the GPU needs no action"). The node stays in service and
the finding is reported (and recorded, once per occurrence). When it comes back within
--restart-app-window (default 1h), the GPU is what keeps failing the applications: it escalates to
reset_gpu, and from there the ladder goes on (ladder.py).

A repeat is a new occurrence seen by a later run: the finding's count this boot went up since the
last report of the same code on the same GPU, or the node booted since (the count started over).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gpuconf.remediate.decision import RESET, Decision
from gpuconf.remediate.history import Record

REPORTED = "reported"  # the history's outcome of a restart_app report: the node stayed in service
DEFAULT_WINDOW = "1h"


def key(decision: Decision) -> str:
    return f"{decision.code or decision.row} {decision.bus_id or 'GPU ?'}"


def detail(decision: Decision) -> str:
    """How a report is recorded: the key, then the count (`Xid 94 0000:3b:00.0 x2`)."""
    return f"{key(decision)} x{decision.count if decision.count is not None else '?'}"


def _count(record: Record, prefix: str) -> int | None:
    tail = record.detail[len(prefix):]
    return int(tail) if tail.isdigit() else None


def judge(records: Sequence[Record], decision: Decision, now: float, window: float) -> tuple[bool, Decision | None]:
    """(a new occurrence to record, the escalated decision when it repeats within the window)."""
    prefix = f"{key(decision)} x"
    reports = sorted((r for r in records if r.outcome == REPORTED and r.detail.startswith(prefix)),
                     key=lambda r: (r.started, r.id))
    if not reports:
        return True, None
    seen = _count(reports[-1], prefix)
    if decision.count is None or seen is None:  # no count to tell a repeat by: reported once, not escalated
        return False, None
    new = decision.count != seen
    if not new:
        return False, None
    recent = [r for r in reports if r.started >= now - window]
    if not recent:
        return True, None
    escalated = dataclasses.replace(
        decision, action="reset_gpu", kind=RESET,
        row=f"restart_app repeated within the window ({len(recent) + 1} occurrences; {decision.row})",
        buses=tuple(b for b in (decision.bus_id,) if b))
    return True, escalated
