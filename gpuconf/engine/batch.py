"""The hosts of one `serial` batch, where Ansible makes them act together.

gpuconf runs each host's tasks on its own thread, at its own pace. Two of Ansible's
promises need the hosts of a batch to meet:
- `max_fail_percentage`: Ansible runs a task on every host, counts the failures, and
  ends the play for every host once they pass the limit. With a limit set, the hosts
  here wait for each other after each task, so that no host starts the next task
  before the others' failures are counted.
- `any_errors_fatal`: a host's failure at a task is every host's failure there: each
  goes to its block's rescue and always, as the failing host does (they meet after
  each task too).
- `run_once`: the task runs on the first host of the batch that is still in the play,
  never on whichever thread got there first, and every host of the batch gets what it
  registered or set (set_fact included).
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

WAKE_SECONDS = 0.2  # how often a waiting host looks at the stop flag (SIGINT, the deadline)


class Batch:
    """One batch's hosts, in inventory order, and how far each got through the play's tasks."""

    def __init__(self, hosts: list[str], max_fail_percentage: float | None = None, lockstep: bool = False):
        self.hosts = list(hosts)
        self.limit = max_fail_percentage
        # the hosts meet after each task: with a limit, or where a play can end the batch (meta: end_play)
        self.lockstep = lockstep or max_fail_percentage is not None
        self.ended = False  # meta: end_play (or end_batch) ran on one of the hosts
        self.fatal: set[int] = set()  # the tasks (by index) that failed on a host with any_errors_fatal
        self._live: list[list[str]] = []  # the hosts' ansible_play_hosts and ansible_play_batch (live)
        self.changed = threading.Condition()
        self.done_through: dict[str, int] = {host: -1 for host in hosts}  # the last task index each finished
        self.gone: set[str] = set()  # hosts whose play ended (failed, unreachable, or done)
        self.failed: set[str] = set()
        self.claims: dict[int, tuple[str, threading.Event, dict[str, Any]]] = {}

    def live(self, hosts: list[str]) -> list[str]:
        """`hosts` less those that failed so far, kept so as each fails: Ansible's ansible_play_hosts
        and ansible_play_batch (a task that reads them makes the hosts meet: engine/meta.py)."""
        with self.changed:
            found = [h for h in hosts if h not in self.failed]
            self._live.append(found)
            return found

    # -- max_fail_percentage ---------------------------------------------------
    def budget_spent(self) -> bool:
        with self.changed:
            return self._over_limit()

    def _over_limit(self) -> bool:
        return self.limit is not None and bool(self.hosts) and 100.0 * len(self.failed) / len(self.hosts) > self.limit

    def task_done(self, host: str, index: int, stop: Callable[[], bool]) -> bool:
        """`host` finished task `index`. With a limit, wait until every host still in the play has
        finished it too. False when the batch's failures passed the limit: the host stops there."""
        with self.changed:
            self.done_through[host] = index
            self.changed.notify_all()
            if not self.lockstep:
                return not self.ended
            while not self._over_limit() and not self.ended and not stop() and any(
                    self.done_through[other] < index for other in self.hosts if other not in self.gone):
                self.changed.wait(WAKE_SECONDS)
            return not self._over_limit() and not self.ended

    def fail_all(self, index: int) -> None:
        """any_errors_fatal: task `index` failed on one host, so it fails on every host of the batch."""
        with self.changed:
            self.fatal.add(index)
            self.changed.notify_all()

    def end(self) -> None:
        """meta: end_play (or end_batch): every host of the batch stops before its next task."""
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def leave(self, host: str, failed: bool) -> None:
        """`host`'s play ended; a failed (or unreachable) host counts against the limit."""
        with self.changed:
            self.gone.add(host)
            if failed:
                self.failed.add(host)
                for hosts in self._live:
                    if host in hosts:
                        hosts.remove(host)
            self.changed.notify_all()

    # -- run_once --------------------------------------------------------------
    def claim(self, index: int, host: str) -> tuple[bool, str, threading.Event, dict[str, Any]]:
        """Who runs the run_once task `index`: (True, ...) for the host that runs it; the others
        get its name, an event set once it finished, and the variables it registered or set.
        A host before this one that never reaches the task (it failed, or was stopped) leaves
        the play or passes the task, and the next host in order becomes the one."""
        with self.changed:
            while index not in self.claims:
                owner = next((h for h in self.hosts if h not in self.gone and self.done_through[h] < index), host)
                if owner == host:
                    self.claims[index] = (host, threading.Event(), {})
                    break
                self.changed.wait(WAKE_SECONDS)
            owner, done, shared = self.claims[index]
            return owner == host, owner, done, shared

    def wait_for(self, owner: str, done: threading.Event, stop: Callable[[], bool]) -> None:
        """Wait until the run_once task finished on `owner`, or `owner` left the play."""
        while not done.wait(WAKE_SECONDS):
            with self.changed:
                if owner in self.gone or stop():
                    return
