"""Firmware parsers on real captures: the BMC's Redfish payloads (DGX H100, GB200, DMTF's mockup,
an nvfwupd update Task) and the in-band tools (nvidia-smi -q, ibstat, dmidecode)."""
from __future__ import annotations

import json

import pytest

from gpuconf.facts.evidence import parse_dmidecode
from gpuconf.facts.firmware import (
    FirmwareComponent,
    bios_firmware,
    compare_versions,
    compress_names,
    describe_mixed,
    gpu_firmware,
    hca_firmware,
    mixed_families,
)
from gpuconf.facts.infiniband import parse_ibstat
from gpuconf.facts.nvidia.query import parse_nvidia_smi_query
from gpuconf.facts.redfish import (
    FIRMWARE_INVENTORY,
    UPDATE_SERVICE,
    PayloadError,
    bios_settings,
    inventory,
    members,
    software_inventory,
    task,
    update_service,
)
from tests.real import read_real

VIKING = "redfish/dgx-h100-viking-"
CASES = [
    VIKING + "UpdateService-libredfish.json",
    VIKING + "FirmwareInventory-libredfish.json",
    VIKING + "FirmwareInventory-HGX_FW_GPU_SXM_1-libredfish.json",
    VIKING + "FirmwareInventory-HGX_FW_BMC_0-libredfish.json",
    VIKING + "FirmwareInventory-HostBMC_0-libredfish.json",
    VIKING + "FirmwareInventory-HostBIOS_0-libredfish.json",
    VIKING + "FirmwareInventory-HGX_FW_ERoT_GPU_SXM_1-libredfish.json",
    VIKING + "FirmwareInventory-HGX_InfoROM_GPU_SXM_1-libredfish.json",
    VIKING + "Systems-DGX-Bios-libredfish.json",
    VIKING + "Task-1-reset-completed-libredfish.json",
    VIKING + "Task-3-reset-exception-libredfish.json",
    "redfish/gb200-FirmwareInventory-HGX_FW_GPU_0-absent-libredfish.json",
    "redfish/dmtf-public-rackmount1-Task-545.json",
    "redfish/dmtf-public-rackmount1-FirmwareInventory-count-mismatch.json",
    "redfish/dmtf-public-rackmount1-FirmwareInventory-BMC.json",
    "redfish/dmtf-public-rackmount1-UpdateService.json",
    "redfish/dmtf-public-rackmount1-Systems-Bios.json",
    "redfish/dgx-update-Task-2-completed-nvfwupd-docs.json",
    "dmidecode/dmidecode-vmware-ubuntu-18.04-jc.txt",
]


def payload(rel: str) -> dict:
    return json.loads(read_real(rel))


def test_the_dgx_h100_inventory_lists_every_member_in_order():
    paths = members(payload(VIKING + "FirmwareInventory-libredfish.json"))
    assert paths[0] == FIRMWARE_INVENTORY + "/CPLDMB_0"
    assert FIRMWARE_INVENTORY + "/HGX_FW_GPU_SXM_8" in paths and FIRMWARE_INVENTORY + "/HostBMC_0" in paths
    assert len(paths) == len(set(paths)) > 60


def test_members_trust_the_list_over_the_count():
    """DMTF's own mockup says Members@odata.count 2 and lists three."""
    collection = payload("redfish/dmtf-public-rackmount1-FirmwareInventory-count-mismatch.json")
    assert collection["Members@odata.count"] == 2
    assert [p.rsplit("/", 1)[1] for p in members(collection)] == ["BMC", "SS", "BIOS"]


@pytest.mark.parametrize("name, version, updateable", [
    ("HGX_FW_GPU_SXM_1", "96.00.89.00.01", True),
    ("HGX_FW_BMC_0", "HGX-22.10-1-rc57", True),
    ("HostBMC_0", "23.11.21", True),
    ("HostBIOS_0", "01.01.03", True),
])
def test_dgx_h100_components(name, version, updateable):
    component = software_inventory(payload(f"{VIKING}FirmwareInventory-{name}-libredfish.json"))
    assert (component.name, component.version, component.updateable, component.source) == \
        (name, version, updateable, "redfish")
    assert component.state is None   # the AMI BMC gives no Status for these


def test_erot_and_inforom_entries_parse():
    erot = software_inventory(payload(VIKING + "FirmwareInventory-HGX_FW_ERoT_GPU_SXM_1-libredfish.json"))
    inforom = software_inventory(payload(VIKING + "FirmwareInventory-HGX_InfoROM_GPU_SXM_1-libredfish.json"))
    assert erot.name == "HGX_FW_ERoT_GPU_SXM_1" and erot.version
    assert inforom.name == "HGX_InfoROM_GPU_SXM_1" and inforom.version


def test_an_absent_gb200_gpu_keeps_its_status():
    component = software_inventory(payload("redfish/gb200-FirmwareInventory-HGX_FW_GPU_0-absent-libredfish.json"))
    assert (component.version, component.state, component.health, component.updateable) == \
        ("97.00.6C.00.03", "Absent", "Critical", False)
    assert component.family == "HGX_FW_GPU_#"


def test_dmtf_bmc_component():
    component = software_inventory(payload("redfish/dmtf-public-rackmount1-FirmwareInventory-BMC.json"))
    assert (component.name, component.version, component.state, component.health) == \
        ("BMC", "1.45.455b66-rev4", "Enabled", "OK")


def test_a_payload_without_an_id_is_no_component():
    with pytest.raises(PayloadError):
        software_inventory({"Version": "1.0"})


def test_update_services_say_where_an_image_goes():
    dgx = update_service(payload(VIKING + "UpdateService-libredfish.json"))
    assert (dgx.enabled, dgx.multipart_push_uri, dgx.simple_update) == \
        (True, "/redfish/v1/UpdateService/upload", "/redfish/v1/UpdateService/Actions/SimpleUpdate")
    dmtf = update_service(payload("redfish/dmtf-public-rackmount1-UpdateService.json"))
    assert (dmtf.multipart_push_uri, dmtf.http_push_uri) == (None, "/FWUpdate")


def test_bios_attributes():
    dgx = bios_settings(payload(VIKING + "Systems-DGX-Bios-libredfish.json"))
    assert dgx.registry == "BiosAttributeRegistry113.1.1.3"
    assert dgx.attributes["ARIEnable"] == "Enable" and dgx.attributes["AdminPassword"] is None
    dmtf = bios_settings(payload("redfish/dmtf-public-rackmount1-Systems-Bios.json"))
    assert dmtf.attributes


def test_tasks_completed_failed_and_with_progress():
    done = task(payload(VIKING + "Task-1-reset-completed-libredfish.json"))
    assert (done.finished, done.failed, done.state) == (True, False, "Completed")
    failed = task(payload(VIKING + "Task-3-reset-exception-libredfish.json"))
    assert (failed.finished, failed.failed, failed.status) == (True, True, "OK")   # Exception with TaskStatus OK
    assert "Base.1.12.ActionNotSupported" in failed.explain() and "ForceRestart" in failed.explain()
    warned = task(payload("redfish/dmtf-public-rackmount1-Task-545.json"))
    assert (warned.finished, warned.failed) == (True, False)   # a Warning message is no failure


def test_an_update_task_reads_as_its_log():
    update = task(payload("redfish/dgx-update-Task-2-completed-nvfwupd-docs.json"))
    assert (update.state, update.percent, update.failed) == ("Completed", 100, False)
    ids = [m.message_id for m in update.messages]
    assert ids[0] == "Update.1.0.TransferringToComponent" and "Update.1.0.UpdateSuccessful" in ids
    assert update.messages[0].args[1] == "HostBMC_0"
    assert update.explain().startswith("Task.1.0.Completed")


def test_an_inventory_from_what_a_read_fetched():
    collection = payload(VIKING + "FirmwareInventory-libredfish.json")
    fetched = {FIRMWARE_INVENTORY: collection, UPDATE_SERVICE: payload(VIKING + "UpdateService-libredfish.json"),
               "/redfish/v1/Systems/DGX/Bios": payload(VIKING + "Systems-DGX-Bios-libredfish.json")}
    for name in ("HGX_FW_GPU_SXM_1", "HGX_FW_BMC_0", "HostBMC_0", "HostBIOS_0"):
        fetched[f"{FIRMWARE_INVENTORY}/{name}"] = payload(f"{VIKING}FirmwareInventory-{name}-libredfish.json")
    found = inventory(fetched)
    assert found.version("HGX_FW_BMC_0") == "HGX-22.10-1-rc57" and found.version("HostBIOS_0") == "01.01.03"
    assert found.service is not None and found.service.multipart_push_uri
    assert found.bios is not None and found.bios.registry == "BiosAttributeRegistry113.1.1.3"
    # a member that was not read is a problem, never a component with no version
    assert found.version("HGX_FW_GPU_SXM_2") is None
    assert any("HGX_FW_GPU_SXM_2" in p for p in found.problems)
    assert len(found.components) == 4


def test_gpu_firmware_in_band_from_nvidia_smi_q():
    query = parse_nvidia_smi_query(read_real("nvidia-smi/q-535.161.08-8x-h100-80gb-hbm3-gpud.txt"))
    found = {c.name: c.version for c in gpu_firmware(query)}
    assert found["GPU0.VBIOS"] == "96.00.74.00.0D"
    assert found["GPU0.InfoROM"] == "G520.0200.00.05"
    assert found["GPU0.GSP"] == "535.161.08"
    assert len([n for n in found if n.endswith(".VBIOS")]) == 8


def test_gsp_off_is_no_component():
    query = parse_nvidia_smi_query(read_real("nvidia-smi/q-gsp-firmware-na-proprietary-gpud-1074.txt"))
    assert not [c for c in gpu_firmware(query) if c.name.endswith(".GSP")]


def test_hca_firmware_from_ibstat():
    ibstat = parse_ibstat(read_real("ibstat/ibstat-h100-cx7-ndr-ib-sm-lid-gpud.txt"))
    found = {c.name: c.version for c in hca_firmware(ibstat)}
    assert found["mlx5_0.FW"] == "28.41.1000"
    assert found["mlx5_bond_0.FW"] == "32.38.3056"   # the bond's device, another family: not "mixed"
    assert mixed_families(hca_firmware(ibstat)) == {}


def test_bios_version_from_dmidecode_type_0():
    records = parse_dmidecode(read_real("dmidecode/dmidecode-vmware-ubuntu-18.04-jc.txt"))
    assert bios_firmware(records) == [FirmwareComponent("BIOS", "6.00", "dmidecode")]
    # the DGX A100's -t 1 capture has no BIOS record: no component, never an empty one
    assert bios_firmware(parse_dmidecode(read_real("dmidecode/dmidecode-t1-dgx-a100-findstring-18087412309.txt"))) == []


@pytest.mark.parametrize("installed, wanted, order", [
    ("96.00.74.00.0D", "96.00.89.00.01", -1), ("96.00.89.00.01", "96.00.89.00.01", 0),
    ("96.00.89.00.0F", "96.00.89.00.0A", 1), ("HGX-22.10-1-rc57", "HGX-24.01-1", -1),
    ("1.2", "1.10", -1), ("23.11.21", "23.11.3", 1),
])
def test_version_order(installed, wanted, order):
    assert compare_versions(installed, wanted) == order


def test_mixed_versions_within_a_node_are_named():
    components = [FirmwareComponent(f"HGX_FW_GPU_SXM_{i}", "96.00.89.00.01", "redfish") for i in range(1, 8)]
    components.append(FirmwareComponent("HGX_FW_GPU_SXM_8", "96.00.74.00.0D", "redfish"))
    components.append(FirmwareComponent("HostBMC_0", "23.11.21", "redfish"))
    mixed = mixed_families(components)
    assert list(mixed) == ["HGX_FW_GPU_SXM_#"]
    line = describe_mixed("HGX_FW_GPU_SXM_#", mixed["HGX_FW_GPU_SXM_#"])
    assert "HGX_FW_GPU_SXM_8 at 96.00.74.00.0D" in line and "other 7 at 96.00.89.00.01" in line
    assert compress_names([f"HGX_FW_GPU_SXM_{i}" for i in (1, 2, 3, 5)]) == "HGX_FW_GPU_SXM_[1-3,5]"
