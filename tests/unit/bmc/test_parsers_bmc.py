"""Reading a BMC's inventory in as few requests as it allows ($expand, when its service root says
so: the DGX H100's does), on the captured payloads."""
from __future__ import annotations

import json

from gpuconf.bmc.read import expand_query, read_payloads
from gpuconf.facts.redfish import FIRMWARE_INVENTORY, SERVICE_ROOT, inventory
from tests.real import read_real

CASES = ["redfish/dgx-h100-viking-ServiceRoot-libredfish.json"]


def real(name: str) -> dict:
    return json.loads(read_real(f"redfish/{name}"))


class Reader:
    """A BMC that answers from captured payloads and inlines members when asked to ($expand)."""

    def __init__(self, root: dict, members: dict[str, dict], expands: bool):
        self.root, self.members, self.expands = root, members, expands
        self.asked: list[str] = []

    def get(self, path: str) -> dict:
        self.asked.append(path)
        if path == SERVICE_ROOT:
            return self.root
        if path.startswith(FIRMWARE_INVENTORY + "?") or path == FIRMWARE_INVENTORY:
            listed = [{"@odata.id": p} for p in self.members]
            if path != FIRMWARE_INVENTORY and self.expands:
                listed = [self.members[p] for p in self.members]
            return {"@odata.id": FIRMWARE_INVENTORY, "Members": listed}
        if path in self.members:
            return self.members[path]
        if path == "/redfish/v1/UpdateService":
            return real("dgx-h100-viking-UpdateService-libredfish.json")
        if path == "/redfish/v1/Systems":
            return {"Members": []}
        raise AssertionError(path)


def members() -> dict[str, dict]:
    found = {}
    for name in ("HGX_FW_BMC_0", "HGX_FW_GPU_SXM_1", "HostBMC_0"):
        payload = real(f"dgx-h100-viking-FirmwareInventory-{name}-libredfish.json")
        found[payload["@odata.id"]] = payload
    return found


def test_the_dgx_h100s_root_offers_expand_and_a_root_that_does_not_gets_one_request_per_member():
    viking = real("dgx-h100-viking-ServiceRoot-libredfish.json")
    assert expand_query(viking) == "$expand=.($levels=1)"
    assert expand_query({}) is None
    assert expand_query({"ProtocolFeaturesSupported": {"ExpandQuery": {"ExpandAll": True}}}) is None   # no Levels
    reader = Reader(viking, members(), expands=True)
    found = inventory(read_payloads(reader))
    assert found.version("HGX_FW_GPU_SXM_1") == "96.00.89.00.01" and len(found.components) == 3
    assert reader.asked == [SERVICE_ROOT, f"{FIRMWARE_INVENTORY}?$expand=.($levels=1)", "/redfish/v1/UpdateService",
                            "/redfish/v1/Systems"]
    plain = Reader({}, members(), expands=False)
    assert inventory(read_payloads(plain)) == found
    assert len([p for p in plain.asked if p.startswith(FIRMWARE_INVENTORY + "/")]) == 3


class PushSession:
    """A session whose BMC offers only what `service` says, recording what is sent."""

    def __init__(self, service: dict):
        self.service, self.sent = service, []
        self.endpoint = "https://bmc"

    def get(self, path: str) -> dict:
        assert path == "/redfish/v1/UpdateService"
        return self.service

    def patch(self, path: str, body: dict) -> None:
        self.sent.append(("PATCH", path, body))

    def post(self, path, body, headers=None, timeout=None):
        self.sent.append(("POST", path, body if isinstance(body, dict) else type(body).__name__))
        return 202, {}, {"Location": "/redfish/v1/TaskService/Tasks/7"}


def test_an_image_goes_the_way_the_bmc_offers(tmp_path):
    import pytest

    from gpuconf.bmc.update import UpdateFailed, Updater

    package = tmp_path / "bmc.fwpkg"
    package.write_bytes(b"image")
    target = "/redfish/v1/UpdateService/FirmwareInventory/BMC"
    older = PushSession({"ServiceEnabled": True, "HttpPushUri": "/FWUpdate"})   # DMTF's public-rackmount1 offers this
    assert Updater(older, lambda line: None).push(package, ["BMC"]) == "/redfish/v1/TaskService/Tasks/7"
    assert older.sent == [("PATCH", "/redfish/v1/UpdateService", {"HttpPushUriTargets": [target]}),
                          ("POST", "/FWUpdate", "bytes")]
    viking = real("dgx-h100-viking-UpdateService-libredfish.json")
    fetching = PushSession(viking)
    Updater(fetching, lambda line: None).push(package, ["BMC"], "https://files.example/bmc.fwpkg")
    assert fetching.sent == [("POST", "/redfish/v1/UpdateService/Actions/SimpleUpdate", {
        "ImageURI": "https://files.example/bmc.fwpkg", "Targets": [target], "TransferProtocol": "HTTPS"})]
    pushing = PushSession(viking)
    Updater(pushing, lambda line: None).push(package, ["BMC"])
    assert pushing.sent == [("POST", "/redfish/v1/UpdateService/upload", "list")]   # multipart, when there is no URI
    with pytest.raises(UpdateFailed, match="offers no SimpleUpdate action"):
        Updater(PushSession({"HttpPushUri": "/FWUpdate"}), lambda line: None).push(package, [], "https://f/x")
    with pytest.raises(UpdateFailed, match="offers no way to send an image"):
        Updater(PushSession({"ServiceEnabled": True}), lambda line: None).push(package, [])
