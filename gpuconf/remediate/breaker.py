"""The circuit breaker: many nodes failing at once point at a playbook, a driver or a fabric, not
at the nodes, and taking them all out of service would be the outage.

`--breaker N|P%` within `--breaker-window`: each node that needed a hardware action (a GPU reset,
a reboot for its fault, an IMEX restart: resumed after it, its detail says `recovered:`), ended in
a hardware hold or failed its verification counts, across runs (the history holds them). Once N
have, the breaker trips: the loop takes no node out of service any more, and the trip is written to
the history, so every later run stops there too, until a person resets it (`gpuconf remediate
--reset-breaker`). Only what ended after the last reset counts.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpuconf.errors import UsageError
from gpuconf.remediate.history import FAILED, HARDWARE, RESET, RESUMED, TRIPPED, History, Record

COUNTED = (FAILED, HARDWARE)
RECOVERED = "recovered:"  # a resumed remediation's detail when a node action fixed it (ladder.Result)


def counts(record: Record) -> bool:
    return record.outcome in COUNTED or (record.outcome == RESUMED and record.detail.startswith(RECOVERED))


@dataclass(frozen=True)
class Breaker:
    """--breaker: a count, or a percentage of the nodes in scope (rounded down, at least 1); off: None."""

    count: int | None = None
    percent: float | None = None
    window: float = 86400.0

    @property
    def on(self) -> bool:
        return self.count is not None or self.percent is not None

    def limit(self, total: int) -> int:
        if self.count is not None:
            return self.count
        return max(1, math.floor(total * (self.percent or 0) / 100))

    def __str__(self) -> str:
        return str(self.count) if self.count is not None else f"{self.percent:g}%"


def parse_breaker(text: str | None, window: float) -> Breaker:
    if text is None:
        return Breaker(window=window)
    value = text.strip()
    try:
        if value.endswith("%"):
            percent = float(value[:-1])
            if 0 < percent <= 100:
                return Breaker(percent=percent, window=window)
        elif int(value) >= 1:
            return Breaker(count=int(value), window=window)
    except ValueError:
        pass
    raise UsageError(f"--breaker '{text}': give a count of at least 1 (2) or a percentage (10%)")


@dataclass(frozen=True)
class State:
    tripped: str | None  # the trip's detail while tripped, else None
    since: float  # the last reset (0: never): only what ended after it counts


def state(events: list[tuple[float, str, str]]) -> State:
    """From the history's breaker events, oldest first: tripped until the next reset."""
    tripped, since = None, 0.0
    for at, event, detail in events:
        if event == TRIPPED:
            tripped = detail or "tripped"
        elif event == RESET:
            tripped, since = None, at
    return State(tripped, since)


def counted(records: list[Record], hosts: set[str], since: float, window: float, now: float) -> list[Record]:
    """The latest hardware action, hold or failed verification of each host in scope within the
    window and after `since`: a node counts once, however often it failed."""
    start = max(since, now - window)
    latest: dict[str, Record] = {}
    for record in records:
        ended = record.ended if record.ended is not None else record.started
        if record.host in hosts and counts(record) and ended >= start:
            latest[record.host] = record
    return list(latest.values())


class Fuse:
    """The breaker over one run: how many more nodes may be taken out before it trips."""

    def __init__(self, breaker: Breaker, history: History, hosts: set[str],
                 clock: Callable[[], float] = time.time):
        self.breaker, self.history, self.hosts, self.clock = breaker, history, hosts, clock
        self.limit = breaker.limit(len(hosts))

    def tripped(self) -> str | None:
        """Why the breaker is open (tripped now or by an earlier run), or None; trips it when the count is reached."""
        if not self.breaker.on:
            return None
        now = self.clock()
        current = state(self.history.breaker_events())
        if current.tripped is not None:
            return current.tripped
        nodes = counted(self.history.records(), self.hosts, current.since, self.breaker.window, now)
        if len(nodes) < self.limit:
            return None
        names = ", ".join(sorted(r.host for r in nodes))
        why = (f"{len(nodes)} node(s) needed a hardware action or failed verification "
               f"({names}), --breaker {self.breaker}")
        self.history.breaker_event(TRIPPED, why, now)
        return why

    def room(self) -> int | None:
        """How many more nodes may fail before it trips (None: no breaker)."""
        if not self.breaker.on:
            return None
        current = state(self.history.breaker_events())
        nodes = counted(self.history.records(), self.hosts, current.since, self.breaker.window, self.clock())
        return max(0, self.limit - len(nodes))
