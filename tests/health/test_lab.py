"""The health probes over real SSH on a converged lab A100 node (tests/health/conftest.py):
the healthy node passes each probe, and each fault the lab injects fails the probe
that watches for it, with the right severity and a message naming the GPU's index and
bus id. Faults are cleared after each test (the `node` fixture)."""
from __future__ import annotations

import pytest

from tests.health.conftest import FRESH, NODE, PIN

# The profile's GPUs: index -> bus id (lab/gpuconf_lab/profiles.py, A100 HGX).
BUS = {0: "0000:07:00.0", 1: "0000:0f:00.0", 2: "0000:47:00.0", 3: "0000:4e:00.0", 4: "0000:87:00.0",
       5: "0000:90:00.0", 6: "0000:b7:00.0", 7: "0000:bd:00.0"}
NVIDIA_SMI_TASKS = {"GPU count and model", "Temperature", "Clock event reasons", "ECC errors and row remapping",
                    "NVLinks active", "Fabric manager running and fabric registered", "Persistence mode",
                    "GPU memory in use", "GPU utilization (reported)", "GPU power draw (reported)",
                    "Host sizing advice"}


def of(run, probe: str, severity: str) -> list[dict]:
    return [f for f in run.findings(severity) if f["probe"] == probe]


def names_the_gpu(finding: dict, index: int) -> bool:
    return (finding["gpu"], finding["bus_id"]) == (index, BUS[index]) and \
        f"GPU {index} ({BUS[index]})" in finding["message"]


def test_the_healthy_node_passes_every_probe(node):
    run = node.health("--skip-tags", "infiniband,nouveau,uvm,dcgm_diag")   # their own tests (dcgm: test_lab_verdicts)
    assert run.rc == 0, run.stdout[-4000:]
    assert {t["status"] for t in run.tasks().values()} == {"ok"}
    assert not run.findings("failure")
    for finding in run.findings():
        if finding["gpu"] is not None:
            assert names_the_gpu(finding, finding["gpu"]), finding
    assert {"gpu_count", "driver", "temperature", "clock_events", "pcie_link", "ecc", "xid", "nvlink",
            "fabric_manager", "persistence", "memory", "utilization", "power", "host_sizing", "kernel_taint",
            "kernel_lockup"} <= {f["probe"] for f in run.findings()}
    assert {f["severity"] for f in run.findings() if f["probe"] in ("utilization", "power")} == {"ok"}


def test_a_health_check_changes_nothing_on_the_node(node):
    before = node.lab.digest(NODE)
    node.health()
    assert node.lab.digest(NODE) == before


def test_one_nvidia_smi_command_per_host_per_run(node):
    """Counted on the node: a wrapper logs every nvidia-smi process while the whole role runs."""
    path = node.sh("command -v nvidia-smi")[1].strip()
    node.sh(f"mv {path} {path}.real && printf '#!/bin/sh\\necho \"$*\" >> /run/nvsmi-calls\\n"
            f"exec {path}.real \"$@\"\\n' > {path} && chmod 755 {path}")
    try:
        node.health()
        calls = node.sh("cat /run/nvsmi-calls")[1].splitlines()
    finally:
        node.sh(f"mv {path}.real {path}; rm -f /run/nvsmi-calls")
    # 18 probes: one --query-gpu, and nvlink -s (the NVLink probe's own read) on this NVSwitch node;
    # a batch's reads run at the same time, so in either order
    assert sorted(c.split()[0] for c in calls) == ["--query-gpu=index,pci.bus_id,name,persistence_mode,pstate,"
                                             "temperature.gpu,clocks_event_reasons.active,utilization.gpu,"
                                             "memory.used,memory.total,power.draw,power.limit,"
                                             "ecc.errors.uncorrected.volatile.total,remapped_rows.pending,"
                                             "remapped_rows.failure,retired_pages.pending,pcie.link.gen.current,"
                                             "pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,"
                                             "fabric.state,fabric.status,gpu_recovery_action", "nvlink"]


@pytest.mark.parametrize("degrees, severity", [(91, "failure"), (82, "warning")])
def test_a_hot_gpu(node, degrees, severity):
    node.fault("temp", str(degrees), "--gpu", "3")
    run = node.health("--tags", "temperature")
    (finding,) = [f for f in of(run, "temperature", severity)]
    assert names_the_gpu(finding, 3) and finding["value"] == degrees
    assert run.rc == (4 if severity == "failure" else 0)
    if severity == "warning":
        assert node.health("--tags", "temperature", "--strict").rc == 4


def test_thermal_slowdown_fails_the_clock_probe(node):
    node.fault("temp", "91", "--gpu", "6")          # above the slowdown threshold: HW thermal slowdown
    run = node.health("--tags", "clock_events")
    (finding,) = of(run, "clock_events", "failure")
    assert names_the_gpu(finding, 6) and "hw_thermal_slowdown" in finding["message"]


def test_xid_79_fails_the_gpu_once_per_boot(node):
    node.fault("xid", "79", "--gpu", "2")
    node.fault("xid", "79", "--gpu", "2")
    run = node.health("--tags", "xid")
    (finding,) = of(run, "xid", "failure")
    assert names_the_gpu(finding, 2) and finding["value"] == 2 and "fallen off the bus" in finding["message"]
    assert run.rc == 4


def test_an_application_xid_is_a_warning(node):
    node.fault("xid", "13", "--gpu", "0")
    run = node.health("--tags", "xid")
    (finding,) = of(run, "xid", "warning")
    assert names_the_gpu(finding, 0) and run.rc == 0


def test_a_pcie_downgrade_fails_only_under_load(node):
    node.fault("pcie-downgrade", "--gpu", "1")
    idle = node.health("--tags", "pcie_link")
    assert idle.rc == 0 and "while idle" in [f for f in idle.findings() if f["gpu"] == 1][0]["message"]
    node.fault("util", "60", "--gpu", "1")
    busy = node.health("--tags", "pcie_link")
    (finding,) = of(busy, "pcie_link", "failure")
    assert names_the_gpu(finding, 1) and "gen 3 x16 (max gen 4 x16) while busy" in finding["message"]


def test_uncorrected_ecc_errors_fail(node):
    node.fault("ecc", "2", "--gpu", "4")
    run = node.health("--tags", "ecc")
    (finding,) = of(run, "ecc", "failure")
    assert names_the_gpu(finding, 4) and "2 uncorrected ECC error(s)" in finding["message"]


def test_an_nvlink_down_fails(node):
    node.fault("nvlink-down", "5")
    run = node.health("--tags", "nvlink")
    (finding,) = of(run, "nvlink", "failure")
    assert names_the_gpu(finding, 5) and "all NVLinks are inactive" in finding["message"]


def test_a_hung_nvidia_smi_is_driver_unresponsive_and_the_check_finishes(node):
    node.fault("nvidia-smi-hang")
    run = node.health("--deadline", "120", timeout=240)   # the subprocess timeout only guards the suite
    assert run.rc == 4
    tasks = run.tasks()
    for name in NVIDIA_SMI_TASKS:
        assert tasks[name]["status"] == "unknown", name
        assert [f["value"] for f in tasks[name]["findings"] if f["severity"] == "failure"][-1] == \
            "driver_unresponsive", name
    for name in ("Driver loaded at the pinned version", "PCIe links at max under load", "Xid errors since this boot",
                 "Kernel taint and lockups"):
        assert tasks[name]["status"] == "ok", name   # sysfs and procfs still answer


def test_persistence_off_fails_and_the_remedy_runs_only_in_apply(node):
    node.sh("nvidia-smi -pm 0")
    run = node.health("--tags", "persistence", "-e", "gpu_health_remedy_persistence=true")
    assert run.rc == 4 and len(of(run, "persistence", "failure")) == 8
    assert names_the_gpu(of(run, "persistence", "failure")[7], 7)
    assert "Disabled" in node.sh("nvidia-smi --query-gpu=persistence_mode --format=csv,noheader")[1]  # check: untouched
    fixed = node.health("--tags", "persistence", "-e", "gpu_health_remedy_persistence=true", verb="apply")
    assert fixed.rc == 0 and fixed.tasks()["Persistence mode"]["status"] == "changed"
    assert not fixed.findings("failure")


def test_fabric_manager_stopped_fails_and_the_remedy_restarts_it(node):
    node.sh("systemctl stop nvidia-fabricmanager")
    run = node.health("--tags", "fabric_manager")
    assert [f["message"] for f in of(run, "fabric_manager", "failure")] == ["nvidia-fabricmanager is inactive"]
    fixed = node.health("--tags", "fabric_manager", "-e", "gpu_health_remedy_fabricmanager=true", verb="apply")
    assert fixed.tasks()["Fabric manager running and fabric registered"]["status"] == "changed", fixed.stdout[-2000:]
    assert node.sh("systemctl is-active nvidia-fabricmanager")[1].strip() == "active"


def test_the_gpu_count_and_driver_pin_are_the_inventory_expectations(node):
    run = node.health("--tags", "gpu_count,driver", "-e", "gpu_health_expected_gpu_count=7",
                      "-e", "nvidia_driver_version=580.105.08")
    assert [f["message"] for f in of(run, "gpu_count", "failure")] == ["8 NVIDIA GPU(s) on the PCI bus, expected 7"]
    assert f"driver {PIN} is loaded, pinned 580.105.08" in of(run, "driver", "failure")[0]["message"]


def test_memory_use_warns_above_its_threshold(node):
    node.fault("util", "50", "--gpu", "2")          # the simulator then uses 60 % of the GPU's memory
    run = node.health("--tags", "memory,utilization", "-e", "gpu_health_memory_warn_percent=50")
    (finding,) = of(run, "memory", "warning")
    assert names_the_gpu(finding, 2) and run.rc == 0
    assert [f["value"] for f in run.findings("ok") if f["probe"] == "utilization" and f["gpu"] == 2] == [50]


def test_infiniband_ports_without_a_subnet_manager_fail_by_port(node):
    run = node.health("--tags", "infiniband")
    failing = of(run, "infiniband", "failure")
    assert failing and all("INIT" in f["message"] and f["message"].startswith("port mlx5_") for f in failing)
    # a subnet manager on the node itself (it needs the HCA's driver and ib_umad) brings them up
    rc, out, err = node.sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q opensm >/dev/null && "
                           "modprobe -a mlx5_ib ib_umad && systemctl start opensm")
    assert rc == 0, out + err
    try:
        assert node.health("--tags", "infiniband", "-e", "gpu_health_infiniband_rate_gbps=200").rc == 0
    finally:
        node.sh("systemctl stop opensm")


def test_nouveau_and_uvm_on_the_converged_node(node):
    run = node.health("--tags", "nouveau,uvm")
    assert run.tasks()["nouveau not loaded"]["status"] == "ok"
    node.sh("modprobe nvidia_uvm")
    assert node.health("--tags", "uvm").tasks()["nvidia_uvm loaded"]["findings"][0]["severity"] == "ok"


def test_a_fresh_node_fails_nouveau_and_driver_and_cannot_read_the_gpus(node):
    run = node.health("-e", f"nvidia_driver_version={PIN}", host=FRESH)
    tasks = run.tasks()
    assert run.rc == 4
    assert tasks["Driver loaded at the pinned version"]["status"] == "failed"
    assert tasks["Temperature"]["status"] == "unknown"   # no driver: not a pass
    assert tasks["Temperature"]["findings"][0]["value"] == "driver_not_loaded"
    assert tasks["nouveau not loaded"]["status"] == "failed"


def test_a_lockup_line_warns(node):
    node.fault("kmsg", "watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [python3:4242]")
    run = node.health("--tags", "kernel")
    assert of(run, "kernel_lockup", "warning")
