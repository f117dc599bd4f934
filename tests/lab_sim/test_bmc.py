"""The lab's BMC, served in this process on the loopback, reached through gpuconf's own Redfish
client (DMTF's library, TLS checked against the lab CA): captured payloads, an update Task with
its progress and DMTF Update messages, the BMC's own image active after it resets, the
baseboard's only at a power cycle, a bad signature or a wrong component refused, a failed Task,
a hung BMC, a wrong password and a certificate from another CA."""
from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from gpuconf.bmc.client import BmcEndpoint, BmcError, ReadOnly, Session
from gpuconf.bmc.read import read_payloads
from gpuconf.bmc.update import UpdateFailed, Updater
from gpuconf.facts.redfish import FIRMWARE_INVENTORY, inventory, task
from gpuconf_lab.bmc import control, models, package, server, tls
from gpuconf_lab.bmc.store import NodeStore, fresh_state
from tests.paths import FIXTURES

MODEL = models.DGX_H100
GPUS = [f"HGX_FW_GPU_SXM_{n}" for n in range(1, 9)]


class Bmc:
    def __init__(self, root: Path, port: int, servers: list, key, ca: Path):
        self.root, self.port, self.servers, self.key, self.ca = root, port, servers, key, ca
        self.store = NodeStore(root / "nodes", "h100-01")

    def endpoint(self, password: str = "secret", timeout: float = 5.0, ca: Path | None = None) -> BmcEndpoint:
        return BmcEndpoint(f"https://127.0.0.1:{self.port}", "admin", password, str(ca or self.ca), timeout)

    def session(self, **kwargs) -> Session:
        return Session(self.endpoint(**kwargs))

    def image(self, components: dict[str, str], key=None) -> Path:
        path = self.root / "image.fwpkg"
        path.write_bytes(package.build("image", components, key or self.key))
        return path

    def posts(self) -> list[str]:
        return [e["path"] for e in self.store.logged() if e["method"] == "POST"]


@pytest.fixture
def bmc(tmp_path):
    (tmp_path / "nodes").mkdir()
    ca, ca_key = tls.make_ca(tmp_path, "test")
    cert, cert_key = tls.make_server(tmp_path, "h100-01", "127.0.0.1", ca, ca_key)
    key = package.provider_key(tmp_path / "provider-key.pem")
    (tmp_path / "provider.pem").write_bytes(package.public_pem(key))
    NodeStore(tmp_path / "nodes", "h100-01").write(fresh_state(MODEL, "h100"))
    config = {"lab": "test", "port": 0, "user": "admin", "password": "secret", "state_dir": str(tmp_path / "nodes"),
              "provider_key": str(tmp_path / "provider.pem"), "task_seconds": 0.6,
              "ready_file": str(tmp_path / "ready"),
              "nodes": [{"name": "h100-01", "address": "127.0.0.1", "model": MODEL.name, "cert": str(cert),
                         "key": str(cert_key), "node_dir": str(tmp_path / "no-node")}]}
    servers = server.serve(config)
    yield Bmc(tmp_path, servers[0].server_address[1], servers, key, ca)
    for running in servers:
        running.shutdown()
        running.server_close()


def read(bmc: Bmc):
    session = bmc.session()
    try:
        return inventory(read_payloads(ReadOnly(session)))
    finally:
        session.close()


def test_it_serves_the_captured_payloads_with_the_nodes_firmware(bmc):
    found = read(bmc)
    assert len(found.components) == 66 and found.bios is not None and found.service.multipart_push_uri
    assert found.version("HGX_FW_BMC_0") == "HGX-22.10-1-rc34"
    assert {found.version(g) for g in GPUS} == {"96.00.74.00.0D"}   # the lab h100's VBIOS, in band too
    assert found.version("HostBIOS_0") == "01.01.03"
    session = bmc.session()
    try:
        served = session.get(f"{FIRMWARE_INVENTORY}/HGX_FW_GPU_SXM_1")
    finally:
        session.close()
    real = json.loads((FIXTURES / "real/redfish/dgx-h100-viking-FirmwareInventory-HGX_FW_GPU_SXM_1-libredfish.json")
                      .read_text())
    assert {k: v for k, v in served.items() if k != "Version"} == {k: v for k, v in real.items() if k != "Version"}


def test_the_bmc_image_is_active_after_its_reset_and_the_gpus_only_after_a_power_cycle(bmc):
    log: list[str] = []
    session = bmc.session()
    try:
        updater = Updater(session, log.append, sleep=lambda s: time.sleep(0.1))
        done = updater.follow(updater.push(bmc.image({"HGX_FW_BMC_0": "HGX-22.10-1-rc57"}), ["HGX_FW_BMC_0"]), 10)
        assert done.state == "Completed" and done.percent == 100
        ids = [m.message_id for m in done.messages]
        assert ids == ["Update.1.0.TargetDetermined", "Update.1.0.TransferringToComponent",
                       "Update.1.0.VerifyingAtComponent", "Update.1.0.InstallingOnComponent",
                       "Update.1.0.UpdateSuccessful", "TaskEvent.1.0.TaskCompletedOK"]
        progress = [line.rsplit(" ", 1)[1] for line in log if " Running " in line]
        assert progress and progress[-1] != "100%" and progress == sorted(progress, key=lambda p: int(p[:-1]))
        updater.wait_version("HGX_FW_BMC_0", "HGX-22.10-1-rc57", 10)   # after the BMC's reset
        gpu = updater.follow(updater.push(bmc.image({g: "96.00.89.00.01" for g in GPUS}), GPUS), 10)
        assert "Update.1.0.AwaitToActivate" in [m.message_id for m in gpu.messages]
        assert read(bmc).version("HGX_FW_GPU_SXM_1") == "96.00.74.00.0D"   # staged, not active
        updater.power_cycle()
    finally:
        session.close()
    after = read(bmc)
    assert {after.version(g) for g in GPUS} == {"96.00.89.00.01"}
    assert bmc.store.read()["power_cycles"] == 1 and bmc.store.read()["staged"] == {}


def test_a_bad_signature_or_a_wrong_component_fails_the_task_at_verification(bmc):
    session = bmc.session()
    try:
        updater = Updater(session, lambda line: None, sleep=lambda s: time.sleep(0.1))
        other = package.provider_key(bmc.root / "someone-else.pem")
        with pytest.raises(UpdateFailed, match="Update.1.0.VerificationFailed: Verification of image 'image.fwpkg' "
                                               "at 'HGX_FW_GPU_SXM_1' failed"):
            updater.follow(updater.push(bmc.image({"HGX_FW_GPU_SXM_1": "96.00.89.00.01"}, other),
                                        ["HGX_FW_GPU_SXM_1"]), 10)
        with pytest.raises(UpdateFailed, match="VerificationFailed: .* at 'HGX_FW_GPU_0' failed"):
            updater.follow(updater.push(bmc.image({"HGX_FW_GPU_0": "97.00.6C.00.03"}), []), 10)   # a GB200's
        with pytest.raises(BmcError, match="HTTP 400: Base.1.12.PropertyValueNotInList: The value 'HGX_FW_GPU_0'"):
            updater.push(bmc.image({"HGX_FW_GPU_0": "97.00.6C.00.03"}), ["HGX_FW_GPU_0"])
    finally:
        session.close()
    assert read(bmc).version("HGX_FW_GPU_SXM_1") == "96.00.74.00.0D"
    assert bmc.store.read()["staged"] == {}


def test_a_failed_task_names_the_installation_that_failed(bmc):
    control.fault(control.BmcPaths(bmc.root), "h100-01", "fail-task")   # the store lives under root/nodes
    session = bmc.session()
    try:
        updater = Updater(session, lambda line: None, sleep=lambda s: time.sleep(0.1))
        path = updater.push(bmc.image({"HGX_FW_BMC_0": "HGX-22.10-1-rc57"}), ["HGX_FW_BMC_0"])
        with pytest.raises(UpdateFailed, match=r"ended Exception: Update.1.0.ApplyFailed: Installation of image "
                                               r"'HGX-22.10-1-rc57' to 'HGX_FW_BMC_0' failed"):
            updater.follow(path, 10)
        assert task(session.get(path)).status == "Critical"
    finally:
        session.close()
    assert read(bmc).version("HGX_FW_BMC_0") == "HGX-22.10-1-rc34"


def test_a_hung_bmc_is_reported_after_the_timeout(bmc):
    control.fault(control.BmcPaths(bmc.root), "h100-01", "hang")
    started = time.monotonic()
    with pytest.raises(BmcError, match="no answer within the timeout"):
        bmc.session(timeout=1.0)
    assert time.monotonic() - started < 10
    control.fault(control.BmcPaths(bmc.root), "h100-01", "clear")
    assert read(bmc).version("HGX_FW_BMC_0") == "HGX-22.10-1-rc34"


def test_a_wrong_password_and_another_cas_certificate_are_refused(bmc, tmp_path):
    with pytest.raises(BmcError, match="cannot log in"):
        bmc.session(password="wrong")
    other = tmp_path / "other"
    other.mkdir()
    other_ca, _ = tls.make_ca(other, "other")
    with pytest.raises(BmcError, match="its TLS certificate does not verify"):
        bmc.session(ca=other_ca)
    assert "secret" not in bmc.store.requests.read_text()
    assert not any("Authorization" in line or base64.b64encode(b"admin:secret").decode() in line
                   for line in bmc.store.requests.read_text().splitlines())


def test_the_lab_publishes_a_bundle_gpuconf_verifies(tmp_path):
    from gpuconf.bmc.bundle import check_package

    key = package.provider_key(tmp_path / "key.pem")
    bundle = control.publish_current(control.BmcPaths(tmp_path), MODEL, key)
    assert bundle["components"] == {"HGX_FW_BMC_0": "HGX-22.10-1-rc57", **{g: "96.00.89.00.01" for g in GPUS}}
    for entry in bundle["packages"]:
        assert check_package(entry["file"], entry["sha256"], entry["signature"], bundle["public_key"]).problem is None


def test_simple_update_has_the_bmc_fetch_the_image_itself(bmc, tmp_path):
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    served = tmp_path / "served"
    served.mkdir()
    image = bmc.image({"HGX_FW_BMC_0": "HGX-22.10-1-rc57"})
    (served / "bmc.fwpkg").write_bytes(image.read_bytes())
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served))
    files = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{files.server_address[1]}"
    log: list[str] = []
    session = bmc.session()
    try:
        updater = Updater(session, log.append, sleep=lambda s: time.sleep(0.1))
        done = updater.follow(updater.push(image, ["HGX_FW_BMC_0"], f"{base}/bmc.fwpkg"), 10)
        assert done.state == "Completed" and log[0].startswith("image.fwpkg sent (SimpleUpdate) for HGX_FW_BMC_0: ")
        updater.wait_version("HGX_FW_BMC_0", "HGX-22.10-1-rc57", 10)
        with pytest.raises(UpdateFailed, match="Update.1.0.TransferFailed: Transfer of image 'gone.fwpkg' to "
                                               "'HostBMC_0' failed"):
            updater.follow(updater.push(image, ["HostBMC_0"], f"{base}/gone.fwpkg"), 10)
    finally:
        session.close()
        files.shutdown()
        files.server_close()
    assert bmc.posts() == ["/redfish/v1/UpdateService/Actions/SimpleUpdate"] * 2   # the image was never pushed
