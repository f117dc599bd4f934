"""Count SSH connections and round trips per host from the lab nodes' own sshd logs.

Every tool is counted the same way, on the server side, so no tool has to be trusted to count
itself. Each node's sshd logs to its console (`nodes/NAME/console.log`). At LogLevel VERBOSE it
writes, among other lines:

    Accepted publickey for gpuadmin from 127.0.0.1 port 48474 ssh2: ...   one per connection
    Starting session: command for gpuadmin from 127.0.0.1 port 48474 id 0   one per channel running
                                                                          a command or subsystem
    Transferred: sent 9712, received 27520 bytes                            one per closed connection

A connection is one authenticated login. A round trip is one session channel that runs a command
or a subsystem (sftp): each costs at least one request/response over the network. gpuconf's apply
opens one more channel than it counts itself: the run lock's holder (gpuconf/connection/lock.py).

The lab writes `LogLevel INFO`; `enable_verbose` rewrites the node's sshd_config (on the host
side of its read-only runtime bind) and restarts sshd through the lab's own sshd-down/sshd-up.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpuconf_lab.fleet import Lab

ACCEPTED = "Accepted publickey for "
SESSION = "Starting session: "
TRANSFERRED = re.compile(r"Transferred: sent (\d+), received (\d+) bytes")


def enable_verbose(lab: Lab) -> None:
    for info in lab.nodes:
        config = lab.paths.node(info.name).runtime / "sshd_config"
        text = config.read_text()
        if "LogLevel VERBOSE" not in text:
            config.write_text(text.replace("LogLevel INFO", "LogLevel VERBOSE"))
            lab.fault(info.name, "sshd-down")
            lab.fault(info.name, "sshd-up")


@dataclass
class HostCounts:
    connections: int = 0
    round_trips: int = 0
    bytes_sent: int = 0       # by the host
    bytes_received: int = 0   # by the host: requests, scripts, modules
    closed: int = 0           # connections whose close (and byte count) sshd logged


class LogWindow:
    """What each node's sshd logged between `start()` and `counts()`."""

    def __init__(self, lab: Lab, names: list[str]):
        self.consoles = {name: lab.paths.node(name).console for name in names}
        self.offsets: dict[str, int] = {}

    def start(self) -> None:
        self.offsets = {name: path.stat().st_size for name, path in self.consoles.items()}

    def counts(self) -> dict[str, HostCounts]:
        return {name: parse(read_from(path, self.offsets.get(name, 0))) for name, path in self.consoles.items()}


def read_from(path: Path, offset: int) -> str:
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read().decode("utf-8", "replace")


def parse(text: str) -> HostCounts:
    counts = HostCounts()
    for line in text.splitlines():
        if line.startswith(ACCEPTED):
            counts.connections += 1
        elif line.startswith(SESSION):
            counts.round_trips += 1
        else:
            match = TRANSFERRED.search(line)
            if match:
                counts.closed += 1
                counts.bytes_sent += int(match.group(1))
                counts.bytes_received += int(match.group(2))
    return counts


def per_host(counts: dict[str, HostCounts]) -> dict[str, float]:
    """Means over the hosts, plus the max round trips (a mean can hide one slow host)."""
    values = list(counts.values()) or [HostCounts()]
    n = len(values)
    return {
        "connections": sum(c.connections for c in values) / n,
        "round_trips": sum(c.round_trips for c in values) / n,
        "round_trips_max": max(c.round_trips for c in values),
        # None when sshd logged no close: a connection killed with its session (a reboot, or
        # ansible's ControlPersist master ended by SIGTERM) leaves no byte count
        "kib_received": sum(c.bytes_received for c in values) / n / 1024 if all(c.closed for c in values) else None,
        "kib_sent": sum(c.bytes_sent for c in values) / n / 1024 if all(c.closed for c in values) else None,
    }
