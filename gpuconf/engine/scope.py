"""What a run shares with each host's play: its options, its processors, its clock (the deadline
and an interrupt), the plans its hosts share, the facts each host gathered (`hostvars[h].facts`)
and how a delegated task reaches its target. The Runner makes one; a host's play reads it and
never calls back into the Runner."""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuconf.engine.options import RunOptions
from gpuconf.engine.plancache import PlanCache
from gpuconf.engine.processors import Processors
from gpuconf.engine.session import HostSession


class RunClock:
    """When a run stops: at its deadline (--deadline, from the moment the clock is made) or when
    it is interrupted (SIGINT sets `stop_event`)."""

    def __init__(self, deadline: float | None):
        self.stop_event = threading.Event()
        self.until = None if deadline is None else time.monotonic() + deadline

    def deadline_reached(self) -> bool:
        return self.until is not None and time.monotonic() >= self.until

    def interrupted(self) -> bool:
        return self.stop_event.is_set()

    def stopped(self) -> bool:
        """No new task starts: the deadline came or the run was interrupted."""
        return self.deadline_reached() or self.stop_event.is_set()

    def deadline(self) -> float | None:
        """The deadline as a time.monotonic() value, for the sessions' round trips."""
        return self.until


class Warnings:
    """The run's warnings, each said once on stderr (where Ansible prints a [WARNING] line)."""

    def __init__(self) -> None:
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def warn(self, message: str) -> None:
        with self._lock:
            if message in self._said:
                return
            self._said.add(message)
        print(f"gpuconf: warning: {message}", file=sys.stderr)


@dataclass(frozen=True)
class RunScope:
    options: RunOptions
    processors: Processors = field(default_factory=Processors)
    clock: RunClock = field(default_factory=lambda: RunClock(None))
    plan_cache: PlanCache | None = None
    # each host's gathered facts, for the other hosts' hostvars[host].facts
    host_facts: dict[str, Any] = field(default_factory=dict)
    # a new, opened session to a `delegate_to` target (engine/delegate.py); None: not in this run
    open_delegate: Callable[[str], HostSession] | None = None
    # the run's inventory, which add_host and group_by change in memory (engine/inventory_actions.py)
    inventory: Any = None
    # connects to a host (and takes its run lock) whose play did not need it until an include's tasks
    open_host: Callable[[HostSession], None] | None = None
    warnings: Warnings = field(default_factory=Warnings)
