"""NVSwitch SXid events from kernel logs, and what NVIDIA's Fabric Manager guide says each
code means; part of :mod:`gpuconf.facts.kernel`.

The NVSwitch driver reports its errors like Xids, one event as several lines that share the
code (``fixtures/real/dmesg/sxid-20034-xid-79-nvswitch-gpud-readme.txt``)::

    nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up
    nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 Sub-engine instance 00
    nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000, 0x10000000, ...}
    nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)

Only the first line of an event says ``Fatal`` or ``Non-fatal``: that word is the driver's
verdict on this occurrence, and it decides over the table (many codes are *potentially*
fatal). The table (``sxid_catalog.csv`` next to this module) is the guide's appendix "NVSwitch
SXid Errors" (DU-09883-001 v1.3): its section (non-fatal, fatal, always fatal, other notable),
the recovery it names, and the action gpuconf takes from it:

* always fatal: "Restart the host to reset the entire fabric/system" -> ``reboot_node``;
* fatal: "Restart the guest VM to see if the associated NVSwitch comes back up" -> on bare
  metal the host is the only partition, so ``reboot_node``;
* "Reset all GPUs and all NVSwitches" -> ``drain_and_reset``;
* non-fatal with "Not Applicable" (single-bit ECC the switch corrects) -> ``info``.

A ``Fatal`` line of a code the table does not have fails and asks for a reboot; a
``Non-fatal`` one warns.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from gpuconf.facts.common import canonical_pci_address, packaged_table
from gpuconf.facts.kernel_log import KernelLogLine, split_kernel_log

FAIL, WARN, INFO = "fail", "warn", "info"
ALWAYS_FATAL, FATAL, NON_FATAL, OTHER = "always_fatal", "fatal", "non_fatal", "other"
# actions a fatal occurrence may take from the table; any other row's action gives way to a reboot
FATAL_ACTIONS = ("reboot_node", "drain_and_reset")


@dataclass(frozen=True)
class SXidEntry:
    """One row of the guide's SXid table; ``known`` is False for a code it does not list."""

    code: int
    name: str
    category: str
    severity: str
    action: str
    guide_recovery: str
    source: str
    known: bool = True


@cache
def sxid_catalog() -> dict[int, SXidEntry]:
    """Every SXid of ``sxid_catalog.csv``, by code."""
    return {int(row["sxid"]): SXidEntry(int(row["sxid"]), row["name"], row["category"], row["severity"],
                                        row["action"], row["guide_recovery"], row["source"])
            for row in packaged_table("sxid_catalog.csv")}


def sxid_entry(code: int) -> SXidEntry:
    """The table's row for ``code``; an unknown code is judged by its line's Fatal/Non-fatal."""
    return sxid_catalog().get(code) or SXidEntry(code, "UNKNOWN", OTHER, WARN, "contact_support", "",
                                                 "", known=False)


@dataclass(frozen=True)
class SXidEvent:
    """One SXid line. ``switch`` is the driver's instance (``nvidia-nvswitch1`` -> 1, None when
    the prefix is absent), ``pci_address`` canonical; ``fatal`` is True/False on the line that
    says ``Fatal``/``Non-fatal`` and None on an event's detail lines (``Severity ...``,
    ``Data {...}``); ``message`` is the text after the code (and the verdict)."""

    code: int
    switch: int | None
    pci_address: str | None
    fatal: bool | None
    message: str
    log: KernelLogLine

    @property
    def entry(self) -> SXidEntry:
        return sxid_entry(self.code)


_SXID = re.compile(
    r"(?:\bnvidia-nvswitch(?P<switch>\d+): )?\bSXid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+),"
    r"(?: (?P<verdict>Fatal|Non-fatal)(?=,|$),?)?\s*(?P<message>.*)$"
)


def parse_sxid_events(text: str) -> tuple[SXidEvent, ...]:
    """Every SXid line in a kernel log (any format :func:`split_kernel_log` reads), in order.
    A last line with no newline after it may be cut short: it is read only when its code is
    whole (the comma after it is there) and, when it starts with ``F`` or ``N``, its verdict
    is whole too (``Fat`` is neither Fatal nor a detail line)."""
    events: list[SXidEvent] = []
    records = split_kernel_log(text)
    cut_line = records[-1].line_number if records and not text.endswith("\n") else None
    for record in records:
        match = _SXID.search(record.message)
        if not match:
            continue
        verdict = match.group("verdict")
        if record.line_number == cut_line and verdict is None and _maybe_cut_verdict(match.group("message")):
            continue
        switch = match.group("switch")
        events.append(SXidEvent(
            code=int(match.group("code")),
            switch=int(switch) if switch is not None else None,
            pci_address=canonical_pci_address(match.group("bus")),
            fatal=None if verdict is None else verdict == "Fatal",
            message=match.group("message").strip(),
            log=record,
        ))
    return tuple(events)


def _maybe_cut_verdict(rest: str) -> bool:
    """Whether the text after the code could be the start of "Fatal" or "Non-fatal"."""
    word = rest.strip().split(",", 1)[0]
    return not rest.strip() or any(full.startswith(word) for full in ("Fatal", "Non-fatal"))


@dataclass(frozen=True)
class SXidSummary:
    """The SXid events of one switch and code this boot: ``occurrences`` counts the lines that
    carry a verdict (an event's detail lines are part of it), at least 1; ``fatal`` is True
    when any occurrence was Fatal, False when all said Non-fatal, None when none said;
    ``first`` is the first line with a verdict (it says what happened), else the first line."""

    pci_address: str | None
    switch: int | None
    code: int
    occurrences: int
    fatal: bool | None
    first: SXidEvent

    @property
    def entry(self) -> SXidEntry:
        return sxid_entry(self.code)

    @property
    def severity(self) -> str:
        entry = self.entry
        if self.fatal or entry.category == ALWAYS_FATAL:
            return FAIL
        if self.fatal is False and entry.category == FATAL:
            return WARN   # a potentially fatal code the driver judged non-fatal this time
        return entry.severity

    @property
    def action(self) -> str:
        entry = self.entry
        if self.severity == FAIL:
            return entry.action if entry.action in FATAL_ACTIONS else "reboot_node"
        if self.fatal is False and entry.category == FATAL:
            return "none"
        return entry.action


def summarise_sxid_events(events: tuple[SXidEvent, ...]) -> tuple[SXidSummary, ...]:
    """Group events by (switch PCI address, code), in order of first appearance."""
    groups: dict[tuple[str | None, int], list[SXidEvent]] = {}
    for event in events:
        groups.setdefault((event.pci_address, event.code), []).append(event)
    summaries = []
    for (address, code), items in groups.items():
        verdicts = [e.fatal for e in items if e.fatal is not None]
        fatal = any(verdicts) if verdicts else None
        headline = next((e for e in items if e.fatal is not None), items[0])
        summaries.append(SXidSummary(address, items[0].switch, code, max(1, len(verdicts)), fatal, headline))
    return tuple(summaries)
