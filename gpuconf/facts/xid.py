"""NVIDIA Xid events from kernel logs, and what each code usually means; part of
:mod:`gpuconf.facts.kernel`.

Line formats (all in ``fixtures/real/dmesg``)::

    NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s ...
    NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp ...
    NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000      (pre-2016: no pid)

with any prefix :func:`gpuconf.facts.kernel.split_kernel_log` understands.

Classification table (:data:`XID_CLASSES`), after NVIDIA's Xid catalogue and the
health-probe issue. Categories:

=====================  ==================  =================================================
category               codes               meaning / usual action
=====================  ==================  =================================================
``fallen_off_bus``     79                  GPU no longer on PCIe: node needs a reboot/repair
``ecc``                48 63 64 94 95      DBE, row remap recorded / failed, contained and
                                           uncontained ECC: reset the GPU, RMA on repeats
``gsp``                119 120             GSP firmware RPC timeout / error: reset; see the
                                           ``gsp`` role (``NVreg_EnableGpuFirmware=0``)
``application``        13 31 43 45         graphics exception, MMU fault, stopped channel,
                                           preemptive cleanup: usually the user's program
``nvlink``             32 74               74 is an NVLink error. 32 ("invalid or corrupted
                                           push buffer stream") is grouped here as the
                                           project brief asks; NVIDIA's catalogue attributes
                                           it to driver, memory or PCIe bus faults.
``unknown``            anything else       reported with its code, never dropped
=====================  ==================  =================================================
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import canonical_pci_address
from gpuconf.facts.kernel_log import KernelLogLine, split_kernel_log

FALLEN_OFF_BUS = "fallen_off_bus"
ECC = "ecc"
GSP = "gsp"
APPLICATION = "application"
NVLINK = "nvlink"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class XidClass:
    """A code's category (module constants) and NVIDIA's short description."""

    code: int
    category: str
    description: str


XID_CLASSES: dict[int, XidClass] = {
    c.code: c
    for c in (
        XidClass(79, FALLEN_OFF_BUS, "GPU has fallen off the bus"),
        XidClass(48, ECC, "Double bit ECC error (DBE)"),
        XidClass(63, ECC, "ECC page retirement or row remapping recorded"),
        XidClass(64, ECC, "ECC page retirement or row remapper recording failure"),
        XidClass(94, ECC, "Contained ECC error"),
        XidClass(95, ECC, "Uncontained ECC error"),
        XidClass(119, GSP, "GSP RPC timeout"),
        XidClass(120, GSP, "GSP error"),
        XidClass(13, APPLICATION, "Graphics engine exception"),
        XidClass(31, APPLICATION, "GPU memory page fault"),
        XidClass(43, APPLICATION, "GPU stopped processing"),
        XidClass(45, APPLICATION, "Preemptive cleanup, due to previous errors"),
        XidClass(32, NVLINK, "Invalid or corrupted push buffer stream"),
        XidClass(74, NVLINK, "NVLink error"),
    )
}


def classify_xid(code: int) -> XidClass:
    """The :class:`XidClass` for ``code``; category ``unknown`` for unlisted codes."""
    return XID_CLASSES.get(code, XidClass(code, UNKNOWN, "not in gpuconf's Xid table"))


@dataclass(frozen=True)
class XidEvent:
    """One Xid line. ``pci_address`` is canonical (``0000:9b:00.0``), ``bus_id`` as
    printed (``0000:9b:00``); ``pid``/``process_name`` are None when absent or
    ``<unknown>``; ``message`` is the text after the code."""

    code: int
    category: str
    pci_address: str | None
    bus_id: str
    pid: int | None
    process_name: str | None
    message: str
    log: KernelLogLine


_XID = re.compile(
    r"\bXid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+)"
    r"(?:, pid=(?P<q>'?)(?P<pid>[^,']*)(?P=q), name=(?P<name>[^,]*))?(?:, ?(?P<message>.*))?$"
)


def parse_xid_events(text: str) -> tuple[XidEvent, ...]:
    """Every Xid event in a kernel log (dmesg in any format, journal, kmsg), in order."""
    events: list[XidEvent] = []
    for record in split_kernel_log(text):
        match = _XID.search(record.message)
        if not match:
            continue
        code = int(match.group("code"))
        pid = match.group("pid")
        name = (match.group("name") or "").strip()
        events.append(
            XidEvent(
                code=code,
                category=classify_xid(code).category,
                pci_address=canonical_pci_address(match.group("bus")),
                bus_id=match.group("bus"),
                pid=int(pid) if pid and pid.isdigit() else None,
                process_name=None if name in ("", "<unknown>") else name,
                message=(match.group("message") or "").strip(),
                log=record,
            )
        )
    return tuple(events)


@dataclass(frozen=True)
class XidSummary:
    """Xid events grouped by GPU and code: one alarm per (GPU, code), not per line."""

    pci_address: str | None
    code: int
    category: str
    count: int
    first: XidEvent
    last: XidEvent


def summarise_xid_events(events: tuple[XidEvent, ...]) -> tuple[XidSummary, ...]:
    """Group events by (PCI address, code), in order of first appearance."""
    groups: dict[tuple[str | None, int], list[XidEvent]] = {}
    for event in events:
        groups.setdefault((event.pci_address, event.code), []).append(event)
    return tuple(
        XidSummary(address, code, items[0].category, len(items), items[0], items[-1])
        for (address, code), items in groups.items()
    )
