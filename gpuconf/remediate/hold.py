"""Hardware holds: a node whose fault needs the hardware looked at (NVIDIA says contact support or
drain P2P, an Xid the catalog does not know fails, or a fault survived the reboot) is drained with
`gpuconf: hardware: Xid <n> GPU <serial> <PCI>`. Nothing of gpuconf's ever resumes it (the reason
is in gpuconf.scheduler.interface.HELD); a person does, after the RMA. `gpuconf hardware` lists them from
the history, with what a support case asks for.
"""
from __future__ import annotations

import json
import shlex
import time
from typing import TYPE_CHECKING, NotRequired, TypedDict

from gpuconf.facts.common import canonical_pci_address
from gpuconf.facts.wire import Request
from gpuconf.remediate.decision import Decision
from gpuconf.remediate.firmware import FIRMWARE
from gpuconf.remediate.history import Hold
from gpuconf.scheduler.interface import HARDWARE_PREFIX, reason_text

if TYPE_CHECKING:
    from gpuconf.connection.base import Connection

SERIAL_QUERY = ["nvidia-smi", "--query-gpu=pci.bus_id,serial", "--format=csv,noheader"]
SERIAL_TIMEOUT = 10.0
RECOVERY_NOTICE = "Xid 154"  # "GPU recovery action changed": its line names the action the driver asks for


def parse_serials(text: str) -> dict[str, str]:
    """`nvidia-smi --query-gpu=pci.bus_id,serial --format=csv,noheader`: serial by canonical PCI address.
    A GPU without a serial (`[N/A]`, consumer boards) is left out."""
    serials = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        address = canonical_pci_address(parts[0]) if len(parts) == 2 else None
        if address and parts[1] and not parts[1].startswith("["):
            serials[address] = parts[1]
    return serials


def hold_reason(decision: Decision, serials: dict[str, str]) -> str:
    """`gpuconf: hardware: Xid 79 GPU 1650924060039 0000:3b:00.0`; the driver's recovery action when no
    Xid decided it; `serial unknown` when nvidia-smi could not tell it. A firmware update the BMC
    failed names no GPU: `gpuconf: hardware: firmware: <what the BMC said>`."""
    if decision.code == FIRMWARE:
        return reason_text(f"{HARDWARE_PREFIX} {FIRMWARE}: {decision.finding}")
    pci = canonical_pci_address(decision.bus_id) or "PCI unknown"
    serial = serials.get(pci, "serial unknown")
    # Xid 154 is the driver saying which recovery it wants (drain_p2p, reboot...): the action is the fault's name
    notice = decision.code == RECOVERY_NOTICE
    what = f"{decision.action} ({decision.code})" if notice else decision.code or decision.action
    return reason_text(f"{HARDWARE_PREFIX} {what} GPU {serial} {pci}")


def hold_record(remediation: int, host: str, node: str, decision: Decision, reason: str,
                serials: dict[str, str], now: float | None = None) -> Hold:
    """The history's row for a hold; first and last seen are when gpuconf saw the fault (the check's
    finding counts the occurrences this boot)."""
    at = time.time() if now is None else now
    pci = canonical_pci_address(decision.bus_id) or ""
    return Hold(remediation, host, node, decision.code or decision.action, serials.get(pci, ""), pci,
                decision.count or 1, at, at, reason)


def read_serials(connection: Connection) -> dict[str, str]:
    """The GPUs' serials, read on the host over the run's connection; {} when nvidia-smi cannot tell
    (the hold is set all the same: a hung GPU must not keep a broken node in service)."""
    ops: list[Request] = [{"op": "run", "cmd": shlex.join(SERIAL_QUERY), "timeout": SERIAL_TIMEOUT, "check": False}]
    try:
        reply = connection.call(ops, readonly=False, timeout=SERIAL_TIMEOUT + 30, become=True)[0]
    except Exception:  # noqa: BLE001 - an unreachable host or a hung nvidia-smi: the serial stays unknown
        return {}
    return parse_serials(str(reply.get("out", ""))) if reply.get("rc") == 0 else {}


class HeldEntry(TypedDict):
    """One node, GPU and code over all its holds, as `gpuconf hardware --json` shows it."""

    host: str
    node: str
    serial: str
    pci: str
    code: str
    count: int
    first_seen: float
    last_seen: float
    reason: str
    bundle: str
    held: NotRequired[bool | None]  # still drained as a hardware hold; None: the scheduler was not asked


def merge(holds: list[Hold]) -> list[HeldEntry]:
    """One entry per node, GPU and code: the count and the times over all its holds."""
    merged: dict[tuple[str, str, str], HeldEntry] = {}
    for hold in holds:
        key = (hold.host, hold.pci, hold.code)
        entry = merged.get(key)
        if entry is None:
            merged[key] = HeldEntry(host=hold.host, node=hold.node, serial=hold.serial, pci=hold.pci, code=hold.code,
                                    count=hold.count, first_seen=hold.first_seen, last_seen=hold.last_seen,
                                    reason=hold.reason, bundle=hold.bundle)
            continue
        entry["count"] += hold.count
        entry["last_seen"] = max(entry["last_seen"], hold.last_seen)
        entry["first_seen"] = min(entry["first_seen"], hold.first_seen)
        if hold.serial:   # the latest hold's, where it has one
            entry["serial"] = hold.serial
        if hold.bundle:
            entry["bundle"] = hold.bundle
        if hold.reason:
            entry["reason"] = hold.reason
    return sorted(merged.values(), key=lambda e: (e["host"], e["pci"], e["code"]))


def listing(holds: list[Hold], held_now: dict[str, bool] | None, as_json: bool) -> str:
    """`gpuconf hardware`: the table, or JSON. `held_now`: node -> still drained as a hardware hold,
    when the scheduler could be asked."""
    entries = merge(holds)
    for entry in entries:
        entry["held"] = None if held_now is None else held_now.get(entry["node"], False)
    if as_json:
        return json.dumps({"holds": entries}, indent=2)
    if not entries:
        return "no hardware hold recorded"
    rows = [("HOST", "SERIAL", "PCI", "CODE", "COUNT", "FIRST SEEN (UTC)", "LAST SEEN (UTC)", "HELD", "BUNDLE")]
    for e in entries:
        held = "?" if e["held"] is None else ("yes" if e["held"] else "no (resumed)")
        rows.append((e["host"], e["serial"] or "unknown", e["pci"] or "unknown", e["code"], str(e["count"]),
                     _when(e["first_seen"]), _when(e["last_seen"]), held, e["bundle"] or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))
