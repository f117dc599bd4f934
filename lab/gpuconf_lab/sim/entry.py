"""How every simulator command starts and ends.

Each run refreshes the lab-wide InfiniBand port state first and last (see ``fabric``), so
that ``cat /sys/class/infiniband/*/ports/1/state`` on any node is at most one simulator call
behind. A reader that goes away (``nvidia-smi -q | head``) ends the command quietly, as it
would a C tool; real bugs still raise tracebacks.
"""
from __future__ import annotations

import os
import sys

# The name each simulated tool runs under (`comm`: `ps`, process accounting), so that the lab's
# process counts name `nvidia-smi`, not the python3 the shim starts. Modules that serve several
# tools are told which by their first argument.
TOOL_NAMES = {"nvsmi": "nvidia-smi", "hostengine": "nv-hostengine", "fabricmanager": "nv-fabricmanager",
              "persistenced": "nvidia-persistenced", "bugreport": "nvidia-bug-report.sh"}
NAMED_BY_FIRST_ARGUMENT = {"kmod", "initramfs", "journalctl", "power", "ib", "nvctk", "dcgm", "daemons", "mounts"}


def take_tool_name(argv) -> None:
    module = os.path.basename(sys.argv[0])[:-3] if sys.argv[0].endswith(".py") else ""
    name = argv[0] if module in NAMED_BY_FIRST_ARGUMENT and argv else module
    name = TOOL_NAMES.get(name, name)
    if name:
        try:
            with open("/proc/self/comm", "w") as handle:
                handle.write(name[:15])
        except OSError:
            pass


def run(main, argv=None) -> None:
    import fabric

    argv = sys.argv[1:] if argv is None else argv
    take_tool_name(sys.argv[1:])
    fabric.refresh()
    code = 0
    try:
        code = main(argv) or 0
    except BrokenPipeError:
        # `nvidia-smi -q | head`: the reader left; exit quietly like a C tool.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        code = 141
    except KeyboardInterrupt:
        code = 130
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if isinstance(stop.code, str):
            sys.stderr.write(stop.code + "\n")
    finally:
        fabric.refresh()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            code = code or 141
    os._exit(code)
