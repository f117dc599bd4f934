"""Kernel log lines in every format a host hands us; part of :mod:`gpuconf.facts.kernel`.

:func:`split_kernel_log` turns any of these into :class:`KernelLogLine` records::

    [   76.970851] bbswitch: enabling discrete graphics             dmesg
    [Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, ...  dmesg -T
    2024-11-15T12:02:03,470068+00:00 NVRM: Xid (...): 48, ...        dmesg --time-format=iso
    kern  :warn  : 2025-01-21T02:21:33,498559+00:00 NVRM: Xid ...    dmesg --decode --time-format=iso
    2025-01-17T17:10:43+0000 host kernel: IPv6: ...                  journalctl -k -o short-iso
    Aug 17 06:18:01 host systemd-networkd[5398]: ib6: lost carrier   journalctl / syslog
    6,3964,206764307,-;nvidia-nvswitch2: open (major=510)            /dev/kmsg records
    Jul 18 21:08:48 kernel: NVRM: Xid (PCI:0000:41:00): 79, ...         syslog without its host
    NVRM: Xid (PCI:0018:01:00): 149, ...                             no timestamp (journalctl -o cat)
    kernel: NVRM: knvlinkDiscoverPostRxDetLinks_GB100_REV2: ...      no timestamp, the journal's source

A record may span lines (one printk with newlines, or a message the driver prints in parts)::

    [ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
                   NVRM: (PCI ID: 10de:26b5) installed in this system has
                   NVRM: fallen off the bus and is not responding to commands.

A line that is indented, or that has no prefix in a log whose lines have one, continues the
record before it: :func:`split_kernel_log` joins it to that record's message (with a space), so
the judges see the whole record (the address on the first line, the verdict on the last). In a
log with no prefix at all every line is its own record (format ``bare``). The remote runner's
filter keeps whole records by the same rule (``records`` in gpuconf/facts/wire.py ExecRequest).

Timestamps are kept as printed (``timestamp``) because the formats disagree on zone
and epoch; ``monotonic_s`` is set when the line carries seconds since boot (plain
dmesg, kmsg), which is what "since this boot" comparisons need.

Also here: nouveau evidence and NVRM lockup detection.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

DMESG = "dmesg"
DMESG_CTIME = "dmesg-ctime"
DMESG_ISO = "dmesg-iso"
JOURNAL_ISO = "journal-iso"
SYSLOG = "syslog"
KMSG = "kmsg"
CONTINUATION = "continuation"  # a line with no prefix (parse_kernel_log_line): it continues a record
BARE = "bare"  # a record of a log without timestamps (`NVRM: ...`, `kernel: NVRM: ...`)

_KMSG_LEVELS = ("emerg", "alert", "crit", "err", "warn", "notice", "info", "debug")


@dataclass(frozen=True)
class KernelLogLine:
    """One log record: ``message`` is the text after every prefix.

    ``format`` is one of the module constants (``dmesg``, ``dmesg-iso``, ``kmsg`` ...);
    ``source`` is the journal identifier (``kernel``, ``systemd-networkd``) when present;
    ``level`` comes from ``--decode`` or the kmsg priority; ``sequence`` from kmsg;
    ``last_line`` is the number of the record's last line (its continuation lines').
    """

    message: str
    format: str
    timestamp: str | None = None
    monotonic_s: float | None = None
    level: str | None = None
    facility: str | None = None
    source: str | None = None
    host: str | None = None
    sequence: int | None = None
    line_number: int = 0
    last_line: int = 0


_KMSG = re.compile(r"^(\d+),(\d+),(\d+),[^;]*;(.*)$")
# dmesg --decode's facility and level: only syslog's own words (`NVRM: nvCheckOkFailedNoLog: ...` is not one)
_FACILITIES = "kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|res0|res1|res2|res3|local[0-7]"
_DECODE = re.compile(rf"^({_FACILITIES})\s*:\s*(emerg|alert|crit|err|warn|notice|info|debug)\s*: (.*)$")
_BARE_SOURCE = re.compile(r"^(kernel): (.*)$")
_MONOTONIC = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")
_CTIME = re.compile(r"^\[(\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s?(.*)$")
_ISO_DMESG = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+[+-]\d\d:?\d\d)\s(.*)$")
_ISO_JOURNAL = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d{4}|Z)?)\s(\S+)\s([^:\[\s]+)(?:\[\d+\])?: ?(.*)$"
)
_SYSLOG = re.compile(r"^(\w{3} [ \d]\d \d\d:\d\d:\d\d)\s(\S+)\s([^:\[\s]+)(?:\[\d+\])?: ?(.*)$")
_SYSLOG_NO_HOST = re.compile(r"^(\w{3} [ \d]\d \d\d:\d\d:\d\d)\s([^:\[\s]+)(?:\[\d+\])?: (.*)$")


def parse_kernel_log_line(line: str, line_number: int = 0) -> KernelLogLine:
    """Classify and split one line (see the module docstring for the formats)."""
    if match := _KMSG.match(line):
        priority, sequence, usec, message = match.groups()
        return KernelLogLine(message, KMSG, monotonic_s=int(usec) / 1e6,
                             level=_KMSG_LEVELS[int(priority) & 7], sequence=int(sequence),
                             line_number=line_number)
    facility = level = None
    rest = line
    if match := _DECODE.match(line):
        facility, level, rest = match.groups()
    if match := _MONOTONIC.match(rest):
        return KernelLogLine(match.group(2), DMESG, match.group(1), float(match.group(1)),
                             level, facility, "kernel", line_number=line_number)
    if match := _CTIME.match(rest):
        return KernelLogLine(match.group(2), DMESG_CTIME, match.group(1), None, level, facility,
                             "kernel", line_number=line_number)
    if match := _ISO_DMESG.match(rest):
        return KernelLogLine(match.group(2), DMESG_ISO, match.group(1), None, level, facility,
                             "kernel", line_number=line_number)
    if match := _ISO_JOURNAL.match(rest):
        stamp, host, source, message = match.groups()
        return KernelLogLine(message, JOURNAL_ISO, stamp, None, level, facility, source, host,
                             line_number=line_number)
    if match := _SYSLOG_NO_HOST.match(rest):   # a syslog line whose host was left out
        stamp, source, message = match.groups()
        return KernelLogLine(message, SYSLOG, stamp, None, level, facility, source, line_number=line_number)
    if match := _SYSLOG.match(rest):
        stamp, host, source, message = match.groups()
        return KernelLogLine(message, SYSLOG, stamp, None, level, facility, source, host,
                             line_number=line_number)
    if match := _BARE_SOURCE.match(rest):
        return KernelLogLine(match.group(2), BARE, None, None, level, facility, match.group(1),
                             line_number=line_number)
    return KernelLogLine(rest.strip(), CONTINUATION, level=level, facility=facility,
                         line_number=line_number)


def _records(text: str) -> list[list[tuple[int, str, KernelLogLine]]]:
    """The non-empty lines of a log grouped in records: (line number, line, its parse) each."""
    groups: list[list[tuple[int, str, KernelLogLine]]] = []
    prefixed = False
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or (raw.startswith(" ") and "=" in raw and groups
                               and groups[-1][0][2].format == KMSG):
            continue   # kmsg's metadata (` SUBSYSTEM=pci`) under its record
        line = parse_kernel_log_line(raw.rstrip(), number)
        if groups and (raw[:1].isspace() or (line.format == CONTINUATION and prefixed)):
            groups[-1].append((number, raw, line))
            continue
        prefixed = prefixed or line.format not in (BARE, CONTINUATION)
        groups.append([(number, raw, line)])
    return groups


def split_kernel_log(text: str) -> tuple[KernelLogLine, ...]:
    """Every record as a :class:`KernelLogLine`, in order: a line that is indented, or has no
    prefix in a log whose lines have one, is joined to the record before it (see the module's
    docstring); in a log without prefixes each line is a record of format ``bare``.

    kmsg metadata lines (`` SUBSYSTEM=pci``, indented under a record) are dropped.
    """
    records = []
    for group in _records(text):
        first = group[0][2]
        message = " ".join([first.message, *(raw.strip() for _, raw, _ in group[1:])])
        records.append(replace(first, message=message, last_line=group[-1][0],
                               format=BARE if first.format == CONTINUATION else first.format))
    return tuple(records)


def grep_records(text: str, pattern: str, tail: int | None = None) -> str:
    """The lines of the records (the last `tail` of them) that have a line matching `pattern`
    (case-insensitive), whole: what the remote runner's `records` filter keeps (its copy of the
    rule, gpuconf/connection/remote/reads.py log_records, is held to this one by a test)."""
    search = re.compile(pattern, re.IGNORECASE).search
    kept = [group for group in _records(text) if any(search(raw) for _, raw, _ in group)]
    return "".join(raw + "\n" for group in kept[-tail if tail else 0:] for _, raw, _ in group)


@dataclass(frozen=True)
class NouveauEvidence:
    """What the log says about nouveau.

    ``lines`` are nouveau's own messages (nouveau bound a GPU at some point);
    ``nvidia_probe_conflict`` is NVRM's "The NVIDIA probe routine was not called for N
    device(s)" / "nouveau, rivafb, nvidiafb or rivatv ... obtained ownership" message,
    with ``devices_not_probed`` = N.
    """

    lines: tuple[KernelLogLine, ...]
    chipset: str | None
    nvidia_probe_conflict: bool
    devices_not_probed: int | None

    @property
    def present(self) -> bool:
        """True when nouveau logged anything or NVRM blamed a conflicting driver."""
        return bool(self.lines) or self.nvidia_probe_conflict


_NOUVEAU = re.compile(r"^nouveau(?:\s|:)")
_CHIPSET = re.compile(r"Chipset: (\S+(?: \(NV\w+\))?)|nouveau \S+: NVIDIA (\S+)")
_PROBE = re.compile(r"NVIDIA probe routine was not called for (\d+) device", re.I)


def find_nouveau(text: str) -> NouveauEvidence:
    """Look for nouveau in a kernel log (any format :func:`split_kernel_log` reads)."""
    records = split_kernel_log(text)
    lines = tuple(r for r in records if _NOUVEAU.match(r.message))
    chipset = next((m.group(1) or m.group(2) for r in lines if (m := _CHIPSET.search(r.message))), None)
    probe = next((m for r in records if (m := _PROBE.search(r.message))), None)
    owned = any("rivafb, nvidiafb or rivatv" in r.message for r in records)
    return NouveauEvidence(lines, chipset, bool(probe) or owned,
                           int(probe.group(1)) if probe else None)


SOFT_LOCKUP = "soft_lockup"
HARD_LOCKUP = "hard_lockup"
HUNG_TASK = "hung_task"
RCU_STALL = "rcu_stall"
NVIDIA_IOCTL = "nvidia_ioctl"


@dataclass(frozen=True)
class LockupLine:
    """A lockup symptom: ``kind`` is one of ``soft_lockup``, ``hard_lockup``,
    ``hung_task``, ``rcu_stall``, ``nvidia_ioctl`` (a stack frame in the NVIDIA ioctl
    path, which is how a wedged driver shows up in those traces)."""

    kind: str
    line: KernelLogLine
    task: str | None = None


_LOCKUPS = (
    (SOFT_LOCKUP, re.compile(r"soft lockup - CPU#\d+ stuck for \S+ \[([^\]]+)\]|soft lockup", re.I)),
    (HARD_LOCKUP, re.compile(r"hard LOCKUP", re.I)),
    (HUNG_TASK, re.compile(r"task (\S+) blocked for more than \d+ seconds", re.I)),
    (RCU_STALL, re.compile(r"rcu\w*: INFO: rcu_\w+ (?:self-)?detected stall", re.I)),
    (NVIDIA_IOCTL, re.compile(r"nvidia_(?:unlocked_)?ioctl", re.I)),
)


def find_lockups(text: str) -> tuple[LockupLine, ...]:
    """Lockup and hang symptoms in a kernel log, in order (a warning for health checks)."""
    found: list[LockupLine] = []
    for record in split_kernel_log(text):
        for kind, pattern in _LOCKUPS:
            match = pattern.search(record.message)
            if match:
                task = match.group(1) if match.groups() else None
                found.append(LockupLine(kind, record, task))
                break
    return tuple(found)
