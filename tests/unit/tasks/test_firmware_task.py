"""The firmware task's decisions, with no BMC: the plan's order (backup, BMC first, baseboard,
power cycle), behind and ahead, a bundle that does not fit the node, mixed versions, and a bundle
whose hash or signature does not verify refused before anything is read or sent."""
from __future__ import annotations

import base64
import hashlib
import tarfile

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from cryptography.hazmat.primitives.hashes import SHA256

from gpuconf.bmc.bundle import check_package
from gpuconf.bmc.client import BmcEndpoint, BmcError
from gpuconf.bmc.read import inventory_fact
from gpuconf.facts.firmware import FirmwareComponent
from gpuconf.facts.redfish import BmcInventory
from gpuconf.tasks.base import Facts, Refused
from gpuconf.tasks.firmware import Firmware, FirmwareParams, Step, write_backup

GPUS = [f"HGX_FW_GPU_SXM_{i}" for i in range(1, 9)]
OLD_GPU, NEW_GPU = "96.00.74.00.0D", "96.00.89.00.01"
OLD_BMC, NEW_BMC = "HGX-22.10-1-rc57", "HGX-24.01-1"


def signed(tmp_path, name: str, data: bytes, key=None):
    key = key or ed25519.Ed25519PrivateKey.generate()
    path = tmp_path / name
    path.write_bytes(data)
    (tmp_path / (name + ".sig")).write_bytes(base64.b64encode(key.sign(data)))
    return path, key


def public_pem(tmp_path, key, name="provider.pem"):
    path = tmp_path / name
    path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo))
    return path


def bundle(tmp_path, **over):
    key = ed25519.Ed25519PrivateKey.generate()
    bmc, _ = signed(tmp_path, "bmc.fwpkg", b"bmc image", key)
    hgx, _ = signed(tmp_path, "hgx.fwpkg", b"baseboard image", key)
    values = {
        "bmc_address": "https://127.0.0.1:8443", "bmc_user": "admin", "bmc_password": "pw",
        "bundle": "hgx-h100-24.01",
        "components": {"HGX_FW_BMC_0": NEW_BMC, **{g: NEW_GPU for g in GPUS}},
        "packages": [
            {"file": str(hgx), "sha256": hashlib.sha256(b"baseboard image").hexdigest(),
             "signature": str(hgx) + ".sig", "components": GPUS},
            {"file": str(bmc), "sha256": hashlib.sha256(b"bmc image").hexdigest(),
             "signature": str(bmc) + ".sig", "components": ["HGX_FW_BMC_0"]},
        ],
        "public_key": str(public_pem(tmp_path, key)),
        "backup_dir": str(tmp_path / "bundles"),
    }
    values.update(over)
    return values


def params(values) -> FirmwareParams:
    task = Firmware()
    return FirmwareParams.model_validate(task.resolve(values, resolver=None))  # type: ignore[arg-type]


def found(bmc=OLD_BMC, gpus=None) -> BmcInventory:
    gpus = gpus or {g: OLD_GPU for g in GPUS}
    return BmcInventory((FirmwareComponent("HGX_FW_BMC_0", bmc, "redfish"),
                         *(FirmwareComponent(n, v, "redfish") for n, v in gpus.items())), None, None)


def check(p: FirmwareParams, inventory: BmcInventory | Exception):
    fact = inventory_fact(p.endpoint)
    return Firmware().check(p, Facts({fact.key: inventory}, [fact], {}))


def test_the_plan_backs_up_then_updates_the_bmc_first_then_the_baseboard_then_power_cycles(tmp_path):
    verdict = check(params(bundle(tmp_path)), found())
    steps = [c.after for c in verdict.changes]
    assert [s.kind for s in steps] == ["backup", "bmc", "baseboard", "activate"]
    assert steps[1].targets == ("HGX_FW_BMC_0",) and steps[1].versions == {"HGX_FW_BMC_0": NEW_BMC}
    assert steps[2].targets == tuple(GPUS)
    assert verdict.changes[1].summary.startswith(f"update HGX_FW_BMC_0 {OLD_BMC} -> {NEW_BMC} from bmc.fwpkg (the BMC first")
    assert f"HGX_FW_GPU_SXM_[1-8] {OLD_GPU} -> {NEW_GPU} from hgx.fwpkg" in verdict.changes[2].summary
    assert "power-cycle" in verdict.changes[3].summary


def test_at_the_bundle_it_is_in_sync(tmp_path):
    verdict = check(params(bundle(tmp_path)), found(NEW_BMC, {g: NEW_GPU for g in GPUS}))
    assert verdict.changes == [] and "9 components at their versions" in verdict.message


def test_only_the_bmc_behind_needs_no_power_cycle(tmp_path):
    verdict = check(params(bundle(tmp_path)), found(OLD_BMC, {g: NEW_GPU for g in GPUS}))
    assert [c.after.kind for c in verdict.changes] == ["backup", "bmc"]


def test_ahead_is_not_downgraded_unless_allowed(tmp_path):
    ahead = {g: NEW_GPU for g in GPUS} | {"HGX_FW_GPU_SXM_3": "96.00.99.00.01"}
    kept = check(params(bundle(tmp_path)), found(NEW_BMC, ahead))
    assert len(kept.changes) == 1 and kept.changes[0].after is None and not kept.changes[0].ops
    assert "HGX_FW_GPU_SXM_3 is at 96.00.99.00.01, ahead of the bundle's 96.00.89.00.01: not downgraded" \
        in kept.changes[0].summary
    allowed = check(params(bundle(tmp_path, allow_downgrade=True)), found(NEW_BMC, ahead))
    assert [c.after.kind for c in allowed.changes] == ["backup", "baseboard", "activate"]
    assert allowed.changes[1].after.targets == ("HGX_FW_GPU_SXM_3",)


def test_a_bundle_for_another_system_is_refused(tmp_path):
    with pytest.raises(Refused, match=r"does not fit this node: the BMC lists no HGX_FW_GPU_SXM_\[5-8\]"):
        check(params(bundle(tmp_path)), found(gpus={g: OLD_GPU for g in GPUS[:4]}))


def test_mixed_versions_within_the_node_are_named(tmp_path):
    mixed = {g: NEW_GPU for g in GPUS} | {"HGX_FW_GPU_SXM_8": OLD_GPU}
    verdict = check(params(bundle(tmp_path)), found(NEW_BMC, mixed))
    assert "mixed HGX_FW_GPU_SXM_# versions on this node: HGX_FW_GPU_SXM_8 at 96.00.74.00.0D" in verdict.message
    assert verdict.data["mixed"]


def test_a_bad_signature_is_refused_before_the_bmc_is_read(tmp_path):
    values = bundle(tmp_path)
    other = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "hgx.fwpkg.sig").write_bytes(other.sign(b"baseboard image"))   # someone else's signature
    p = params(values)
    assert p.package_problems[str(tmp_path / "hgx.fwpkg")].endswith(f"does not verify against {tmp_path}/provider.pem")
    assert Firmware().reads(p) == []   # nothing to gather: the BMC is not read
    with pytest.raises(Refused, match="bundle hgx-h100-24.01 refused before anything is sent: package hgx.fwpkg: "
                                      "its signature hgx.fwpkg.sig does not verify"):
        check(p, BmcError("never read"))


def test_a_changed_package_is_refused_by_its_hash(tmp_path):
    values = bundle(tmp_path)
    (tmp_path / "bmc.fwpkg").write_bytes(b"bmc image, altered")
    with pytest.raises(Refused, match="package bmc.fwpkg: SHA-256 .* is not the bundle's"):
        check(params(values), found())


def test_a_playbook_cannot_claim_its_packages_verified(tmp_path):
    values = bundle(tmp_path, package_problems={})
    (tmp_path / "bmc.fwpkg.sig").write_bytes(b"x" * 64)
    assert params(values).package_problems[str(tmp_path / "bmc.fwpkg")]


def test_rsa_pkcs1_signatures_verify_too(tmp_path):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    package = tmp_path / "pkg.bin"
    package.write_bytes(b"image")
    (tmp_path / "pkg.bin.sig").write_bytes(key.sign(b"image", padding.PKCS1v15(), SHA256()))
    pem = public_pem(tmp_path, key)
    assert check_package(str(package), hashlib.sha256(b"image").hexdigest(), str(package) + ".sig", str(pem)).problem \
        is None


def test_the_endpoint_is_https_and_keeps_the_password_out_of_its_text():
    endpoint = BmcEndpoint.from_vars("n1", {"bmc_address": "127.0.0.1:8443", "bmc_password": "hunter2"})
    assert endpoint is not None and str(endpoint) == "https://127.0.0.1:8443" and "hunter2" not in repr(endpoint)
    with pytest.raises(BmcError, match="must be an https:// address"):
        BmcEndpoint.from_vars("n1", {"bmc_address": "http://127.0.0.1"})
    assert BmcEndpoint.from_vars("n1", {}) is None
    assert "hunter2" not in inventory_fact(endpoint).key


def test_the_backup_is_written_whole_with_inventory_and_bios(tmp_path):
    payloads = {"/redfish/v1/UpdateService/FirmwareInventory": {"Members": []},
                "/redfish/v1/Systems/DGX/Bios": {"Attributes": {"ARIEnable": "Enable"}}}
    path = write_backup(tmp_path / "b", "node1", payloads)
    assert path.name.startswith("node1-") and path.name.endswith("-firmware.tar.gz")
    assert not list((tmp_path / "b").glob(".*part"))
    with tarfile.open(path) as tar:
        assert sorted(tar.getnames()) == ["firmware/bios-attributes.json", "firmware/firmware-inventory.json"]
        assert b"ARIEnable" in tar.extractfile("firmware/bios-attributes.json").read()


def test_steps_are_typed():
    assert Step("backup").package is None
