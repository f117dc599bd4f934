"""Watching a node through the scheduler while remediation works on it: waiting for its jobs to
end, for its reboot, for its resume; and noticing, at every read, that someone else took it over.

Whoever drains a node for their own reason, or resumes one gpuconf drained, decides from then
on: gpuconf reads the node right before each step that acts on it (apply, reboot, resume, a
failure's drain) and stops there (`TakenOver`). Slurm offers no compare-and-set of a reason, so
what is left is the time between that read and the step's own scontrol command.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from gpuconf.errors import GpuconfError
from gpuconf.remediate.history import History
from gpuconf.scheduler.interface import Node, Scheduler


class Stopped(Exception):
    """SIGINT: the node is left as it is (drained with gpuconf's reason), its journal step open."""


class TakenOver(Exception):
    """The node is no longer out of service under gpuconf's own reason: a person drained it for
    their own reason, or resumed it. gpuconf touches it no further."""

    def __init__(self, node: Node | None):
        super().__init__(node)
        self.node = node


class NotRebooted(GpuconfError):
    """The apply's reboot refused, the node's drain no longer gpuconf's (the reboot task fails with this)."""


def whose(node: Node | None, name: str, scheduler: str) -> str:
    """Who has the node now, in words for the summary and the history."""
    if node is None:
        return f"{scheduler} no longer knows node '{name}'"
    if node.in_service:
        return f"resumed by someone else ({node.state})"
    return f"drained by someone else ({node.state}, reason: {node.reason or '(none)'})"


class Claims:
    """The drain reason gpuconf set on each node it works on, and whether a node read now is still
    gpuconf's. Ownership does not rest on the reason surviving the scheduler: a reason the
    scheduler's own reboot rewrote (Slurm: `... : reboot issued`, or the bare words after a second
    reboot) is gpuconf's still, and is set again once the node is back from its reboot. Any other
    reason is someone else's, and wins."""

    def __init__(self, scheduler: Scheduler, history: History):
        self.scheduler, self.history = scheduler, history
        self.reasons: dict[str, tuple[int, str]] = {}  # node -> (remediation, the reason gpuconf set)
        self.rebooted: set[str] = set()  # nodes gpuconf has rebooted and not read back since
        self._lock = threading.Lock()

    def drain(self, name: str, record: int, reason: str) -> None:
        """Drain the node with gpuconf's reason, and remember it (in the history too: a run killed
        after a reboot is carried on by the next, which knows the reason by it)."""
        self.scheduler.drain(name, reason)
        with self._lock:
            self.reasons[name] = (record, reason)
        self.history.set_reason(record, reason)

    def know(self, name: str, record: int, reason: str) -> None:
        if reason:
            with self._lock:
                self.reasons[name] = (record, reason)

    def rewritten(self, node: Node | None) -> bool:
        """The node's reason is what the scheduler's reboot made of gpuconf's."""
        if node is None:
            return False
        with self._lock:
            mine = self.reasons.get(node.name)
        return mine is not None and self.scheduler.rewritten_by_reboot(node.reason, mine[1])

    def ours(self, node: Node | None) -> bool:
        """Out of service under gpuconf's reason, as it set it or as the scheduler's reboot rewrote it."""
        return node is not None and not node.in_service and (node.ours or self.rewritten(node))

    def rebooting(self, name: str) -> None:
        """gpuconf is about to reboot the node (read back once it is up: restore_theirs)."""
        with self._lock:
            self.rebooted.add(name)

    def settled(self, name: str) -> None:
        with self._lock:
            self.rebooted.discard(name)

    def restore_theirs(self, node: Node | None) -> Node | None:
        """A person drained the node between gpuconf's last read and its reboot: the scheduler's reboot
        then added its words to their reason. Their words are set back, exactly (the node is theirs)."""
        if node is None or node.name not in self.rebooted or node.rebooting:
            return node
        self.settled(node.name)
        theirs = self.scheduler.reason_before_reboot(node.reason)
        if theirs is None or self.ours(dataclasses.replace(node, reason=theirs)):
            return node
        self.scheduler.drain(node.name, theirs, exact=True)
        return dataclasses.replace(node, reason=theirs)

    def reassert(self, node: Node) -> Node:
        """gpuconf's reason set again on a node back from its reboot whose reason the scheduler rewrote
        (the caller has just read it: a person's reason is never written over)."""
        if node.rebooting or not self.rewritten(node):
            return node
        with self._lock:
            record, reason = self.reasons[node.name]
        self.scheduler.drain(node.name, reason)
        return dataclasses.replace(node, reason=reason)


class Watch:
    """Reads of the nodes in scope (`read`), every `poll` seconds while waiting, until `stop`."""

    def __init__(self, read: Callable[[], dict[str, Node]], poll: float, stop: threading.Event, claims: Claims):
        self.read, self.poll, self.stop, self.claims = read, poll, stop, claims

    def still_ours(self, name: str) -> Node:
        """The node read now: TakenOver unless it is out of service under gpuconf's own reason (set
        again here when the scheduler's reboot rewrote it)."""
        node = self.read().get(name)
        if node is None or not self.claims.ours(node):
            raise TakenOver(self.claims.restore_theirs(node))
        self.claims.settled(name)
        return self.claims.reassert(node)

    def idle(self, name: str, timeout: float, busy: Callable[[Node], None]) -> bool:
        """Until the node's jobs have ended (True), or `timeout` (False); `busy` is told once that
        they still run. TakenOver as soon as the drain is no longer gpuconf's."""
        deadline = time.monotonic() + timeout
        said = False
        while True:
            node = self.still_ours(name)
            if not node.busy:
                return True
            if time.monotonic() >= deadline:
                return False
            if not said:
                busy(node)
                said = True
            if self.stop.wait(self.poll):
                raise Stopped()

    def in_service(self, name: str, timeout: float) -> bool:
        """A resumed node can show IDLE* (not responding) until the scheduler has pinged its daemon
        (Slurm does so for a node that was down): the next wave would count it out of service, so
        wait for it. False if it is not in service within `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node = self.read().get(name)
            if node is None or node.in_service or ("DRAIN" in node.flags and not self.claims.ours(node)):
                return True
            if self.stop.wait(self.poll):
                return True
        return False

    def reboots(self, names: list[str], timeout: float) -> None:
        """Until these nodes, which gpuconf asked to reboot, have registered again (no reboot flag)."""
        deadline = time.monotonic() + timeout
        while names and time.monotonic() < deadline:
            states = self.read()
            names = [n for n in names if n in states and states[n].rebooting]
            if names and self.stop.wait(self.poll):
                raise Stopped()
