"""Watching a node through the scheduler while remediation works on it: waiting for its jobs to
end, for its reboot, for its resume; and noticing, at every read, that someone else took it over.

Whoever drains a node for their own reason, or resumes one gpuconf drained, decides from then
on: gpuconf reads the node right before each step that acts on it (apply, reboot, resume, a
failure's drain) and stops there (`TakenOver`). Slurm offers no compare-and-set of a reason, so
what is left is the time between that read and the step's own scontrol command.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gpuconf.errors import GpuconfError
from gpuconf.scheduler.interface import Node


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


class Watch:
    """Reads of the nodes in scope (`read`), every `poll` seconds while waiting, until `stop`."""

    def __init__(self, read: Callable[[], dict[str, Node]], poll: float, stop: threading.Event):
        self.read, self.poll, self.stop = read, poll, stop

    def still_ours(self, name: str) -> Node:
        """The node read now: TakenOver unless it is out of service under gpuconf's own reason."""
        node = self.read().get(name)
        if node is None or not node.out_by_gpuconf:
            raise TakenOver(node)
        return node

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
            if node is None or node.in_service or ("DRAIN" in node.flags and not node.out_by_gpuconf):
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
