"""One read of a BMC for a check: the firmware inventory, every member, the update service and
each system's BIOS attributes, fetched through a read-only session and parsed by
`gpuconf/facts/redfish.py`. As a fact (`inventory_fact`) it is read on the controller, not on the
host: the engine's session gathers it beside the host's reads and caches it until a change."""
from __future__ import annotations

from typing import Any

from gpuconf.bmc.client import BmcEndpoint, BmcError, ReadOnly, Session
from gpuconf.facts.base import Fact, FactUnavailable
from gpuconf.facts.redfish import FIRMWARE_INVENTORY, SYSTEMS, UPDATE_SERVICE, BmcInventory, inventory, members


def read_payloads(reader: ReadOnly) -> dict[str, Any]:
    """Every payload an inventory needs, by path. A member that cannot be read is left out (the
    parse names it as a problem); the collection itself must be read."""
    payloads: dict[str, Any] = {FIRMWARE_INVENTORY: reader.get(FIRMWARE_INVENTORY)}
    for path in members(payloads[FIRMWARE_INVENTORY]):
        try:
            payloads[path] = reader.get(path)
        except BmcError:
            payloads[path] = None
    payloads[UPDATE_SERVICE] = reader.get(UPDATE_SERVICE)
    for system in members(reader.get(SYSTEMS)):
        bios = reader.get(system).get("Bios")
        if isinstance(bios, dict) and bios.get("@odata.id"):
            payloads[str(bios["@odata.id"])] = reader.get(str(bios["@odata.id"]))
    return payloads


def read_inventory(endpoint: BmcEndpoint) -> BmcInventory:
    session = Session(endpoint)
    try:
        return inventory(read_payloads(ReadOnly(session)))
    finally:
        session.close()


def inventory_fact(endpoint: BmcEndpoint) -> Fact:
    """The BMC's inventory as a fact read on the controller. Its key names the BMC, never the
    credentials; a BMC that cannot be read is a FactUnavailable with the reason (status unknown)."""
    def read() -> Any:
        try:
            return read_inventory(endpoint)
        except BmcError as exc:
            return FactUnavailable(str(exc))

    def parse(value: Any) -> Any:
        if isinstance(value, FactUnavailable):
            raise value
        return value

    return Fact(f"bmc:{endpoint.url}:inventory", {"op": "host"}, parse, controller=read)
