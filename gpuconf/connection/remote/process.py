# The remote runner, part 1 of 5: emitting replies and running processes. The runner is sent
# over stdin and run by the host's python3 for every round trip: standard library only, Python
# >= 3.6. Its parts are joined into one script, in the order of PARTS in
# gpuconf/connection/base.py, with the lines that import one part from another left out (on the
# host they share one namespace; here they let linters and tests read each part on its own).
# It reads a JSON request (gpuconf/facts/wire.py: RunnerRequest) and prints one JSON line per op
# result as each finishes, so that a run cut short still says what was done.
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

# Types are checked by mypy for Python 3.6 (make lint): type comments only, and typing never
# imported on a host; mypy takes `if MYPY:` as true.
MYPY = False
if MYPY:
    from typing import List  # noqa: F401, UP035 - for the type comments (Python 3.6)

MAX_CONTENT = 4 * 1024 * 1024
MAX_OUTPUT = 1024 * 1024
EMIT_LOCK = threading.Lock()
FLUSH_EVERY = 0.05
FLUSH_WANTED = threading.Event()
# a line is waiting for the flusher; the flusher thread, once started
PENDING, FLUSHER = [], []  # type: List[bool], List[threading.Thread]
ENV = dict(os.environ, LC_ALL="C", LANG="C", PYTHONDONTWRITEBYTECODE="1")
ENV["PATH"] = ENV.get("PATH", "/usr/bin:/bin") + ":/usr/local/sbin:/usr/sbin:/sbin"


def emit(result, final=False):
    """Print one reply line. Lines are flushed together, at most FLUSH_EVERY seconds after they
    were written (a flusher thread), and at once for the last: each flush is an SSH packet that
    both ends must encrypt, MAC and parse, and a batch of 40 facts made 40 of them."""
    line = json.dumps(result) + "\n"
    with EMIT_LOCK:  # reads run in threads: one whole line at a time
        sys.stdout.write(line)
        if final:
            sys.stdout.flush()
        elif not PENDING:
            PENDING.append(True)
            if not FLUSHER:
                FLUSHER.append(threading.Thread(target=flusher, daemon=True))
                FLUSHER[0].start()
            FLUSH_WANTED.set()


def flusher():
    while True:
        FLUSH_WANTED.wait()
        time.sleep(FLUSH_EVERY)
        with EMIT_LOCK:
            FLUSH_WANTED.clear()
            del PENDING[:]
            sys.stdout.flush()


def text(data):
    if len(data) > MAX_OUTPUT:
        data = data[-MAX_OUTPUT:]
    return data.decode("utf-8", "replace")


def run_argv(argv, timeout, stdin_data=None):
    """Run a program (no shell) in its own process group; on timeout kill the whole group.

    A process stuck in the kernel (a wedged GPU) cannot be reaped, so after the
    kill we wait only briefly and abandon it rather than hang with it."""
    started = time.time()
    program = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=ENV["PATH"])
    if program is None or not os.path.exists(program):  # known here: no process forked only to fail
        return {"rc": 127, "out": "", "err": "%s: No such file or directory" % argv[0], "timed_out": False,
                "duration": 0.0, "timeout": timeout}
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, start_new_session=True)
    except OSError as exc:  # not installed: as a shell says it
        return {"rc": 127 if isinstance(exc, FileNotFoundError) else 126, "out": "",
                "err": "%s: %s" % (argv[0], exc.strerror), "timed_out": False, "duration": 0.0, "timeout": timeout}
    try:
        out, err = proc.communicate(stdin_data, timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            out, err = b"", b"process did not exit after SIGKILL (stuck in the kernel)"
    return {"rc": proc.returncode if proc.returncode is not None else -9, "out": text(out or b""),
            "err": text(err or b""), "timed_out": timed_out, "duration": round(time.time() - started, 3),
            "timeout": timeout}


def run_shell(cmd, timeout, stdin_data=None):
    return run_argv(["/bin/sh", "-c", cmd], timeout, stdin_data)


