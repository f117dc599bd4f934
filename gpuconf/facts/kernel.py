"""Kernel facts: ``/proc/modules``, ``/proc/sys/kernel/tainted``, and the kernel log
(line splitting, Xid and NVSwitch SXid events, nouveau evidence, lockups).

The log, Xid and SXid parsers live in :mod:`gpuconf.facts.kernel_log`,
:mod:`gpuconf.facts.xid` and :mod:`gpuconf.facts.sxid` (size); import everything from here.
The Xid catalog (``xid_catalog.csv``) is described in :mod:`gpuconf.facts.xid`, the SXid
table (``sxid_catalog.csv``) in :mod:`gpuconf.facts.sxid`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuconf.facts.common import lazy_exports

if TYPE_CHECKING:
    from gpuconf.facts.kernel_log import (
        BARE,
        CONTINUATION,
        DMESG,
        DMESG_CTIME,
        DMESG_ISO,
        HARD_LOCKUP,
        HUNG_TASK,
        JOURNAL_ISO,
        KMSG,
        NVIDIA_IOCTL,
        RCU_STALL,
        SOFT_LOCKUP,
        SYSLOG,
        KernelLogLine,
        LockupLine,
        NouveauEvidence,
        find_lockups,
        find_nouveau,
        parse_kernel_log_line,
        split_kernel_log,
    )
    from gpuconf.facts.sxid import (
        SXidEntry,
        SXidEvent,
        SXidSummary,
        parse_sxid_events,
        summarise_sxid_events,
        sxid_catalog,
        sxid_entry,
    )
    from gpuconf.facts.xid import (
        LostGpu,
        RecoveryAction,
        XidEntry,
        XidEvent,
        XidSummary,
        find_lost_gpus,
        parse_xid_events,
        recovery_in_message,
        summarise_xid_events,
        xid_catalog,
        xid_entry,
    )

# the log and Xid parsers load on first use: a check that reads /proc/modules needs neither
_WHERE = {name: module for module, names in {
    "gpuconf.facts.kernel_log": ("BARE", "CONTINUATION", "DMESG", "DMESG_CTIME", "DMESG_ISO", "HARD_LOCKUP",
        "HUNG_TASK", "JOURNAL_ISO", "KMSG", "NVIDIA_IOCTL", "RCU_STALL", "SOFT_LOCKUP", "SYSLOG", "KernelLogLine",
        "LockupLine", "NouveauEvidence", "find_lockups", "find_nouveau", "parse_kernel_log_line", "split_kernel_log"),
    "gpuconf.facts.xid": ("LostGpu", "RecoveryAction", "XidEntry", "XidEvent", "XidSummary", "find_lost_gpus",
        "parse_xid_events", "recovery_in_message", "summarise_xid_events", "xid_catalog", "xid_entry"),
    "gpuconf.facts.sxid": ("SXidEntry", "SXidEvent", "SXidSummary", "parse_sxid_events", "summarise_sxid_events",
        "sxid_catalog", "sxid_entry"),
}.items() for name in names}
__getattr__ = lazy_exports(globals(), _WHERE)


@dataclass(frozen=True)
class KernelModule:
    """A ``/proc/modules`` line: ``nvidia_uvm 1982464 0 - Live 0x0000000000000000 (POE)``.

    ``used_by`` lists the modules holding this one; ``state`` is ``Live``, ``Loading``
    or ``Unloading``; ``taint`` is the flag letters in parentheses (``POE``).
    """

    name: str
    size: int
    refcount: int | None
    used_by: tuple[str, ...]
    state: str | None
    address: str | None
    taint: str = ""


@dataclass(frozen=True)
class ProcModules:
    """All loaded modules; ``problems`` lists lines that did not parse."""

    modules: tuple[KernelModule, ...]
    problems: tuple[str, ...] = ()

    @property
    def names(self) -> frozenset[str]:
        """Names of loaded modules, e.g. ``"nouveau" in facts.names``."""
        return frozenset(module.name for module in self.modules)

    def get(self, name: str) -> KernelModule | None:
        """The module called ``name`` (``-`` and ``_`` are equivalent, as for modprobe)."""
        wanted = name.replace("-", "_")
        return next((m for m in self.modules if m.name == wanted), None)


_MODULE = re.compile(
    r"^(?P<name>\S+)\s+(?P<size>\d+)\s+(?P<ref>-?\d+|-)\s+(?P<deps>\S+)"
    r"(?:\s+(?P<state>Live|Loading|Unloading))?(?:\s+(?P<addr>0x[0-9a-fA-F]+))?"
    r"(?:\s+\((?P<taint>[A-Z]+)\))?\s*$"
)


def parse_proc_modules(text: str) -> ProcModules:
    """Parse ``cat /proc/modules`` (also ``lsmod``-free containers). Never raises."""
    modules: list[KernelModule] = []
    problems: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _MODULE.match(line.strip())
        if not match:
            problems.append(line)
            continue
        deps = match.group("deps")
        ref = match.group("ref")
        modules.append(
            KernelModule(
                name=match.group("name"),
                size=int(match.group("size")),
                refcount=int(ref) if ref != "-" else None,
                used_by=tuple(d for d in deps.split(",") if d and d != "-"),
                state=match.group("state"),
                address=match.group("addr"),
                taint=match.group("taint") or "",
            )
        )
    return ProcModules(tuple(modules), tuple(problems))


def parse_lsmod(text: str) -> ProcModules:
    """Parse `lsmod` (``Module  Size  Used by`` then ``name size count [holders]``): what a
    kernel without /proc/modules offers. lsmod shows no state, so ``state`` is None."""
    modules: list[KernelModule] = []
    problems: list[str] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[:2] == ["Module", "Size"]:
            continue
        if len(parts) < 3 or not parts[1].isdigit() or not parts[2].lstrip("-").isdigit():
            problems.append(line)
            continue
        holders = tuple(d for d in (parts[3] if len(parts) > 3 else "").split(",") if d and d != "-")
        modules.append(KernelModule(parts[0], int(parts[1]), int(parts[2]), holders, None, None))
    return ProcModules(tuple(modules), tuple(problems))


# Documentation/admin-guide/tainted-kernels.rst: bit -> (letter, meaning).
TAINT_FLAGS: dict[int, tuple[str, str]] = {
    0: ("P", "proprietary module loaded"),
    1: ("F", "module force-loaded"),
    2: ("S", "kernel running on an out-of-spec system"),
    3: ("R", "module force-unloaded"),
    4: ("M", "machine check exception"),
    5: ("B", "bad page referenced or unexpected page flags"),
    6: ("U", "taint requested by userspace"),
    7: ("D", "kernel died recently (OOPS or BUG)"),
    8: ("A", "ACPI table overridden"),
    9: ("W", "kernel issued a warning"),
    10: ("C", "staging driver loaded"),
    11: ("I", "platform firmware bug workaround applied"),
    12: ("O", "out-of-tree module loaded"),
    13: ("E", "unsigned module loaded"),
    14: ("L", "soft lockup occurred"),
    15: ("K", "kernel live patched"),
    16: ("X", "auxiliary taint (distribution-defined)"),
    17: ("T", "built with struct randomization plugin"),
    18: ("N", "in-kernel test run"),
    19: ("J", "fwctl mutating command issued"),
}


@dataclass(frozen=True)
class TaintFlag:
    """One set taint bit."""

    bit: int
    letter: str
    description: str


@dataclass(frozen=True)
class KernelTaint:
    """Decoded ``/proc/sys/kernel/tainted``. The NVIDIA proprietary driver alone sets
    P and O (and E when unsigned): those are expected, D/L/M/W are worth a warning."""

    value: int
    flags: tuple[TaintFlag, ...]

    @property
    def letters(self) -> str:
        """The flags as the kernel prints them in oopses, e.g. ``POE``."""
        return "".join(flag.letter for flag in self.flags)

    def has(self, letter: str) -> bool:
        """True when the flag with this letter is set."""
        return letter in self.letters


def decode_taint(text: str) -> KernelTaint | None:
    """Decode the integer in ``/proc/sys/kernel/tainted``; None if it is not a number."""
    stripped = text.strip()
    if not stripped.isdigit():
        return None
    value = int(stripped)
    flags = tuple(
        TaintFlag(bit, letter, description)
        for bit, (letter, description) in sorted(TAINT_FLAGS.items())
        if value & (1 << bit)
    )
    unknown = value & ~sum(1 << bit for bit in TAINT_FLAGS)
    if unknown:
        flags += tuple(
            TaintFlag(bit, "?", "unknown taint bit") for bit in range(unknown.bit_length())
            if unknown & (1 << bit)
        )
    return KernelTaint(value, flags)


__all__ = [
    "BARE", "CONTINUATION", "DMESG", "DMESG_CTIME", "DMESG_ISO", "HARD_LOCKUP", "HUNG_TASK",
    "JOURNAL_ISO", "KMSG", "NVIDIA_IOCTL", "RCU_STALL", "SOFT_LOCKUP", "SYSLOG",
    "TAINT_FLAGS", "KernelLogLine", "KernelModule", "KernelTaint",
    "LockupLine", "LostGpu", "NouveauEvidence", "ProcModules", "RecoveryAction", "TaintFlag", "XidEntry",
    "XidEvent", "XidSummary", "decode_taint", "find_lockups", "find_lost_gpus", "find_nouveau",
    "recovery_in_message", "xid_catalog", "xid_entry",
    "parse_kernel_log_line", "parse_proc_modules", "parse_xid_events", "split_kernel_log",
    "summarise_xid_events", "SXidEntry", "SXidEvent", "SXidSummary", "parse_sxid_events",
    "summarise_sxid_events", "sxid_catalog", "sxid_entry",
]


@dataclass(frozen=True)
class BootEntry:
    """One boot entry of `grubby --info=ALL`: its kernel image and its command-line arguments."""

    index: int
    kernel: str
    args: tuple[str, ...]


def parse_grubby_info(text: str) -> tuple[BootEntry, ...]:
    """`grubby --info=ALL`: blocks of `key=value` lines, each starting with `index=N`; values
    may be quoted. An entry cut before its `args` line is left out (not known)."""
    entries: list[BootEntry] = []
    block: dict[str, str] = {}

    def close() -> None:
        if "index" in block and "kernel" in block and "args" in block and block["index"].isdigit():
            entries.append(BootEntry(int(block["index"]), block["kernel"], tuple(block["args"].split())))

    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "index":
            close()
            block = {}
        block[key] = value.strip().strip('"')
    close()
    return tuple(entries)
