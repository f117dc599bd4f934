"""Mounts: what the kernel has mounted (`findmnt -l -o TARGET,SOURCE,FSTYPE,OPTIONS`, findmnt's
flat list, from /proc/self/mountinfo) and what `/etc/fstab` asks for at boot. Pure parses, tested
on real captures (tests/fixtures/real/findmnt, fstab), and the option rules that compare the two:
the kernel prints a tmpfs `size=64G` as `size=67108864k`, and fstab-only words (`defaults`,
`nofail`, `_netdev`, `x-systemd.*`) never appear in the mount table."""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import reads_whole_lines

FINDMNT = ["findmnt", "-l", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS"]
UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50, "e": 1 << 60}
# words of fstab's options that are instructions to mount(8) or systemd, not options the kernel shows
FSTAB_ONLY = {"defaults", "auto", "noauto", "nofail", "user", "users", "nouser", "owner", "group", "_netdev",
              "suid", "dev", "exec", "async"}
SIZED = {"size", "nr_blocks"}


@dataclass(frozen=True)
class Mount:
    target: str
    source: str
    fstype: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class FstabEntry:
    """One line of /etc/fstab; `line` is its 0-based line number in the file."""

    spec: str
    file: str
    vfstype: str
    options: tuple[str, ...]
    freq: int
    passno: int
    line: int


def _unescape(text: str) -> str:
    """findmnt and fstab write a space in a path as `\\x20` (findmnt) or `\\040` (fstab)."""
    text = re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text)
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


@reads_whole_lines
def parse_findmnt_list(text: str) -> tuple[Mount, ...]:
    """`findmnt -l -o TARGET,SOURCE,FSTYPE,OPTIONS`: a header, then one mount a line (columns
    separated by spaces, spaces inside a value escaped). A last line cut short is left out."""
    mounts = []
    for line in text.splitlines():
        columns = line.split()
        if len(columns) != 4 or columns == ["TARGET", "SOURCE", "FSTYPE", "OPTIONS"]:
            continue
        target, source, fstype, options = (_unescape(c) for c in columns)
        mounts.append(Mount(target, source, fstype, tuple(options.split(","))))
    return tuple(mounts)


@reads_whole_lines
def parse_fstab(text: str) -> tuple[FstabEntry, ...]:
    """Entries of /etc/fstab (fields separated by spaces or tabs, `#` comments, whole or after the
    fields); a line with fewer than 4 fields is no entry. freq and passno default to 0."""
    entries = []
    for number, raw in enumerate(text.splitlines()):
        line = raw.split("#", 1)[0].strip()
        fields = line.split()
        if len(fields) < 4:
            continue
        numbers = [int(f) if f.isdigit() else 0 for f in fields[4:6]] + [0, 0]
        entries.append(FstabEntry(_unescape(fields[0]), _unescape(fields[1]), fields[2], tuple(fields[3].split(",")),
                                  numbers[0], numbers[1], number))
    return tuple(entries)


def size_bytes(value: str, memory_bytes: int | None = None) -> int | None:
    """`64G`, `67108864k`, `50%` (of `memory_bytes`) as bytes; None when it is none of these."""
    match = re.fullmatch(r"(\d+)([kmgtpeKMGTPE]?)|(\d+)%", value.strip())
    if not match:
        return None
    if match.group(3) is not None:
        return None if memory_bytes is None else memory_bytes * int(match.group(3)) // 100
    return int(match.group(1)) * UNITS[match.group(2).lower()]


def kernel_options(options: tuple[str, ...] | list[str]) -> list[str]:
    """The options of an fstab entry or a mount command that the mount table will show."""
    return [o for o in options if o and o not in FSTAB_ONLY and not o.startswith(("x-", "comment="))]


def missing_options(wanted: list[str], mounted: tuple[str, ...], memory_bytes: int | None = None) -> list[str]:
    """The wanted options the mounted filesystem does not have, sizes compared in bytes (the kernel
    rounds a tmpfs size to pages and prints it in k)."""
    have = set(mounted)
    have_sizes = {o.split("=", 1)[0]: size_bytes(o.split("=", 1)[1]) for o in mounted
                  if "=" in o and o.split("=", 1)[0] in SIZED}
    missing = []
    for option in kernel_options(wanted):
        name, _, value = option.partition("=")
        if name in SIZED and value:
            want = size_bytes(value, memory_bytes)
            have_size = have_sizes.get(name)
            if want is None or have_size is None or abs(want - have_size) >= 4096:
                missing.append(option)
        elif option not in have and not (option == "rw" and "ro" not in have):
            missing.append(option)
    return missing


def meminfo_bytes(text: str, field: str = "MemTotal") -> int | None:
    for line in text.splitlines():
        if line.startswith(field + ":"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None
