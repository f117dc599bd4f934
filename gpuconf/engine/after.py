"""What a step after a run's tasks gets: the run hands each processor's `run_completed`
(engine/processors.py) its result and the hosts' own connections, still open, and the step hands
back a section of the report. `check --slurm` is one (gpuconf/scheduler/step.py: the scheduler's
drain and resume); the engine knows it only as a processor.

A step's round trips go through the host's session, so they run inside its run lock (held by an
apply for the whole run, taken shared by each request of a check), and they have a budget of
their own after the tasks: a run that reached its deadline can still act on what it found.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from gpuconf.connection.base import BUSY
from gpuconf.engine.session import HostSession
from gpuconf.errors import GpuconfError
from gpuconf.facts.wire import Reply, Request, op_timeout
from gpuconf.results import RunResult, TaskResult

# one round trip to a host: ops and whether they only read, in; one reply per op, out
Call = Callable[[list[Request], bool], list[Reply]]


def busy(task: TaskResult) -> bool:
    """The task could not run: another gpuconf run (an apply, remediate) held the host's lock."""
    return (task.error or "").startswith(BUSY)


class OpenHosts:
    """The run's hosts as a step after the tasks sees them: a round trip over each host's own
    connection, and whether the host's run was complete."""

    def __init__(self, run: RunResult, sessions: dict[str, HostSession], cut_short: Callable[[], bool],
                 open_session: Callable[[HostSession], None] | None = None):
        self._run, self._sessions, self._cut_short = run, sessions, cut_short
        # opens (and locks, as the run would have) a host whose plays never needed its connection
        self._open = open_session

    def call(self, host: str, budget: float) -> Call | None:
        """Round trips to `host` over the run's connection, within `budget` seconds from now in all;
        None when the run never reached the host."""
        session = self._sessions.get(host)
        if session is not None and not session.connection.connects and self._open is not None \
                and not (self._run.hosts.get(host) and self._run.hosts[host].unreachable):
            self._open(session)   # a play of set_fact, debug and assert never connected
        if session is None or not session.connection.connects:
            return None
        until = time.monotonic() + budget

        def call(ops: list[Request], readonly: bool) -> list[Reply]:
            left = until - time.monotonic()
            if left <= 0:
                raise GpuconfError(f"the step after the tasks ran out of its {budget:g} s on {host}")
            timeout = sum(op_timeout(op) for op in ops) + 5
            return session.connection.call(ops, readonly, min(timeout, left), None,
                                           session.read_lock if readonly else None)
        return call

    def complete(self, host: str) -> bool:
        """The host's run was not cut short: no deadline, no interrupt, no task left unstarted, no
        other gpuconf run holding the host."""
        if self._cut_short():
            return False
        found = self._run.hosts.get(host)
        return found is None or not any(task.not_run or busy(task) for task in found.tasks)

