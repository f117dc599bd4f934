"""Issue 40 on the lab: firmware as declared state through each node's lab BMC (Redfish, TLS with
the lab CA). Drift is reported and the fleet table lists the BMCs' components; a fresh node with an
older BMC and older GPU firmware goes check 2, apply (backup, the BMC's package and its Task, the
BMC back at its new version, the GPUs' package, the power cycle), check 0; a bundle whose signature
does not verify is refused with nothing sent to the BMC; a hung BMC is reported after the timeout;
a Task the BMC fails leaves the node held for a person, and remediate updates a node through the
scheduler (the lab's real Slurm): drained, updated, verified, resumed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

import yaml

from gpuconf_lab.bmc.control import BmcPaths
from tests.lab_fixtures import slurm_idle, slurm_node_state
from tests.paths import ROOT

PLAYBOOK = "playbooks/firmware.yml"
NODE, OTHER = "h100-01", "h100-02"   # NODE is updated (the acceptance); OTHER keeps its old firmware
OLD_BMC, NEW_BMC = "HGX-22.10-1-rc34", "HGX-22.10-1-rc57"
OLD_GPU, NEW_GPU = "96.00.74.00.0D", "96.00.89.00.01"


def gpuconf(env, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    lab, path, state = env
    environ = dict(os.environ, PATH=path, GPUCONF_STATE_DIR=str(state), GPUCONF_REMEDIATE_POLL="0.3")
    return subprocess.run([sys.executable, "-m", "gpuconf", *args], cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=timeout)


def playbook(env, verb: str, host: str, *args: str, report=None) -> subprocess.CompletedProcess:
    lab = env[0]
    extra = ["--report", str(report)] if report else []
    return gpuconf(env, verb, PLAYBOOK, "-i", str(lab.inventory_path), "--limit", host, "--no-retry-file", *extra,
                   *args)


def requests(env, host: str) -> list[dict]:
    return BmcPaths(env[0].paths.root / "bmc").store(host).logged()


def bmc_version(env, host: str, component: str) -> str:
    return BmcPaths(env[0].paths.root / "bmc").store(host).read()["versions"][component]


def table(env) -> tuple[int, dict[str, dict]]:
    run = gpuconf(env, "firmware", "-i", str(env[0].inventory_path), "--format", "json")
    return run.returncode, {row["component"]: row for row in json.loads(run.stdout)["components"]}


def test_drift_is_reported_and_the_fleet_table_lists_the_bmcs_components(firmware_lab, tmp_path):
    report = tmp_path / "check.json"
    check = playbook(firmware_lab, "check", "all", report=report)
    assert check.returncode == 2, check.stdout + check.stderr
    for host in (NODE, OTHER):
        [task] = json.loads(report.read_text())["hosts"][host]["tasks"]
        assert task["status"] == "would_change"
        summaries = [c["summary"] for c in task["changes"]]
        assert summaries[1].startswith(f"update HGX_FW_BMC_0 {OLD_BMC} -> {NEW_BMC} ") and "the BMC first" in summaries[1]
        assert summaries[2].startswith(f"update HGX_FW_GPU_SXM_[1-8] {OLD_GPU} -> {NEW_GPU} ")
        assert summaries[3].startswith("power-cycle the system through the BMC")
    rc, rows = table(firmware_lab)
    assert rc == 0 and len(rows) == 66
    assert rows["HGX_FW_BMC_0"] == {"component": "HGX_FW_BMC_0", "version": OLD_BMC, "nodes": 2, "listed": 2,
                                    "differ": []}


def test_a_fresh_node_is_updated_bmc_first_then_its_gpus_and_verified(firmware_lab, tmp_path):
    lab, _, state = firmware_lab
    assert playbook(firmware_lab, "check", NODE).returncode == 2
    boots = lab.node_state(NODE)["boots"]
    sent = len(requests(firmware_lab, NODE))
    report = tmp_path / "apply.json"
    apply = playbook(firmware_lab, "apply", NODE, "-v", report=report)
    assert apply.returncode == 0, apply.stdout + apply.stderr
    [task] = json.loads(report.read_text())["hosts"][NODE]["tasks"]
    log = task["stdout"].splitlines()
    # the BMC's Task log, as the task read it: the BMC's package, its Task to the end, the BMC back at its
    # new version, and only then the GPUs' package and its Task, then the power cycle
    order = [next(i for i, line in enumerate(log) if needle in line) for needle in (
        "backup: ", "sent (multipart push) for HGX_FW_BMC_0", "Update.1.0.UpdateSuccessful",
        f"the BMC answers again: HGX_FW_BMC_0 at {NEW_BMC}", "sent (multipart push) for HGX_FW_GPU_SXM_[1-8]",
        "Update.1.0.AwaitToActivate", "PowerCycle sent")]
    assert order == sorted(order), log
    assert any(line.endswith("Completed 100%") for line in log)
    assert "Update.1.0.AwaitToActivate" in apply.stdout                       # -v prints the Task log
    posts = [(e["path"], e["status"]) for e in requests(firmware_lab, NODE)[sent:] if e["method"] == "POST"]
    assert posts == [("/redfish/v1/UpdateService/upload", 202), ("/redfish/v1/UpdateService/upload", 202),
                     ("/redfish/v1/Systems/DGX/Actions/ComputerSystem.Reset", 202)]
    assert lab.node_state(NODE)["boots"] == boots + 1                        # the power cycle rebooted it
    rc, out, _ = lab.exec(NODE, ["cat", "/var/lib/gpuconf-lab/baseboard.json"])
    assert rc == 0 and json.loads(out) == {"vbios": NEW_GPU}                 # what nvidia-smi reports from now
    backup_path = next(line for line in log if line.startswith("backup: ")).split(": ", 1)[1]
    assert backup_path.startswith(str(state / "bundles" / f"{NODE}-")) and backup_path.endswith("-firmware.tar.gz")
    with tarfile.open(backup_path) as backup:
        saved = {m.name: json.load(backup.extractfile(m)) for m in backup.getmembers()}
    inventory = saved["firmware/firmware-inventory.json"]
    assert inventory["/redfish/v1/UpdateService/FirmwareInventory/HGX_FW_BMC_0"]["Version"] == OLD_BMC
    assert saved["firmware/bios-attributes.json"]["/redfish/v1/Systems/DGX/Bios"]["Attributes"]
    again = playbook(firmware_lab, "check", NODE)
    assert again.returncode == 0, again.stdout + again.stderr
    rc, rows = table(firmware_lab)   # one node each: the newer version is the row's, the other node differs
    assert rc == 2 and (rows["HGX_FW_BMC_0"]["version"], rows["HGX_FW_BMC_0"]["differ"]) == (
        NEW_BMC, [{"host": OTHER, "version": OLD_BMC}])
    assert rows["HGX_FW_GPU_SXM_8"]["differ"] == [{"host": OTHER, "version": OLD_GPU}]
    assert rows["CPLDMB_0"]["differ"] == [] and rows["CPLDMB_0"]["nodes"] == 2


def test_a_bad_signature_is_refused_with_nothing_sent(firmware_lab, tmp_path):
    lab = firmware_lab[0]
    bundle = yaml.safe_load(lab.inventory_path.read_text())["all"]["children"]["h100"]["vars"]["firmware_bundle"]
    copied = tmp_path / "bundle"
    shutil.copytree(os.path.dirname(bundle["public_key"]), copied)
    for entry in bundle["packages"]:
        entry["file"] = str(copied / os.path.basename(entry["file"]))
        entry["signature"] = entry["file"] + ".sig"
    bundle["public_key"] = str(copied / "provider.pem")
    gpu_package = bundle["packages"][1]["file"]
    with open(gpu_package + ".sig", "r+b") as sig:   # the signature of another file
        data = bytearray(sig.read())
        data[10] = ord("A") if data[10] != ord("A") else ord("B")
        sig.seek(0)
        sig.write(data)
    (tmp_path / "vars.yml").write_text(yaml.safe_dump({"firmware_bundle": bundle}))
    sent = len(requests(firmware_lab, OTHER))
    report = tmp_path / "apply.json"
    apply = playbook(firmware_lab, "apply", OTHER, "-e", f"@{tmp_path / 'vars.yml'}", report=report)
    assert apply.returncode & 4, apply.stdout + apply.stderr
    [task] = json.loads(report.read_text())["hosts"][OTHER]["tasks"]
    assert task["status"] == "failed"
    assert f"refused before anything is sent: package {os.path.basename(gpu_package)}: its signature" in task["error"]
    assert requests(firmware_lab, OTHER)[sent:] == []                        # not even read
    assert bmc_version(firmware_lab, OTHER, "HGX_FW_BMC_0") == OLD_BMC


def test_a_hung_bmc_times_out(firmware_lab, tmp_path):
    lab = firmware_lab[0]
    lab.fault(OTHER, "bmc", "hang")
    try:
        started = time.monotonic()
        report = tmp_path / "check.json"
        check = playbook(firmware_lab, "check", OTHER, "-e", "bmc_timeout=2", report=report)
        took = time.monotonic() - started
    finally:
        lab.fault(OTHER, "bmc", "clear")
    assert check.returncode & 4, check.stdout + check.stderr
    [task] = json.loads(report.read_text())["hosts"][OTHER]["tasks"]
    assert task["status"] == "unknown" and "no answer within the timeout" in task["error"]
    assert took < 120   # bmc_timeout per request, not the library's ten tries (clear: tests/lab_sim/test_bmc.py)


def test_a_failed_task_leaves_the_node_held(firmware_lab):
    lab, _, state = firmware_lab
    inventory = str(lab.inventory_path)
    plan = gpuconf(firmware_lab, "remediate", PLAYBOOK, "-i", inventory, "--limit", OTHER, "--health", "none",
                   "--check")
    assert plan.returncode == 2, plan.stdout + plan.stderr
    lines = plan.stdout.splitlines()
    stages = [line.split(": ", 1)[1] for line in lines if line.startswith("    apply ")]
    assert len(stages) == 4 and stages[0].startswith("back up") and "HGX_FW_BMC_0" in stages[1] \
        and "HGX_FW_GPU_SXM_[1-8]" in stages[2] and stages[3].startswith("power-cycle"), plan.stdout
    lab.fault(OTHER, "bmc", "fail-task")
    try:
        run = gpuconf(firmware_lab, "remediate", PLAYBOOK, "-i", inventory, "--limit", OTHER, "--health", "none",
                      "--max-unavailable", "1")
        held = gpuconf(firmware_lab, "hardware", "--format", "json")
        node = lab.slurm(["scontrol", "show", "node", OTHER]).stdout
    finally:
        lab.fault(OTHER, "bmc", "clear")
    assert "hardware hold" in run.stdout, run.stdout + run.stderr
    assert "Reason=gpuconf: hardware: firmware: HGX_FW_BMC_0: Update.1.0.ApplyFailed: Installation of image " \
           f"'{NEW_BMC}' to 'HGX_FW_" in node                              # the BMC's words, cut to 120 characters
    assert slurm_node_state(lab, OTHER).startswith("drain")
    [hold] = json.loads(held.stdout)["holds"]
    assert (hold["host"], hold["code"]) == (OTHER, "firmware") and hold["bundle"]
    assert bmc_version(firmware_lab, OTHER, "HGX_FW_BMC_0") == OLD_BMC
    slurm_idle(lab, OTHER)   # a person resumes it after the repair


def test_remediate_updates_the_node_through_the_scheduler(firmware_lab):
    """Drained, updated (BMC, GPUs, the power cycle through the BMC), verified by the check, resumed."""
    lab = firmware_lab[0]
    boots = lab.node_state(OTHER)["boots"]
    run = gpuconf(firmware_lab, "remediate", PLAYBOOK, "-i", str(lab.inventory_path), "--limit", OTHER, "--health",
                  "none")
    assert run.returncode == 0, run.stdout + run.stderr
    steps = [line.split(": ", 2)[1] for line in run.stdout.splitlines() if line.startswith(f"{OTHER}: ")]
    assert steps == ["drain", "apply", "verify", "resume"], run.stdout
    assert slurm_node_state(lab, OTHER) == "idle" and lab.node_state(OTHER)["boots"] == boots + 1
    assert (bmc_version(firmware_lab, OTHER, "HGX_FW_BMC_0"), bmc_version(firmware_lab, OTHER, "HGX_FW_GPU_SXM_4")) \
        == (NEW_BMC, NEW_GPU)
    rc, rows = table(firmware_lab)
    assert rc == 0 and not any(row["differ"] for row in rows.values())     # the fleet at one version again
