"""The node's kernel ring buffer and systemd journal, kept as JSON lines under ``/run``.

Both are volatile, as on a host whose journal is not persistent: a reboot starts them over.
``dmesg`` renders the kernel log; ``journalctl`` renders the journal and, for ``-k``, the
kernel log. Entries carry wall-clock and boot-relative (monotonic) times so that each tool
can print its own real formats (``[   12.345678]``, ``-T``, ``--time-format=iso``, short-iso).
"""
from __future__ import annotations

import json
import os
import time

import state

KMSG = f"{state.RUN}/kmsg.jsonl"
JOURNAL = f"{state.RUN}/journal.jsonl"

# syslog priorities, as dmesg --decode and journalctl -p name them
PRIORITIES = ("emerg", "alert", "crit", "err", "warn", "notice", "info", "debug")


def _append(absolute: str, entry: dict) -> None:
    real = state.path(absolute)
    os.makedirs(os.path.dirname(real), exist_ok=True)
    line = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
    fd = os.open(real, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        os.write(fd, line)   # one write(2) with O_APPEND: concurrent writers never interleave
    finally:
        os.close(fd)


def kmsg(message: str, priority: int = 6) -> None:
    """Append a line to the kernel log (what the kernel would printk)."""
    now = time.time()
    _append(KMSG, {"w": now, "t": state.uptime(), "p": priority, "m": message})


def journal(message: str, ident: str, pid: int | None = None, unit: str = "", priority: int = 6) -> None:
    """Append an entry to the journal, as a service (``ident[pid]``) or systemd would log it."""
    now = time.time()
    _append(JOURNAL, {"w": now, "t": state.uptime(), "p": priority, "i": ident,
                      "pid": pid if pid is not None else os.getpid(), "u": unit, "m": message})


def systemd(message: str, unit: str = "", priority: int = 6) -> None:
    """A message from PID 1 (``systemd[1]: ...``)."""
    journal(message, "systemd", 1, unit, priority)


def _read(absolute: str) -> list[dict]:
    text = state.read_text(absolute, "") or ""
    entries = []
    for line in text.splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def kernel_entries() -> list[dict]:
    return _read(KMSG)


def journal_entries() -> list[dict]:
    return _read(JOURNAL)
