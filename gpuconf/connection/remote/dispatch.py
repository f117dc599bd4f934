# The remote runner, part 5 of 5: the dispatch table (its names are gpuconf/facts/wire.py's
# OpName, compared by tests/unit/facts/test_wire.py), the read-only rules, and the main loop.
import json
import os
import sys
import threading
import time

from gpuconf.connection.remote.initramfs import op_cpio
from gpuconf.connection.remote.process import MYPY, emit
from gpuconf.connection.remote.reads import (
    OS_RELEASE_IDS,
    exec_argvs,
    op_exec,
    op_glob,
    op_host,
    op_stat,
    read_only_argv,
    run_user_command,
)
from gpuconf.connection.remote.writes import (
    op_announce_reboot,
    op_mkdir,
    op_reboot,
    op_remove,
    op_run,
    op_symlink,
    op_write,
)

# Every op the runner knows, by its name on the wire. Reads may be in a read-only (check)
# request, and consecutive reads run at the same time; writes run alone, in order.
READS = {"sh": run_user_command, "stat": op_stat, "exec": op_exec, "glob": op_glob, "host": op_host, "cpio": op_cpio}
WRITES = {"run": op_run, "write": op_write, "mkdir": op_mkdir, "remove": op_remove, "symlink": op_symlink,
          "reboot": op_reboot, "announce_reboot": op_announce_reboot}
OPS = dict(READS, **WRITES)
# reads at once: a node's own CPUs, 2 to 8 (more only queue for the CPUs, and a read's timeout
# counts its time in that queue)
PARALLEL_READS = max(2, min(8, os.cpu_count() or 2))


def shared_lock(lock):
    """Wait (bounded) for a shared flock: an apply holds it exclusively, so a
    check never reads a half-applied host. Returns the fd, or None if busy."""
    import fcntl
    try:
        fd = os.open(lock["path"], os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:  # not root: a lock made by root still opens read-only
        try:
            fd = os.open(lock["path"], os.O_RDONLY)
        except FileNotFoundError:
            return -1  # no lock file and no right to make one: no apply can hold it
    deadline = time.time() + float(lock.get("wait", 60))
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return fd
        except (BlockingIOError, PermissionError):
            if time.time() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.2)


def lock_owner(path):
    try:
        with open(path + ".owner") as handle:
            return handle.read().strip()
    except OSError:
        return "unknown"


def refusal(kind, op, readonly):
    """Why a read-only request may not run this op ("" when it may): a write, or a program that
    is not known to be read-only (the controller's READ_ONLY_PROGRAMS, sent with the runner)."""
    if not readonly:
        return ""
    if kind in WRITES:
        return "refused: '%s' in a read-only (check) request" % kind
    if kind == "exec" and not all(read_only_argv(argv) for argv in exec_argvs(op)):
        return "refused: %s is not a read-only program" % " ".join(op["argv"][:2])
    return ""


def run_op(op, readonly):
    """One op's result fields, and whether the ops after it must be skipped: after an unknown
    op, a refused or failed write, or a `run` that failed with `check` (its default)."""
    kind = op.get("op")
    if kind not in OPS:
        return {"error": "unknown op %r" % kind}, True
    refused = refusal(kind, op, readonly)
    if refused:
        return {"error": refused}, kind in WRITES
    try:
        result = OPS[kind](op)
    except Exception as exc:  # report, never crash: the controller decides
        return {"error": "%s: %s" % (type(exc).__name__, exc)}, kind in WRITES
    failed = kind == "run" and op.get("check", True) and (result["rc"] != 0 or result["timed_out"])
    return result, failed


def run_reads(batch, readonly):
    """Reads (sh, stat) that follow each other run at the same time: a fact batch then takes as
    long as its slowest command, not the sum of all of them. Each result is printed as it ends."""
    def one(item):
        index, op = item
        result, _ = run_op(op, readonly)
        result["i"] = index
        emit(result)
    if len(batch) == 1:
        one(batch[0])
        return
    # plain threads: concurrent.futures would import logging, a tenth of the runner's own start
    waiting = list(reversed(batch))

    def worker():
        while True:
            try:
                item = waiting.pop()   # atomic under the GIL
            except IndexError:
                return
            one(item)
    workers = [threading.Thread(target=worker) for _ in range(min(PARALLEL_READS, len(batch)))]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()


def main(request):
    del OS_RELEASE_IDS[:]  # per request: a runner that serves a run reads the host afresh each time
    readonly = request.get("readonly", True)
    lock = request.get("lock")
    if lock and shared_lock(lock) is None:
        emit({"busy": True, "owner": lock_owner(lock["path"]), "path": lock["path"]}, final=True)
        return
    ops = list(enumerate(request["ops"]))
    stop, position = False, 0
    while position < len(ops):
        index, op = ops[position]
        if stop:
            emit({"i": index, "skipped": True})
            position += 1
        elif op.get("op") in READS:
            end = position
            while end < len(ops) and ops[end][1].get("op") in READS:
                end += 1
            run_reads(ops[position:end], readonly)  # reads never stop the ops after them
            position = end
        else:
            result, stop = run_op(op, readonly)
            result["i"] = index
            emit(result)
            position += 1
    emit({"done": True}, final=True)


def serve():
    """One request per line on stdin, answered in turn, until stdin closes: the runner of a host's
    whole run (gpuconf/connection/ssh.py keeps it), which spares each round trip a new session,
    sudo and interpreter."""
    for line in iter(sys.stdin.buffer.readline, b""):
        if line.strip():
            main(json.loads(line.decode("utf-8")))


if MYPY:
    from typing import Optional  # noqa: F401, UP035 - for the type comments (Python 3.6)
    REQUEST = None  # type: Optional[str]  # injected by the bootstrap: the one request, or None to serve

if __name__ == "gpuconf_remote":  # run by the bootstrap (gpuconf/connection/base.py), not imported by a test
    if REQUEST is None:  # noqa: F821 - REQUEST is injected by the bootstrap
        serve()
    else:
        main(json.loads(REQUEST))  # noqa: F821
