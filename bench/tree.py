"""Measure one command's whole process tree: wall time, CPU, peak RSS.

    python bench/tree.py OUT.json -- COMMAND ARGS...

This small process becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER), starts the command,
and samples the RSS of every process below it every 100 ms (at nice 19). Processes that the command leaves
behind (ansible's ControlPersist ssh masters double-fork away from it) are re-parented here
rather than to PID 1, so they stay in the tree: they are counted while they live, and when the
command exits they are sent SIGTERM and reaped, so that their CPU time is counted as well.

* CPU is user + sys from getrusage(RUSAGE_CHILDREN): every process of the tree, once reaped.
* Peak RSS is the larger of the sampled tree sum and the command's own ru_maxrss from wait4
  (exact for a single process, which a 100 ms sampler can miss).
* Wall time is from the spawn to the command's exit (not the clean-up of left-over processes).

The measuring process's own time is not counted. It writes the numbers as JSON to OUT.json and
exits with the command's exit status.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
PAGE = os.sysconf("SC_PAGE_SIZE")


def children_map() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def descendants(root: int) -> list[int]:
    tree = children_map()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in tree.get(pid, []):
            found.append(child)
            todo.append(child)
    return found


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


class Sampler(threading.Thread):
    def __init__(self, root: int, interval: float = 0.1):
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.peak = 0
        self.processes: set[int] = set()
        self.done = threading.Event()

    def run(self) -> None:
        # A scan of /proc costs ~5 ms with 100 lab nodes up; at nice 19 it takes idle CPU only
        # (nice is per thread on Linux), so that it does not slow the tool it measures.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        while not self.done.is_set():
            pids = descendants(self.root)
            self.processes.update(pids)
            self.peak = max(self.peak, sum(rss_bytes(pid) for pid in pids))
            self.done.wait(self.interval)


def main(argv: list[str]) -> int:
    out_path, command = argv[0], argv[argv.index("--") + 1:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    process = subprocess.Popen(command)
    sampler = Sampler(os.getpid())
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    left = descendants(os.getpid())
    for pid in left:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.01)
    sampler.done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "command": command, "rc": process.returncode, "wall_s": round(wall, 3),
        "user_s": round(after.ru_utime - before.ru_utime, 3), "sys_s": round(after.ru_stime - before.ru_stime, 3),
        "peak_rss_mb": round(max(sampler.peak, usage.ru_maxrss * 1024) / 2**20, 1),
        "processes": len(sampler.processes | {process.pid}), "left_behind": len(left),
    }
    result["cpu_s"] = round(result["user_s"] + result["sys_s"], 3)
    with open(out_path, "w") as handle:
        json.dump(result, handle)
    return process.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
