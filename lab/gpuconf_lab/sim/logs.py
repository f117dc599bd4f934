"""The node's kernel ring buffer and systemd journal, kept as JSON lines under ``/run``.

Both are volatile, as on a host whose journal is not persistent: a reboot starts them over.
``dmesg`` renders the kernel log; ``journalctl`` renders the journal and, for ``-k``, the
kernel log. Entries carry wall-clock and boot-relative (monotonic) times so that each tool
can print its own real formats (``[   12.345678]``, ``-T``, ``--time-format=iso``, short-iso).
"""
from __future__ import annotations

import json
import os
import re
import time

import state

KMSG = f"{state.RUN}/kmsg.jsonl"
JOURNAL = f"{state.RUN}/journal.jsonl"
# what userspace writes to the kernel log (`echo '<5>text' >> /dev/kmsg`): the lab's /dev/kmsg is a
# plain file (lab/gpuconf_lab/init.py); its new lines join the kernel log before anything else does
DEV_KMSG = "/dev/kmsg"
DEV_KMSG_TAKEN = f"{state.RUN}/dev-kmsg.offset"
DEFAULT_PRIORITY = 4  # the kernel's default message log level, for a line written without <N>

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


def take_dev_kmsg() -> None:
    """Lines written to /dev/kmsg since the last look become kernel log entries, in order; a
    reader that may not record what it took (not root) leaves them to the next one."""
    real = state.path(DEV_KMSG)
    try:
        size = os.path.getsize(real)
        with state.locked("dev-kmsg"):
            taken = int((state.read_text(DEV_KMSG_TAKEN, "0") or "0").strip() or 0)
            if size < taken:  # a writer's `>` truncated it
                taken = 0
            if size == taken:
                return
            with open(real, "rb") as handle:
                handle.seek(taken)
                data = handle.read()
            whole = data[:data.rfind(b"\n") + 1]
            for line in whole.decode("utf-8", "replace").splitlines():
                match = re.match(r"<(\d+)>(.*)", line)
                priority, message = (int(match.group(1)) & 7, match.group(2)) if match else (DEFAULT_PRIORITY, line)
                _append(KMSG, {"w": time.time(), "t": state.uptime(), "p": priority, "m": message})
            state.write_text(DEV_KMSG_TAKEN, str(taken + len(whole)))
    except (OSError, ValueError):
        return


def kmsg(message: str, priority: int = 6) -> None:
    """Append a line to the kernel log (what the kernel would printk)."""
    take_dev_kmsg()
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
    take_dev_kmsg()
    return _read(KMSG)


def journal_entries() -> list[dict]:
    return _read(JOURNAL)
