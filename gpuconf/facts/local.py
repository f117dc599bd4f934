"""A program run on this machine, as the gate reads the node it runs on and the local connection
runs its runner: no shell of its own, in a process group of its own, killed whole at its timeout.
A process stuck in the kernel (a wedged GPU) cannot be reaped: after the kill it gets a short
grace to hand back what it wrote, then it is abandoned, never waited for. (The remote runner does
the same on a host, in its own standard-library copy: gpuconf/connection/remote/process.py.)"""
from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from typing import NamedTuple

REAP_GRACE = 2.0  # seconds a killed group gets to exit and hand back its output


class Ran(NamedTuple):  # a NamedTuple, not a dataclass: the gate (a Prolog) imports this, cheaply
    out: bytes
    err: bytes
    rc: int  # -9 when it was killed at its timeout
    timed_out: bool


def run_local(argv: list[str], timeout: float, stdin: bytes | None = None,
              env: Mapping[str, str] | None = None) -> Ran:
    """Run `argv`; OSError when it cannot start (not found: FileNotFoundError)."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            out, err = proc.communicate(timeout=REAP_GRACE)
        except subprocess.TimeoutExpired:  # stuck in the kernel: abandoned
            out, err = b"", b""
        return Ran(out or b"", err or b"", -9, True)
    return Ran(out or b"", err or b"", proc.returncode, False)
