"""The per-host run lock: `flock` on /run/gpuconf.lock.

An apply holds it exclusively for the whole run through a small process on
the host that lives as long as its channel: when the run ends, or the
controller dies and the connection drops, the process reads EOF and exits,
and the kernel releases the lock. A check takes it shared in each of its
round trips, waiting a bounded time, so it never silently reads a host in
the middle of an apply.
"""
from __future__ import annotations

import shlex
from typing import Any

LOCK_PATH = "/run/gpuconf.lock"

HOLDER = r"""
import fcntl, os, sys, time
path, wait, owner = sys.argv[1], float(sys.argv[2]), sys.argv[3]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
deadline = time.time() + wait
while True:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
    except (BlockingIOError, PermissionError):
        if time.time() >= deadline:
            try:
                print("busy " + open(path + ".owner").read().strip(), flush=True)
            except OSError:
                print("busy unknown", flush=True)
            sys.exit(75)
        time.sleep(0.2)
with open(path + ".owner", "w") as handle:
    handle.write("%s (pid %d, since %s)" % (owner, os.getpid(), time.strftime("%H:%M:%S")))
print("locked", flush=True)
sys.stdin.read()
"""


def holder_command(python: str, path: str, wait: float, owner: str) -> str:
    return " ".join(shlex.quote(part) for part in (python, "-B", "-c", HOLDER, path, f"{wait:g}", owner))


def check_lock(path: str = LOCK_PATH, wait: float = 60.0) -> dict[str, Any]:
    """The `lock` field of a read-only request."""
    return {"path": path, "wait": wait}
