"""Issue 15's verdicts over real SSH on the health lab's converged A100 node
(tests/health/conftest.py): a GPU fallen off the bus (with no Xid line) fails naming its
PCI address; a recovery-action Xid fails naming the action, and nvidia-smi's snapshot
keeps failing it after the line is gone; nvidia-smi output cut mid-field is unknown;
DCGM's level 1 diagnostic passes on the healthy node and fails a faulted GPU naming the
test, and a hung dcgmi is unknown within its timeout. Faults are cleared after each test."""
from __future__ import annotations

import time

from tests.health.test_lab import BUS, names_the_gpu, of

DCGM = ("-e", "gpu_health_dcgm_diag=true")


def test_a_gpu_fallen_off_the_bus_without_an_xid_line_fails_naming_its_pci_address(node):
    node.fault("fallen-off-bus", "--gpu", "4", "--no-xid")
    run = node.health("--tags", "xid,gpu_count")
    (lost,) = of(run, "fallen_off_bus", "failure")
    assert (lost["gpu"], lost["bus_id"], lost["action"]) == (4, BUS[4], "reboot_node")
    assert f"GPU 4 ({BUS[4]})" in lost["message"] and "fallen off the bus" in lost["message"]
    assert [f for f in of(run, "gpu_count", "failure") if f["bus_id"] == BUS[4]]   # nvidia-smi has no handle
    assert run.rc == 4


def test_a_recovery_action_xid_fails_naming_the_action_and_the_snapshot_outlives_the_line(node):
    node.fault("recovery-action", "reboot", "--gpu", "2")
    run = node.health("--tags", "xid")
    (xid,) = of(run, "xid", "failure")
    assert names_the_gpu(xid, 2) and xid["action"] == "reboot_node" and "Node Reboot Required" in xid["message"]
    node.sh("dmesg -C")     # the log line is gone; the driver's recovery action is not
    run = node.health("--tags", "xid")
    assert not of(run, "xid", "failure")
    (snapshot,) = of(run, "recovery_action", "failure")
    assert names_the_gpu(snapshot, 2) and snapshot["action"] == "reboot_node" and "Reboot" in snapshot["message"]
    assert run.rc == 4


def test_nvidia_smi_output_cut_mid_field_is_unknown(node):
    node.fault("truncated")
    run = node.health("--tags", "temperature,power")
    for name in ("Temperature", "GPU power draw (reported)"):
        task = run.tasks()[name]
        assert task["status"] == "unknown", name
        assert task["findings"][-1]["value"] == "incomplete" and "cut short" in task["findings"][-1]["message"]
    assert run.rc == 4


def test_the_dcgm_role_installed_dcgm_for_the_drivers_cuda_major_and_runs_the_host_engine(node):
    _, out, _ = node.sh("dpkg-query -W -f='${Package} ${Version}\\n' 'datacenter-gpu-manager-4-*'; "
                        "systemctl is-active nvidia-dcgm; dcgmi discovery -l | head -1")
    assert {"datacenter-gpu-manager-4-core 4.7.0-1", "datacenter-gpu-manager-4-cuda13 4.7.0-1", "active",
            "8 GPUs found."} <= set(out.splitlines()), out     # driver 580: CUDA 13
    assert "datacenter-gpu-manager-4-cuda12 " not in out


def test_dcgm_diag_level_1_passes_then_fails_a_faulted_gpu_naming_test_and_gpu(node):
    run = node.health("--tags", "dcgm_diag", *DCGM)
    assert run.rc == 0 and of(run, "dcgm_diag", "ok"), run.stdout[-2000:]
    node.fault("dcgm-fail", "software", "5")
    metrics = node.tmp / "dcgm.prom"
    run = node.health("--tags", "dcgm_diag", *DCGM, "--prometheus", str(metrics))
    (finding,) = of(run, "dcgm_diag", "failure")
    assert names_the_gpu(finding, 5) and finding["value"] == "software" and "test software" in finding["message"]
    assert run.rc == 4
    assert 'gpuconf_health{gpu="5",host="a100-01",probe="dcgm_diag",severity="failure"} 2.0' in metrics.read_text()


def test_a_hung_dcgmi_is_unknown_within_its_timeout(node):
    node.fault("dcgmi-hang")
    started = time.monotonic()
    run = node.health("--tags", "dcgm_diag", *DCGM, "-e", "gpu_health_dcgm_diag_timeout=5")
    assert time.monotonic() - started < 60
    task = run.tasks()["DCGM diagnostic"]
    assert task["status"] == "unknown" and task["findings"][-1]["value"] == "dcgmi_unresponsive"
    assert run.rc == 4


def test_gpuconf_facts_reads_dcgms_discovery_and_dmon_over_ssh(node):
    import json
    import subprocess
    import sys

    from tests.health.conftest import NAME, NODE
    from tests.paths import ROOT

    proc = subprocess.run([sys.executable, "-m", "gpuconf", "facts", NODE, "-i", NAME, "-s", "dcgm"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    dcgm = json.loads(proc.stdout)["dcgm"]
    discovery, dmon = dcgm["discovery"], dcgm["dmon"]
    assert discovery["found"] == 8 and [g["gpu_id"] for g in discovery["gpus"]] == list(range(8))
    assert all(g["name"] == "NVIDIA A100-SXM4-80GB" and g["pci_address"] for g in discovery["gpus"])
    assert dmon["fields"] == ["TMPTR", "POWER", "GPUTL", "MCUTL", "FBUSD", "ESVTL", "EDVTL"]
    assert dmon["units"][:2] == ["C", "W"] and len(dmon["rows"]) == 8 and not dmon["incomplete"]
