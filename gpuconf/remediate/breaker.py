"""The circuit breaker: many nodes failing at once point at a playbook, a driver or a fabric, not
at the nodes, and taking them all out of service would be the outage.

`--breaker N`, `P%` or both (`P%,N`: the stricter wins, as NVSentinel's share and maxNodes) within
`--breaker-window`: each node of the fleet that needed a hardware action (a GPU reset, a reboot for
its fault, an IMEX restart: resumed after it, its detail says `recovered:`), ended in a hardware hold
or failed its verification counts, across runs and whatever their scope (the history holds them);
the share is of the nodes with GPUs that the history has seen. Once the bound is reached, the
breaker trips: the loop takes no node out of service any more, and the trip is written to the
history, so every later run stops there too, with or without --breaker, until a person resets it
(`gpuconf remediate --reset-breaker`). Only what ended after the last reset counts.
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
    """It needed a hardware action: it was held or failed, or its journal has the action it took (set
    before its first node action, whatever came after: verified, a person's drain, an interrupt)."""
    return record.outcome in COUNTED or bool(record.action) or \
        (record.outcome == RESUMED and record.detail.startswith(RECOVERED))


@dataclass(frozen=True)
class Breaker:
    """--breaker: a count, a share of the fleet's GPU nodes (rounded down, at least 1), or both (the
    stricter wins); off: neither."""

    count: int | None = None
    percent: float | None = None
    window: float = 86400.0

    @property
    def on(self) -> bool:
        return self.count is not None or self.percent is not None

    def limit(self, total: int) -> int:
        bounds = [self.count] if self.count is not None else []
        if self.percent is not None:
            bounds.append(max(1, math.floor(total * self.percent / 100)))
        return min(bounds)

    def __str__(self) -> str:
        parts = ([f"{self.percent:g}%"] if self.percent is not None else []) + \
            ([str(self.count)] if self.count is not None else [])
        return ",".join(parts)


def parse_breaker(text: str | None, window: float) -> Breaker:
    if text is None:
        return Breaker(window=window)
    count: int | None = None
    percent: float | None = None
    for part in text.split(","):
        value = part.strip()
        try:
            if value.endswith("%") and percent is None and 0 < float(value[:-1]) <= 100:
                percent = float(value[:-1])
                continue
            if not value.endswith("%") and count is None and value.isdigit() and int(value) >= 1:
                count = int(value)
                continue
        except ValueError:
            pass
        raise UsageError(f"--breaker '{text}': give a count of at least 1 (2), a percentage (10%), or both (10%,3)")
    return Breaker(count, percent, window)


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


def counted(records: list[Record], since: float, window: float, now: float) -> list[Record]:
    """The latest hardware action, hold or failed verification of each host of the fleet within the
    window and after `since`: a node counts once, however often it failed."""
    start = max(since, now - window)
    latest: dict[str, Record] = {}
    for record in records:
        ended = record.ended if record.ended is not None else record.started
        if counts(record) and ended >= start:
            latest[record.host] = record
    return list(latest.values())


def fleet_size(gpu_hosts: set[str], scope: set[str]) -> int:
    """The nodes a share is of: those with GPUs that the history has seen (the scope when it has seen none)."""
    return len(gpu_hosts) or len(scope)


class Fuse:
    """The breaker over one run: how many more nodes may be taken out before it trips."""

    def __init__(self, breaker: Breaker, history: History, hosts: set[str],
                 clock: Callable[[], float] = time.time):
        self.breaker, self.history, self.hosts, self.clock = breaker, history, hosts, clock

    @property
    def limit(self) -> int:
        return self.breaker.limit(fleet_size(self.history.gpu_hosts(), self.hosts))

    def tripped(self) -> str | None:
        """Why the breaker is open (tripped by this run or an earlier one, whatever their flags), or
        None; with --breaker, trips it when the bound is reached."""
        now = self.clock()
        current = state(self.history.breaker_events())
        if current.tripped is not None:
            return current.tripped
        if not self.breaker.on:
            return None
        nodes = counted(self.history.records(), current.since, self.breaker.window, now)
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
        nodes = counted(self.history.records(), current.since, self.breaker.window, self.clock())
        return max(0, self.limit - len(nodes))
