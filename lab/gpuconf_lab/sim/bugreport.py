"""``nvidia-bug-report.sh`` (shipped with the driver's utilities): writes
``nvidia-bug-report.log.gz`` in the current directory, or ``--output-file FILE`` plus ``.gz``,
and prints its start and end messages as the real script does. The log starts with the real
prologue (tests/fixtures/real/nvidia-bug-report/bug-report-header-rtx3060-findstring-16252662979.txt)
and holds, each after the script's separator, what a short real log holds for a GPU node:
/proc/driver/nvidia/version, ``nvidia-smi -q``, the kernel log (``dmesg``) and ``lspci``.
Like the real script it needs root."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time

import entry
import state

VERSION = "36167280"
SEPARATOR = "____________________________________________\n"
PROLOGUE = ("Start of NVIDIA bug report log file.  Please include this file, along\n"
            "with a detailed description of your problem, when reporting a graphics\n"
            "driver bug via the NVIDIA Linux forum (see forums.developer.nvidia.com)\n"
            "or by sending email to 'linux-bugs@nvidia.com'.\n")


def _section(title: str, text: str) -> str:
    return f"{SEPARATOR}\n{title}\n\n{text.rstrip()}\n\n"


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]}: {exc}"
    return done.stdout + done.stderr


def main(argv: list[str]) -> int:
    output, flags = "nvidia-bug-report.log", []
    i = 0
    while i < len(argv):
        if argv[i] == "--output-file" and i + 1 < len(argv):
            output = argv[i + 1]
            flags += argv[i:i + 2]
            i += 1
        elif argv[i] in ("--safe-mode", "--extra-system-data"):
            flags.append(argv[i])
        i += 1
    if not state.is_root():
        sys.stdout.write("\nERROR: Please run nvidia-bug-report.sh as root.\n\n")
        return 1
    target = output if output.endswith(".gz") else output + ".gz"
    print(f"\nnvidia-bug-report.sh will now collect information about your\nsystem and create the file "
          f"'{target}' in the current\ndirectory.  It may take several seconds to run.  In some\n"
          "cases, it may hang trying to capture data generated dynamically\nby the Linux kernel and/or the NVIDIA "
          "kernel module.  While\nthe bug report log file will be incomplete if this happens, it\nmay still contain "
          "enough data to diagnose your problem.\n")
    sys.stdout.write("Running nvidia-bug-report.sh...")
    sys.stdout.flush()
    uname = _run(["uname", "-a"]).strip()
    text = [SEPARATOR, "\n", PROLOGUE, "\n", f"nvidia-bug-report.sh Version: {VERSION}\n", "\n",
            f"Date: {time.strftime('%a %b %d %I:%M:%S %p %Z %Y')}\n", f"uname: {uname}\n",
            f"command line flags: {' '.join(flags)}\n", "\n"]
    version = state.read_text("/proc/driver/nvidia/version")
    text.append(_section("*** /proc/driver/nvidia/version", version if version is not None
                         else "*** /proc/driver/nvidia/version does not exist"))
    for argv_ in (["nvidia-smi", "-q"], ["dmesg"], ["lspci", "-nn"]):
        text.append(_section(" ".join(argv_), _run(argv_)))
    with gzip.open(state.path(os.path.abspath(target)), "wt") as handle:
        handle.write("".join(text))
    print(" complete.\n\nThe file "
          f"{target} has been created; please send this file, along with a\n"
          "detailed description of your problem, to linux-bugs@nvidia.com.\n")
    return 0


if __name__ == "__main__":
    entry.run(main)
