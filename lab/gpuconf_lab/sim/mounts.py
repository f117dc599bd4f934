"""``mount``, ``umount`` and ``findmnt`` for the node's simulated kernel (util-linux 2.38's texts).

Nothing is mounted for real: the simulated mounts are a table in ``/run/gpuconf-lab/mounts.json``
(volatile, as the kernel's is: gone at the next boot), shown after the node's real mounts (its
overlay root, /proc, /dev, /run: what /proc/self/mounts lists). ``boot start`` mounts what
/etc/fstab asks for, as systemd's local-fs and remote-fs targets do, so a mount in fstab survives
a reboot and one made by hand does not. The kernel's rendering of options is simulated: ``rw``
first, ``relatime`` unless an atime option is given, a tmpfs size in KiB (``size=64G`` reads back
``size=67108864k``) and ``inode64``; fstab-only words (``defaults``, ``nofail``, ``_netdev``,
``x-*``) are not kept. Only root may mount.
"""
from __future__ import annotations

import os
import re
import sys

import entry
import state

TABLE = f"{state.RUN}/mounts.json"
FSTAB = "/etc/fstab"
FSTAB_ONLY = {"defaults", "auto", "noauto", "nofail", "user", "users", "nouser", "owner", "group", "_netdev",
              "rw", "suid", "dev", "exec", "async", "remount"}
UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
COLUMNS = ("TARGET", "SOURCE", "FSTYPE", "OPTIONS")


def _table() -> list:
    return state.read_json(TABLE, []) or []


def _unescape(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def real_mounts() -> list:
    """The node's own mounts, as its kernel lists them."""
    found = []
    try:
        with open("/proc/self/mounts") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) >= 4:
                    found.append({"source": _unescape(fields[0]), "target": _unescape(fields[1]), "fstype": fields[2],
                                  "options": fields[3]})
    except OSError:
        pass
    return found


def _memory() -> int:
    """MemTotal of the simulated kernel (what the runtime binds over /proc/meminfo)."""
    for line in (state.read_text(f"{state.RUN}/proc/meminfo", "") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 1 << 34


def _size(value: str) -> int | None:
    match = re.fullmatch(r"(\d+)([kmgtKMGT]?)|(\d+)%", value)
    if not match:
        return None
    if match.group(3):
        return _memory() * int(match.group(3)) // 100
    return int(match.group(1)) * UNITS[match.group(2).lower()]


def kernel_options(fstype: str, options: list) -> str:
    """What the kernel would print for these options."""
    kept = [o for o in options if o and o not in FSTAB_ONLY and not o.startswith(("x-", "comment="))]
    out = ["ro" if "ro" in kept else "rw"]
    kept = [o for o in kept if o not in ("ro", "rw")]
    if not any(o in kept for o in ("noatime", "strictatime", "relatime", "norelatime")):
        out.append("relatime")
    if fstype == "tmpfs":
        sizes = [o.split("=", 1)[1] for o in kept if o.startswith("size=")]
        size = _size(sizes[-1]) if sizes else _memory() // 2
        if size is None:
            raise ValueError(f"bad value for size: {sizes[-1]}")
        kept = [o for o in kept if not o.startswith("size=")] + [f"size={(size + 4095) // 4096 * 4}k", "inode64"]
    return ",".join(out + kept)


def _fstab() -> list:
    entries = []
    for line in (state.read_text(FSTAB, "") or "").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 4:
            entries.append({"source": _unescape(fields[0]), "target": _unescape(fields[1]), "fstype": fields[2],
                            "options": fields[3].split(",")})
    return entries


def _mount(source: str, target: str, fstype: str, options: list) -> int:
    if not os.path.isdir(state.path(target)):
        sys.stderr.write(f"mount: {target}: mount point does not exist.\n")
        return 32
    try:
        rendered = kernel_options(fstype, options)
    except ValueError as exc:
        sys.stderr.write(f"mount: {target}: {exc}.\n")
        return 32
    table = _table()
    table.append({"source": source, "target": target, "fstype": fstype, "options": rendered})
    state.write_json(TABLE, table)
    return 0


def mount_all() -> None:
    """What systemd's local-fs and remote-fs targets mount at boot: every fstab entry but swap and noauto."""
    mounted = {m["target"] for m in _table()}
    for item in _fstab():
        if item["fstype"] == "swap" or "noauto" in item["options"] or item["target"] in mounted:
            continue
        if item["target"] in {m["target"] for m in real_mounts()}:
            continue   # the root and the runtime's own mounts
        if _mount(item["source"], item["target"], item["fstype"], item["options"]) == 0:
            mounted.add(item["target"])


def mount(argv: list) -> int:
    if not argv:
        for item in real_mounts() + _table():
            print(f"{item['source']} on {item['target']} type {item['fstype']} ({item['options']})")
        return 0
    if os.geteuid() != 0 and not os.environ.get("GPUCONF_SIM_ROOT"):
        sys.stderr.write("mount: only root can do that.\n")
        return 1
    fstype, options, words, all_entries = None, [], [], False
    args = iter(argv)
    for arg in args:
        if arg == "-t":
            fstype = next(args, None)
        elif arg == "-o":
            options = (next(args, "") or "").split(",")
        elif arg == "-a":
            all_entries = True
        else:
            words.append(arg)
    if all_entries:
        mount_all()
        return 0
    if "remount" in options and len(words) == 1:
        table = _table()
        for item in reversed(table):
            if item["target"] == words[0]:
                current = item["options"].split(",")
                names = {o.split("=", 1)[0] for o in options}
                merged = [o for o in current if o.split("=", 1)[0] not in names and o not in ("inode64",)] + options
                item["options"] = kernel_options(item["fstype"], [o for o in merged if o != "relatime"] +
                                                 (["relatime"] if "relatime" in current else []))
                state.write_json(TABLE, table)
                return 0
        sys.stderr.write(f"mount: {words[0]}: mount point not mounted or bad option.\n")
        return 32
    if len(words) == 1:
        for item in _fstab():
            if words[0] in (item["target"], item["source"]):
                if item["target"] in {m["target"] for m in _table()}:
                    sys.stderr.write(f"mount: {item['target']}: {item['source']} already mounted on {item['target']}.\n")
                    return 32
                return _mount(item["source"], item["target"], item["fstype"], item["options"])
        sys.stderr.write(f"mount: {words[0]}: can't find in /etc/fstab.\n")
        return 1
    if len(words) == 2 and fstype:
        return _mount(words[0], words[1], fstype, options)
    sys.stderr.write("mount: bad usage\nTry 'mount --help' for more information.\n")
    return 1


def umount(argv: list) -> int:
    targets = [a for a in argv if not a.startswith("-")]
    if not targets:
        sys.stderr.write("umount: bad usage\n")
        return 1
    table = _table()
    for index in range(len(table) - 1, -1, -1):
        if table[index]["target"] == targets[0] or table[index]["source"] == targets[0]:
            del table[index]
            state.write_json(TABLE, table)
            return 0
    sys.stderr.write(f"umount: {targets[0]}: not mounted.\n")
    return 32


def findmnt(argv: list) -> int:
    """``findmnt -l [-o COLUMNS]``: findmnt's flat list, its columns padded to the widest value."""
    columns = list(COLUMNS)
    if "-o" in argv:
        columns = [c.upper() for c in argv[argv.index("-o") + 1].split(",")]
    rows = [[item[c.lower()].replace(" ", "\\x20") for c in columns] for item in real_mounts() + _table()]
    if "-n" not in argv:
        rows.insert(0, columns)
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    for row in rows:
        print(" ".join(value.ljust(widths[i]) if i < len(columns) - 1 else value for i, value in enumerate(row)))
    return 0


def main(argv: list) -> int:
    tool, args = (argv[0], argv[1:]) if argv else ("mount", [])
    return {"mount": mount, "umount": umount, "findmnt": findmnt}[tool](args)


if __name__ == "__main__":
    entry.run(main)
