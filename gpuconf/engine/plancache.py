"""The speculative plan of a task, worked out once and shared by every host that sees the same values.

Before its first round trip a host renders each task with its facts unknowable, to learn which
facts the checks will read, so that they travel with the host facts in one request
(`HostPlanner.facts_of`). In a fleet most hosts see the same values for the few variables a task
uses. While a task renders, its `Vars` records each name it looks up and the raw value it found
(or that it found none). Another host reuses the result when each of those names resolves, in its
own layers, to the identical object (`is`), verbatim or not alike; otherwise it renders and adds
its own variant. A template that uses `inventory_hostname` or a host variable of its own therefore
renders on every host, and one that reads only group variables renders once per group.

The speculative pass keeps the facts a task will read (`kind="facts"`): they decide which facts are
fetched early, so a wrong entry could cost a round trip, never a wrong check. The real pass keeps
each task's validated params (`kind="params"`, `HostPlanner.prepare`), with the host's real facts
among its lookups: a template is a function of the variables it looks up and nothing else (no
clock, no environment), so a host whose every lookup finds the identical objects gets the identical
params. A condition that reads this host's own facts (`facts.nvlink_fabric == 'none'`) finds a new
object on every host, so `prepare` also keeps the params alone (`kind="params only"`), with the
lookups of the params' rendering only, and judges such conditions on each host. A task whose type
reads the controller's files while it resolves (a template), a loop's item, and, in either pass, a
result that looked up a value that changes during the run (`LIVE`), always render. A value that is
shared is never changed: params are only read. An error is never cached: the task reports it when
it runs.
"""
from __future__ import annotations

import threading
from typing import Any

from gpuconf.templating.render import Vars
from gpuconf.templating.secret_marks import SECRET_READ

MAX_VARIANTS = 8  # per task: enough for group-specific values; host-specific ones just render
# values every host shares that change while the run goes (hostvars: each host's facts fill it in):
# a result that looked one up is never kept. Nor is one that read a secret: each host's own set of
# secret strings must learn what its templates made from it (gpuconf/templating/secret_marks.py).
LIVE = frozenset({"hostvars", SECRET_READ})


class PlanCache:
    """Results of the speculative pass and of prepare(), per task, each with the lookups it depended on."""

    def __init__(self) -> None:
        # (id(task), kind) -> (task, variants); a variant is (reads, value). Tuples are replaced,
        # never changed, so that worker threads read them without a lock.
        self._tasks: dict[tuple[int, str], tuple[Any, tuple[Any, ...]]] = {}
        self._lock = threading.Lock()

    def get(self, task: Any, variables: Vars, kind: str = "facts") -> tuple[bool, Any]:
        """(True, value) when a variant's every lookup finds the same object in `variables`."""
        slot = self._tasks.get((id(task), kind))
        if slot is None or slot[0] is not task:
            return False, None
        for reads, value in slot[1]:
            for key, raw, verbatim in reads:
                found, found_verbatim = variables.lookup_raw(key)
                if found is not raw or found_verbatim != verbatim:
                    break
            else:
                return True, value
        return False, None

    def put(self, task: Any, reads: dict[str, tuple[Any, bool]], value: Any, kind: str = "facts") -> None:
        if not LIVE.isdisjoint(reads):
            return
        variant = (tuple((key, raw, verbatim) for key, (raw, verbatim) in reads.items()), value)
        with self._lock:
            slot = self._tasks.get((id(task), kind))
            variants = slot[1] if slot is not None and slot[0] is task else ()
            self._tasks[(id(task), kind)] = (task, (variants + (variant,))[-MAX_VARIANTS:])
