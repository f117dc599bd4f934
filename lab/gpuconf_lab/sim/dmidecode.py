"""``dmidecode`` for the node's simulated board: the BIOS (type 0), system (type 1) and base board
(type 2) records, in dmidecode 3.4's format (the header, ``Handle 0x..., DMI type N, S bytes``, the
record's title, tab-indented fields, a blank line), as captured on a DGX A100
(tests/fixtures/real/dmidecode/dmidecode-t1-dgx-a100-findstring-18087412309.txt). ``-t`` takes a
keyword (``bios``, ``system``, ``baseboard``) or a number, and may be given more than once. The
serial and UUID are derived from the node's name, like every other identity in the lab.
Root only, as the real tool reads /sys/firmware/dmi/tables.
"""
from __future__ import annotations

import hashlib
import sys

import entry
import state

KEYWORDS = {"bios": (0,), "system": (1,), "baseboard": (2, 10), "chassis": (3,)}
HEADER = "# dmidecode 3.4\nGetting SMBIOS data from sysfs.\nSMBIOS 3.3.0 present.\n"


def _records() -> dict[int, tuple[int, int, str, list[tuple[str, str]]]]:
    node, profile = state.node(), state.profile()
    digest = hashlib.sha256(f"{node['lab']}/{node['name']}/board".encode()).hexdigest()
    serial, uuid = str(int(digest[:10], 16))[:13], f"{digest[0:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-" \
        f"{digest[20:32]}"
    product = f"gpuconf-lab {profile.name}"
    return {
        0: (0x0000, 26, "BIOS Information", [("Vendor", "American Megatrends International, LLC."),
                                            ("Version", "1.4a"), ("Release Date", "08/22/2024"),
                                            ("Address", "0xF0000"), ("Runtime Size", "64 kB"), ("ROM Size", "32 MB"),
                                            ("BIOS Revision", "5.27")]),
        1: (0x0001, 27, "System Information", [("Manufacturer", "gpuconf lab"), ("Product Name", product),
                                              ("Version", "v1.0"), ("Serial Number", serial), ("UUID", uuid),
                                              ("Wake-up Type", "Power Switch"), ("SKU Number", "Default string"),
                                              ("Family", "gpuconf-lab")]),
        2: (0x0002, 15, "Base Board Information", [("Manufacturer", "gpuconf lab"), ("Product Name", product),
                                                  ("Version", "1.0"), ("Serial Number", serial[::-1]),
                                                  ("Asset Tag", "Default string"), ("Type", "Motherboard")]),
    }


def main(argv: list[str]) -> int:
    wanted: list[int] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-t", "--type") and i + 1 < len(argv):
            i += 1
            for word in argv[i].split(","):
                if word.isdigit():
                    wanted.append(int(word))
                elif word in KEYWORDS:
                    wanted.extend(KEYWORDS[word])
                else:
                    sys.stderr.write(f"Invalid type keyword: {word}\n")
                    return 2
        elif arg in ("-V", "--version"):
            print("3.4")
            return 0
        i += 1
    if not state.is_root():
        sys.stderr.write("/sys/firmware/dmi/tables/smbios_entry_point: Permission denied\n"
                         "Scanning /dev/mem for entry point.\n/dev/mem: Permission denied\n")
        return 1
    out = [HEADER]
    for kind, (handle, size, title, fields) in sorted(_records().items()):
        if wanted and kind not in wanted:
            continue
        out.append(f"Handle 0x{handle:04X}, DMI type {kind}, {size} bytes\n{title}\n"
                   + "".join(f"\t{name}: {value}\n" for name, value in fields) + "\n")
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    entry.run(main)
