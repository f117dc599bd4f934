"""``uname`` with the node's simulated kernel release and version.

All nodes share the machine's real kernel, so the real ``uname -r`` would show the machine's
release. Tasks decide which DKMS build and initramfs matter from ``uname -r``, and the
``kernel-upgrade`` fault changes it at the next boot; so this prints coreutils' format
with the release and version the node booted (``/proc/sys/kernel/osrelease`` agrees).
"""
from __future__ import annotations

import os
import sys

import catalog
import entry
import state

LONG = {"--all": "a", "--kernel-name": "s", "--nodename": "n", "--kernel-release": "r", "--kernel-version": "v",
        "--machine": "m", "--processor": "p", "--hardware-platform": "i", "--operating-system": "o"}


def main(argv: list[str]) -> int:
    letters = []
    for arg in argv:
        if arg == "--help":
            print("Usage: uname [OPTION]...\nPrint certain system information.  With no OPTION, same as -s.")
            return 0
        if arg == "--version":
            print("uname (GNU coreutils) 9.1")
            return 0
        if arg in LONG:
            letters.append(LONG[arg])
        elif arg.startswith("-") and not arg.startswith("--") and all(c in "asnrvmpio" for c in arg[1:]):
            letters.extend(arg[1:])
        else:
            sys.stderr.write(f"uname: invalid option -- '{arg.lstrip('-')[:1]}'\nTry 'uname --help' for more information.\n")
            return 1
    release = state.running_kernel()
    real = os.uname()
    values = {"s": "Linux", "n": real.nodename, "r": release, "v": catalog.uname_version(release),
              "m": real.machine, "p": "unknown", "i": "unknown", "o": "GNU/Linux"}
    if not letters:
        letters = ["s"]
    if "a" in letters:
        order = "snrvmo"
    else:
        order = "".join(c for c in "snrvmpio" if c in letters)
    print(" ".join(values[c] for c in order))
    return 0


if __name__ == "__main__":
    entry.run(main)
