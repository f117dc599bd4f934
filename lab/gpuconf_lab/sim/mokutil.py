"""``mokutil`` (0.6.0, as in Debian 12): the node's UEFI Secure Boot state and enrolled MOKs.

``--sb-state`` prints ``SecureBoot enabled`` or ``SecureBoot disabled`` from the firmware's
``SecureBoot`` EFI variable, which the boot writes under /sys/firmware/efi/efivars: the state this boot
started with (the ``secure-boot`` fault changes the firmware setting for the next boot). No
machine owner key is ever enrolled in the lab, so ``--list-enrolled`` says ``MokListRT is
empty`` and a DKMS build, unsigned, cannot load while Secure Boot is on.
"""
from __future__ import annotations

import sys

import entry
import state

USAGE = """Usage:
  mokutil OPTIONS [ARGS...]

Options:
  --help\t\t\t\tShow help
  --list-enrolled\t\t\tList the enrolled keys
  --sb-state\t\t\t\tShow SecureBoot State
  --version\t\t\t\tShow the version of mokutil
"""


def main(argv: list[str]) -> int:
    if argv in (["--help"], ["-h"]):
        sys.stdout.write(USAGE)
        return 0
    if argv == ["--version"]:
        print("0.6.0")
        return 0
    if argv == ["--sb-state"]:   # as mokutil does: the firmware's SecureBoot variable (sysfs.render_efivars)
        try:
            with open(state.path(state.SECURE_BOOT_VARIABLE), "rb") as handle:
                value = handle.read()
        except FileNotFoundError:
            print("EFI variables are not supported on this system")
            return 0
        print("SecureBoot enabled" if value[4:5] == b"\x01" else "SecureBoot disabled")
        return 0
    if argv in (["--list-enrolled"], ["-l"]):
        print("MokListRT is empty")
        return 0
    if not argv:
        sys.stderr.write(USAGE)
        return 255
    sys.stderr.write(f"mokutil: {' '.join(argv)}: not simulated in gpuconf lab (only --sb-state, "
                     "--list-enrolled, --version and --help are)\n")
    return 255


if __name__ == "__main__":
    entry.run(main)
