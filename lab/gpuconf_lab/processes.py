"""The processes started inside one node while something runs: exact, with their names.

Linux's BSD process accounting (acct(2)) is per PID namespace, and every lab node has its
own: turned on from inside a node's namespace, the kernel appends one record to a file for
each process of that node (and of no other) when it exits. A record is one process, never a
thread (a thread pool in the remote runner counts nothing), with its name (`comm`: the last
program it ran, 15 characters; the lab's simulated tools set theirs to the real tool's name)
and its pid as the node sees it.

What is counted: every process that exits in the node between `start()` and `stop()`,
sshd's own included (its per-connection privilege-separation child and session process,
the login shell that starts the runner, the runner itself), because they are work the
node does for the check as much as `nvidia-smi` is. The two helpers that turn accounting on
and off are left out by their pids (the kernel records the one that switches accounting
off, as it closes the file). The file lives on the host, beside the node's runtime directory,
never inside the node's filesystem: counting writes nothing a node's digest covers.
"""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gpuconf_lab.runtime import LabError

# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime,
# etime (float), 8 comp_t counters, comm[16]: 64 bytes
RECORD = struct.Struct("<BBHIIIIIIf8H16s")
FORKED_NO_EXEC = 0x01  # AFORK: the process forked and never ran a program of its own
SWITCH = ("import ctypes, os, sys\n"
          "libc = ctypes.CDLL(None, use_errno=True)\n"
          "path = sys.argv[1].encode() if sys.argv[1] else None\n"
          "if libc.acct(path) != 0:\n"
          "    sys.exit('acct: ' + os.strerror(ctypes.get_errno()))\n"
          "print(os.getpid())\n")


@dataclass(frozen=True)
class Process:
    """One process that exited in the node: its pid and parent's there, and its name."""

    pid: int
    ppid: int
    name: str
    forked_only: bool  # a fork that never ran a program (a Python child before exec, say)


def parse_records(data: bytes) -> list[Process]:
    processes = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        fields = RECORD.unpack_from(data, offset)
        if fields[1] & 0x7F != 3:
            raise LabError(f"process accounting record version {fields[1] & 0x7F}, expected 3")
        name = fields[-1].split(b"\0", 1)[0].decode(errors="replace")
        processes.append(Process(pid=fields[6], ppid=fields[7], name=name,
                                 forked_only=bool(fields[0] & FORKED_NO_EXEC)))
    return processes


def namespace_members(init_pid: int) -> set[int]:
    """Host pids of the processes living in the PID namespace of `init_pid` (the node)."""
    try:
        namespace = os.readlink(f"/proc/{init_pid}/ns/pid")
    except OSError as exc:
        raise LabError(f"the node's PID 1 ({init_pid}) is gone: {exc}") from None
    members = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                    members.add(int(entry))
            except OSError:
                continue
    return members


class ProcessCount:
    """Count the processes a node runs: `start()`, do something, `stop()` -> the processes.

    `stop()` first waits (up to `settle` seconds) until the node holds no process that was
    not there at `start()`, so that a connection's sshd children, which exit just after the
    client has gone, are counted too."""

    def __init__(self, init_pid: int, record_file: Path):
        self.init_pid, self.record_file = init_pid, record_file
        self.helpers: set[int] = set()
        self.before: set[int] = set()

    def _switch(self, path: str) -> str:
        python = os.path.realpath(sys.executable)  # the program itself: a wrapper script would start more
        done = subprocess.run(["nsenter", "--target", str(self.init_pid), "--pid", "--", python, "-I", "-S", "-c",
                               SWITCH, path], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise LabError(f"cannot switch process accounting in the node: {done.stderr.strip()[-300:]}")
        return done.stdout.strip()

    def start(self) -> None:
        self.record_file.parent.mkdir(parents=True, exist_ok=True)
        self.record_file.write_bytes(b"")  # acct(2) appends to an existing file only
        self.before = namespace_members(self.init_pid)
        self.helpers = {int(self._switch(str(self.record_file)))}

    def stop(self, settle: float = 10.0) -> list[Process]:
        deadline = time.monotonic() + settle
        while namespace_members(self.init_pid) - self.before and time.monotonic() < deadline:
            time.sleep(0.05)
        self.helpers.add(int(self._switch("")))
        records = parse_records(self.record_file.read_bytes())
        self.record_file.unlink()
        return [p for p in records if p.pid not in self.helpers]


IN_OPEN = 0x20
IN_NONBLOCK_CLOEXEC = 0o4000 | 0o2000000
EVENT = struct.Struct("iIII")


class FileOpens:
    """How many times a node's file is opened between `start()` and `stop()` (inotify on the
    file as the node sees it, through its PID 1's root): 0 means it was not read at all."""

    def __init__(self, init_pid: int, path: str):
        self.target = f"/proc/{init_pid}/root{path}"
        self.fd = -1

    def start(self) -> None:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(IN_NONBLOCK_CLOEXEC)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, self.target.encode(), IN_OPEN) < 0:
            raise LabError(f"cannot watch {self.target}: {os.strerror(ctypes.get_errno())}")

    def stop(self) -> int:
        opens, data = 0, b""
        try:
            while True:
                try:
                    data += os.read(self.fd, 65536)
                except BlockingIOError:
                    break
        finally:
            os.close(self.fd)
        offset = 0
        while offset + EVENT.size <= len(data):
            _, mask, _, length = EVENT.unpack_from(data, offset)
            opens += bool(mask & IN_OPEN)
            offset += EVENT.size + length
        return opens
