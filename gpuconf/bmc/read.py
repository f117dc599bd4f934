"""One read of a BMC for a check: the firmware inventory, every member, the update service and
each system's BIOS attributes, fetched through a read-only session and parsed by
`gpuconf/facts/redfish.py`. As a fact (`inventory_fact`) it is read on the controller, not on the
host: the engine's session gathers it beside the host's reads and caches it until a change."""
from __future__ import annotations

from collections.abc import Mapping

from gpuconf.bmc.client import BmcEndpoint, BmcError, ReadOnly, Session
from gpuconf.facts.base import Fact, FactUnavailable
from gpuconf.facts.redfish import (
    FIRMWARE_INVENTORY,
    SERVICE_ROOT,
    SYSTEMS,
    UPDATE_SERVICE,
    BmcInventory,
    inventory,
    members,
)
from gpuconf.files.values import JSONValue, items_of


def expand_query(root: Mapping[str, JSONValue]) -> str | None:
    """The query that has the BMC inline a collection's members, when its service root says it
    can (`ProtocolFeaturesSupported.ExpandQuery`): one request instead of one per member (66 on
    a DGX H100, at about half a second each on its BMC)."""
    features = root.get("ProtocolFeaturesSupported")
    expand = features.get("ExpandQuery") if isinstance(features, dict) else None
    if not isinstance(expand, dict) or not expand.get("Levels"):
        return None
    if expand.get("NoLinks"):
        return "$expand=.($levels=1)"
    return "$expand=*($levels=1)" if expand.get("ExpandAll") else None


def read_payloads(reader: ReadOnly) -> dict[str, JSONValue]:
    """Every payload an inventory needs, by path. A member that cannot be read is left out (the
    parse names it as a problem); the collection itself must be read. Members the BMC inlined
    (`$expand`) are taken from the collection; any it did not inline are read one by one."""
    query = expand_query(reader.get(SERVICE_ROOT))
    collection = reader.get(f"{FIRMWARE_INVENTORY}?{query}" if query else FIRMWARE_INVENTORY)
    payloads: dict[str, JSONValue] = {FIRMWARE_INVENTORY: collection}
    for listed in items_of(collection.get("Members")):
        if isinstance(listed, dict) and listed.get("@odata.id") and "Id" in listed:
            payloads[str(listed["@odata.id"])] = listed
    for path in members(collection):
        if path in payloads:
            continue
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


def inventory_fact(endpoint: BmcEndpoint) -> Fact[BmcInventory]:
    """The BMC's inventory as a fact read on the controller. Its key names the BMC, never the
    credentials; a BMC that cannot be read is a FactUnavailable with the reason (status unknown)."""
    def read() -> BmcInventory | FactUnavailable:
        try:
            return read_inventory(endpoint)
        except BmcError as exc:
            return FactUnavailable(str(exc))

    def parse(value: object) -> BmcInventory:
        if isinstance(value, BmcInventory):
            return value
        raise value if isinstance(value, FactUnavailable) else FactUnavailable(f"the BMC's read gave {value!r}")

    return Fact(f"bmc:{endpoint.url}:inventory", {"op": "host"}, parse, controller=read)
