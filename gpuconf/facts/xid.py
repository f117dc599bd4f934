"""NVIDIA Xid events, the lost-GPU lines and recovery actions from kernel logs, and what
NVIDIA's Xid catalog says each code means; part of :mod:`gpuconf.facts.kernel`.

Line formats (all in ``fixtures/real/dmesg``)::

    NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s ...
    NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp ...
    NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000      (pre-2016: no pid)
    NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)
    NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.                     (no Xid: a lost GPU)

with any prefix :func:`gpuconf.facts.kernel.split_kernel_log` understands.

The catalog is data (``xid_catalog.csv`` next to this module): one row per Xid with its
severity (``fail``, ``warn``, ``info``), the action the vendor names and the source of
the row (NVIDIA's NVSentinel mapping, derived from the Xid catalog, and gpud's copy of
the catalog for the codes after 162). Two things decide over the table:

* the recovery action a line carries (Xid 154 "GPU recovery action changed ... to 0x2
  (Node Reboot Required)", or such text in any Xid line): the *new* action is what the
  GPU needs now;
* for the NVLink5 codes 144-150, NVIDIA's per-line decode (:mod:`gpuconf.facts.xid_decode`):
  the row its fields match decides, and an Xid 154 of the same GPU that follows the line
  decides over the row (the driver's recovery action, which the row's ``XID_154_EVAL``
  asks for); a line no row covers keeps the code's action and says so;
* a code not in the catalog warns, and the finding names it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache
from typing import Protocol, TypeVar

from gpuconf.facts.common import canonical_pci_address, packaged_table
from gpuconf.facts.kernel_log import KernelLogLine, split_kernel_log
from gpuconf.facts.xid_decode import DECODED, LineDecode, decode_line

FAIL, WARN, INFO = "fail", "warn", "info"
# What a finding may ask the remediation loop to do, mildest last.
ACTIONS = ("reboot_node", "drain_and_reset", "reset_gpu", "reset_bus", "drain", "drain_p2p", "recover_imex_domain",
           "contact_support", "restart_app", "none")


@dataclass(frozen=True)
class XidEntry:
    """One catalog row; ``known`` is False for a code the catalog does not have."""

    code: int
    mnemonic: str
    severity: str
    action: str
    vendor_resolution: str
    description: str
    source: str
    known: bool = True


@cache
def xid_catalog() -> dict[int, XidEntry]:
    """Every Xid of ``xid_catalog.csv``, by code."""
    return {int(row["xid"]): XidEntry(int(row["xid"]), row["mnemonic"], row["severity"], row["action"],
                                      row["vendor_resolution"], row["description"], row["source"])
            for row in packaged_table("xid_catalog.csv")}


def xid_entry(code: int) -> XidEntry:
    """The catalog's row for ``code``; an unknown code warns and asks for a human."""
    return xid_catalog().get(code) or XidEntry(code, "UNKNOWN", WARN, "contact_support", "",
                                               "not in NVIDIA's Xid catalog as gpuconf has it", "", known=False)


@dataclass(frozen=True)
class RecoveryAction:
    """What the driver says a GPU needs now: ``action`` is one of :data:`ACTIONS`,
    ``text`` as printed (``Node Reboot Required``, ``Reset``), ``value`` NVML's number
    when printed."""

    action: str
    text: str
    value: int | None = None

    @property
    def severity(self) -> str:
        return INFO if self.action == "none" else WARN if self.action == "recover_imex_domain" else FAIL


# NVML's nvmlDeviceGpuRecoveryAction_t (reference section 9); an unknown future value is drained.
RECOVERY_VALUES = {0: "none", 1: "reset_gpu", 2: "reboot_node", 3: "drain_p2p", 4: "drain_and_reset",
                   5: "recover_imex_domain", 6: "reset_bus", 7: "reboot_node"}
_CHANGED = re.compile(r"recovery action changed from 0x[0-9a-f]+ \([^)]*\) to (0x[0-9a-f]+) \(([^)]*)\)", re.I)
_REQUIRED = re.compile(r"GPU Reset Required|Node Reboot Required|OS Reboot|Drain and Reset|Drain P2P", re.I)


def recovery_from_text(text: str) -> str:
    """The action a recovery-action name means (``Node Reboot Required``, nvidia-smi's
    ``Reboot``, ``Drain and Reset``); ``drain`` for a name gpuconf does not know."""
    words = text.strip().lower()
    if words in ("none", "0x0"):
        return "none"
    if "drain" in words:
        return "drain_and_reset" if "reset" in words else "drain_p2p" if "p2p" in words else "drain"
    if "reboot" in words:
        return "reboot_node"
    if "bus" in words:
        return "reset_bus"
    if "reset" in words or "flr" in words:
        return "reset_gpu"
    if "imex" in words:
        return "recover_imex_domain"
    return "drain"


def recovery_in_message(message: str) -> RecoveryAction | None:
    """The recovery action an Xid line carries: the new value of "changed from A to B",
    else a "... Required" phrase; None when the line names none."""
    if match := _CHANGED.search(message):
        value = int(match.group(1), 16)
        action = RECOVERY_VALUES.get(value) or recovery_from_text(match.group(2))
        return RecoveryAction(action, match.group(2), value)
    if match := _REQUIRED.search(message):
        return RecoveryAction(recovery_from_text(match.group(0)), match.group(0))
    return None


@dataclass(frozen=True)
class XidEvent:
    """One Xid line. ``pci_address`` is canonical (``0000:9b:00.0``), ``bus_id`` as
    printed (``0000:9b:00``); ``pid``/``process_name`` are None when absent or
    ``<unknown>``; ``message`` is the text after the code; ``recovery`` the action the
    line itself names, which decides over the catalog."""

    code: int
    pci_address: str | None
    bus_id: str
    pid: int | None
    process_name: str | None
    message: str
    log: KernelLogLine
    recovery: RecoveryAction | None = None
    decode: LineDecode | None = None  # NVIDIA's per-line decode (144-150 only)
    followed_by: XidEvent | None = None  # the last Xid 154 of the GPU after this 144-150 line

    @property
    def entry(self) -> XidEntry:
        return xid_entry(self.code)

    @property
    def _recovery(self) -> RecoveryAction | None:
        """The recovery action that decides: the line's own, else that of the Xid 154 that follows it."""
        return self.recovery or (self.followed_by.recovery if self.followed_by is not None else None)

    @property
    def severity(self) -> str:
        recovery, decode = self._recovery, self.decode
        if recovery is not None:
            return recovery.severity
        return decode.row.severity if decode is not None and decode.row is not None else self.entry.severity

    @property
    def action(self) -> str:
        recovery, decode = self._recovery, self.decode
        if recovery is not None:
            return recovery.action
        return decode.row.action if decode is not None and decode.row is not None else self.entry.action

    @property
    def rule(self) -> str:
        """The table row (or line) that decided this line's severity and action."""
        if self.recovery:
            return f"xid_catalog.csv: {self.code}, the recovery action the line names"
        if self.followed_by is not None and self.followed_by.recovery is not None:
            return (f"the Xid 154 that follows on line {self.followed_by.log.line_number}: recovery action "
                    f"{self.followed_by.recovery.text}")
        if self.decode is not None:
            return self.decode.row.rule if self.decode.row is not None else \
                f"xid_catalog.csv: {self.code} ({self.decode.note}: the code's action)"
        return f"xid_catalog.csv: {self.code}"

    @property
    def group(self) -> int | None:
        """Lines of one code and GPU that the decode tells apart: the deciding row's number."""
        return self.decode.row.number if self.decode is not None and self.decode.row is not None else None


_XID = re.compile(
    r"\bXid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+)"
    r"(?:, pid=(?P<q>'?)(?P<pid>[^,']*)(?P=q), name=(?P<name>[^,]*))?(?:, ?(?P<message>.*))?$"
)


def parse_xid_events(text: str) -> tuple[XidEvent, ...]:
    """Every Xid event in a kernel log (dmesg in any format, journal, kmsg), in order. A
    last line with no newline after it may be cut short: it is read only when its code
    is whole (a comma follows) and, for Xid 154, its new recovery action is whole."""
    events: list[XidEvent] = []
    records = split_kernel_log(text)
    cut_line = records[-1].line_number if records and not text.endswith("\n") else None
    for record in records:
        match = _XID.search(record.message)
        if not match:
            continue
        if record.line_number == cut_line and not _whole(match, record.message):
            continue
        pid = match.group("pid")
        name = (match.group("name") or "").strip()
        message = (match.group("message") or "").strip()
        code = int(match.group("code"))
        decode = decode_line(code, message)
        if record.line_number == cut_line and decode is not None and decode.event is None:
            continue   # a 144-150 line cut before its errorStatus: the decode cannot be read
        events.append(XidEvent(
            code=code,
            pci_address=canonical_pci_address(match.group("bus")),
            bus_id=match.group("bus"),
            pid=int(pid) if pid and pid.isdigit() else None,
            process_name=None if name in ("", "<unknown>") else name,
            message=message,
            log=record,
            recovery=recovery_in_message(message),
            decode=decode,
        ))
    return _followed(events)


def _followed(events: list[XidEvent]) -> tuple[XidEvent, ...]:
    """Each 144-150 line with the last Xid 154 of its GPU after it, which decides over its decode."""
    last_154: dict[str | None, XidEvent] = {}
    out: list[XidEvent] = []
    for event in reversed(events):
        if event.code == 154 and event.recovery is not None:
            last_154.setdefault(event.pci_address, event)
        elif event.code in DECODED and event.pci_address in last_154:
            event = replace(event, followed_by=last_154[event.pci_address])
        out.append(event)
    return tuple(reversed(out))


# the lines gpuconf's GPU reset writes to the kernel log (gpuconf/remediate/reset.py), around each
# `nvidia-smi -r`: the start, and the end once the tool said the reset succeeded
E = TypeVar("E", bound="_Logged")


class _Logged(Protocol):
    @property
    def log(self) -> KernelLogLine: ...

    @property
    def pci_address(self) -> str | None: ...


_RESET_MARK = re.compile(r"\bgpuconf: (?:resetting GPU (?P<start>\S+)|GPU (?P<done>\S+) was reset|"
                         r"(?P<all_start>resetting all GPUs)|(?P<all_done>all GPUs were reset))\s*$")
EVERY_GPU = "*"


def completed_resets(text: str) -> dict[str, int]:
    """GPU (canonical PCI address, or EVERY_GPU) -> the line on which its last completed reset
    started: what was logged before that line, the reset has answered."""
    started: dict[str, int] = {}
    completed: dict[str, int] = {}
    for record in split_kernel_log(text):
        match = _RESET_MARK.search(record.message)
        if not match:
            continue
        gpu = EVERY_GPU if match.group("all_start") or match.group("all_done") else \
            canonical_pci_address(match.group("start") or match.group("done")) or ""
        if match.group("start") or match.group("all_start"):
            started[gpu] = record.line_number
        elif gpu in started:
            completed[gpu] = started[gpu]
    return completed


def after_resets(events: tuple[E, ...], text: str, gpus: bool = True) -> tuple[E, ...]:
    """The events a GPU reset has not answered: an event of a GPU logged before the start of a
    completed reset of that GPU (or of every GPU) is gone with it, as the reset is its remedy (the
    recovery action nvidia-smi reports now is read on its own). An event logged during or after the
    reset counts: failed hardware that fails again is not forgotten. `gpus=False` (NVSwitch SXids):
    only a reset of every GPU and NVSwitch answers them."""
    resets = completed_resets(text)
    if not resets:
        return events
    every = resets.get(EVERY_GPU, -1)
    return tuple(e for e in events if e.log.line_number >= max(
        resets.get(e.pci_address or "", -1) if gpus else -1, every))


def _whole(match: re.Match[str], message: str) -> bool:
    after = message[match.end("code"):]
    return after.startswith(",") and (match.group("code") != "154" or _CHANGED.search(message) is not None)


@dataclass(frozen=True)
class XidSummary:
    """Xid events grouped by GPU and code: one alarm per (GPU, code), not per line. The
    last event decides the severity and action (a recovery action changes over time)."""

    pci_address: str | None
    code: int
    count: int
    first: XidEvent
    last: XidEvent

    @property
    def severity(self) -> str:
        return self.last.severity

    @property
    def action(self) -> str:
        return self.last.action

    @property
    def rule(self) -> str:
        return self.last.rule


def summarise_xid_events(events: tuple[XidEvent, ...]) -> tuple[XidSummary, ...]:
    """Group events by (PCI address, code), in order of first appearance; the lines of a 144-150
    code are grouped by the decode row that decides them too (an ignored line and a fatal one of
    the same code are two findings)."""
    groups: dict[tuple[str | None, int, int | None], list[XidEvent]] = {}
    for event in events:
        groups.setdefault((event.pci_address, event.code, event.group), []).append(event)
    return tuple(XidSummary(address, code, len(items), items[0], items[-1])
                 for (address, code, _), items in groups.items())


@dataclass(frozen=True)
class LostGpu:
    """An NVRM line that means a GPU is gone (fallen off the bus, lost, or a fatal error
    that needs a reboot), with or without an Xid line next to it."""

    pci_address: str | None
    message: str
    log: KernelLogLine
    action: str = "reboot_node"


_LOST = re.compile(r"fallen off the bus|GPU is lost|NV_ERR_GPU_IS_LOST|lost from the bus|requiring os reboot", re.I)
_ADDRESS = re.compile(r"\b(?:PCI:)?((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-7])?)\b", re.I)
# Lines that mention a GPU address to describe it (not to report it lost) or end an earlier report
LOST_CANDIDATES = r"fallen off the bus|GPU is lost|NV_ERR_GPU_IS_LOST|lost from the bus|requiring os reboot"


def find_lost_gpus(text: str) -> tuple[LostGpu, ...]:
    """NVRM lines (not Xid lines: those are events) saying a GPU was lost, in order."""
    found: list[LostGpu] = []
    for record in split_kernel_log(text):
        message = record.message
        if "NVRM" not in message or _XID.search(message) or not _LOST.search(message):
            continue
        address = _ADDRESS.search(message.split("NVRM", 1)[1])
        found.append(LostGpu(canonical_pci_address(address.group(1)) if address else None, message, record))
    return tuple(found)
