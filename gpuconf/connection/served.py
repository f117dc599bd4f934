"""A runner that serves a host's whole run on one SSH channel (SERVE_BOOTSTRAP in base.py): each
request is one JSON line on its stdin, its replies the runner's JSON lines up to the `done` line.
One round trip then costs the request and its replies, not a new session, sudo and interpreter
(about 110 ms each on the lab; measured in bench/).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

import paramiko

DONE = (b'{"done"', b'{"busy"')  # the last line of a request's replies


class Served:
    def __init__(self, channel: paramiko.Channel):
        self.channel = channel
        self.pending = b""  # bytes read after the last request's done line: none, normally
        self.busy = threading.Lock()

    @property
    def alive(self) -> bool:
        return not self.channel.closed and not self.channel.exit_status_ready()

    def ask(self, request: bytes, deadline: float, host: str,
            transport_alive: Callable[[], bool]) -> tuple[bytes, str | None, bool]:
        """Send one request; (its reply lines, why they were cut short, whether the done line came)."""
        self.channel.sendall(request)
        lines: list[bytes] = []
        while True:
            end = self.pending.find(b"\n")
            while end >= 0:
                line, self.pending = self.pending[:end + 1], self.pending[end + 1:]
                lines.append(line)
                if line.startswith(DONE):
                    return b"".join(lines), None, True
                end = self.pending.find(b"\n")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return b"".join(lines) + self.pending, f"no answer from {host} within the call's deadline", False
            self.channel.settimeout(min(remaining, 1.0))
            try:
                data = self.channel.recv(65536)
            except TimeoutError:
                if not transport_alive():
                    return b"".join(lines) + self.pending, f"connection to {host} lost", False
                continue
            except (paramiko.SSHException, OSError, EOFError) as exc:
                return b"".join(lines) + self.pending, f"connection to {host} lost: {exc}", False
            if not data:  # the runner ended: killed, or it failed before its done line
                return b"".join(lines) + self.pending, None, False
            self.pending += data

    def close(self) -> None:
        try:
            self.channel.close()
        except Exception:  # noqa: BLE001 - a channel of a transport already gone
            pass
