"""Each probe's judgement on real captures (tests/fixtures/real): nvidia-smi -q and
--query-gpu CSV, Xid dmesg lines, nvlink -s, /proc/driver/nvidia/version, ibstat and
sysfs. Expected verdicts are read off the capture by hand and named per GPU."""
import sys

import pytest

from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.local import LocalConnection
from gpuconf.facts.base import Output, command
from gpuconf.facts.infiniband import SysfsIbDevice, parse_ibstat, sysfs_port
from gpuconf.facts.nvidia import parse_nvidia_smi_query, parse_nvlink_status
from gpuconf.tasks.health.fabric import NvlinkParams, judge_fabric, judge_nvlinks
from gpuconf.tasks.health.infiniband import InfinibandParams, judge_ports
from gpuconf.tasks.health.kernel_log import CANDIDATES, XidParams, judge_lockups, judge_xids
from gpuconf.tasks.health.memory import EccParams, MemoryUseParams, judge_ecc, judge_memory
from gpuconf.tasks.health.pcie import PcieParams, judge_links, link_from_smi
from gpuconf.tasks.health.readings import GpuReadings, parse_readings
from gpuconf.tasks.health.thermal import ClockParams, TemperatureParams, judge_clocks, judge_temperature
from gpuconf.tasks.health.usage import judge_persistence
from tests.real import REAL
from tests.unit.tasks.health.fakes import readings_from_query, real, run_probe, stat


def q(name: str):
    return readings_from_query(parse_nvidia_smi_query(real(f"nvidia-smi/{name}")))


def severities(findings) -> dict:
    return {f.gpu: f.severity for f in findings}


def q_captures():
    return sorted(p.name for p in (REAL / "nvidia-smi").glob("q-*.txt"))


@pytest.mark.parametrize("name", q_captures())
def test_every_gpu_of_every_real_q_capture_gets_one_named_finding_per_probe(name):
    gpus = q(name)
    judged = [judge_temperature(gpus, TemperatureParams()), judge_clocks(gpus, ClockParams()),
              judge_ecc(gpus, EccParams()), judge_memory(gpus, MemoryUseParams()),
              judge_persistence(gpus, "failure")]
    for findings in judged:
        assert [f.gpu for f in findings] == [g.index for g in gpus]
        for finding, gpu in zip(findings, gpus):
            assert finding.bus_id == gpu.bus_id and f"GPU {gpu.index} ({gpu.bus_id})" in finding.message


# -- temperature --------------------------------------------------------------------------

def test_real_temperatures_are_healthy_and_a_cut_short_capture_is_a_warning_not_a_pass():
    assert set(severities(judge_temperature(q("q-load-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt"),
                                            TemperatureParams())).values()) == {"ok"}   # 52 °C under load
    (finding,) = judge_temperature(q("q-535.183.01-h100-cut-short-partial-gpud.txt"), TemperatureParams())
    assert finding.severity == "warning" and "not reported" in finding.message


def test_a_busy_l40s_at_64_degrees_fails_a_stricter_threshold():
    gpus = q("q-idle-nvidia-l40s-595.80-nvidia-gpu-exporter.txt")
    assert judge_temperature(gpus, TemperatureParams())[0].severity == "ok"
    (finding,) = judge_temperature(gpus, TemperatureParams(warn_c=55, fail_c=60))
    assert finding.severity == "failure" and finding.value == 64 and "GPU 0 (0000:01:00.0) at 64 °C" in finding.message


# -- clock event reasons -----------------------------------------------------------------

def test_hw_slowdown_with_the_power_brake_fails_every_gpu_of_a_real_h100_node():
    findings = judge_clocks(q("q-535.161.08-8x-h100-80gb-hbm3-gpud.txt"), ClockParams())
    assert severities(findings) == dict.fromkeys(range(8), "failure")
    assert "hw_slowdown, hw_power_brake_slowdown" in findings[0].message
    assert findings[4].bus_id == "0000:9b:00.0"


def test_one_thermally_slowed_gpu_fails_and_idle_ones_pass():
    findings = judge_clocks(q("q-535.183.01-8x-h100-80gb-hbm3-gpud.txt"), ClockParams())
    assert severities(findings) == {**dict.fromkeys(range(8), "ok"), 2: "failure"}
    assert "GPU 2 (0000:75:00.0)" in findings[2].message and "sw_thermal_slowdown" in findings[2].message


def test_the_software_power_cap_is_normal():
    findings = judge_clocks(q("q-535.154.05-8x-rtx4090-leading-blank-line-gpud.txt"), ClockParams())
    assert severities(findings) == dict.fromkeys(range(8), "ok")   # GPUs 1 and 4 at their power cap, busy


def test_the_real_csv_reasons_mask_decodes_to_idle():
    readings = parse_readings(Output(real("nvidia-smi/query-gpu-csv-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter"
                                          ".txt")), 10)
    (finding,) = judge_clocks(readings.gpus, ClockParams())
    assert finding.severity == "ok" and finding.value == "0x1"


# -- PCIe (nvidia-smi's link fields here; sysfs in the synthetic tests) ------------------------

def pcie(gpus):
    links = tuple(link for link in (link_from_smi(g) for g in gpus) if link)
    return judge_links(links, GpuReadings(gpus), PcieParams())


def test_idle_gpus_at_gen_1_do_not_false_alarm_and_busy_ones_at_max_pass():
    gpus = q("q-535.154.05-8x-rtx4090-gpud.txt")
    findings = pcie(gpus)
    assert severities(findings) == dict.fromkeys(range(8), "ok")
    idle = [f for f in findings if "while idle" in f.message]
    assert sorted(f.gpu for f in idle) == [4, 5, 7]            # gen 1 of 4, gpu_idle active
    assert "gen 1 x16 (max gen 4 x16)" in idle[0].message


def test_a_narrow_idle_l4_is_not_judged_but_judge_idle_fails_it():
    gpus = q("q-550.90.07-l4-thamada-gls.txt")
    assert pcie(gpus)[0].severity == "ok"
    links = tuple(link_from_smi(g) for g in gpus)
    (finding,) = judge_links(links, GpuReadings(gpus), PcieParams(judge_idle=True))
    assert finding.severity == "failure" and "gen 1 x8 (max gen 4 x16)" in finding.message


# -- ECC and memory ------------------------------------------------------------------------

def test_a_real_pending_row_remap_is_a_failure():
    (finding,) = judge_ecc(q("q-535.129.03-a10-1gpu-gpud.txt"), EccParams())
    assert finding.severity == "failure" and "row remap is pending" in finding.message
    assert finding.bus_id == "0000:07:00.0"


def test_gpus_without_ecc_and_clean_ones_pass():
    assert set(severities(judge_ecc(q("q-535.154.05-8x-rtx4090-gpud.txt"), EccParams())).values()) == {"ok"}
    assert set(severities(judge_ecc(q("q-550.127.05-v100_x8-thamada-gls.txt"), EccParams())).values()) == {"ok"}


def test_nearly_full_gpus_warn_above_90_percent():
    findings = judge_memory(q("q-535.154.05-8x-rtx4090-gpud.txt"), MemoryUseParams())
    # used/total MiB: 20328 21356 23044 22790 24212 0 22378 6488 of 24564
    assert severities(findings) == {0: "ok", 1: "ok", 2: "warning", 3: "warning", 4: "warning", 5: "ok",
                                    6: "warning", 7: "ok"}
    assert findings[4].value == 98.6
    edge = judge_memory(q("q-535.154.05-8x-rtx4090-addressing-mode-unknown-error-gpud.txt"), MemoryUseParams())
    assert (edge[0].value, edge[0].severity) == (89.9, "ok") and (edge[3].value, edge[3].severity) == (90.4, "warning")


def test_persistence_disabled_on_a_real_l40s():
    (finding,) = judge_persistence(q("q-idle-nvidia-l40s-595.80-nvidia-gpu-exporter.txt"), "failure")
    assert finding.severity == "failure" and "persistence mode Disabled" in finding.message


def test_fabric_state_completed_on_a_real_h200_with_the_service_active():
    readings = parse_readings(Output(real("nvidia-smi/query-gpu-csv-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter"
                                          ".txt")), 10)
    findings = judge_fabric("active", readings, "nvidia-fabricmanager")
    assert [f.severity for f in findings] == ["ok", "ok"] and "fabric state Completed" in findings[1].message


# -- Xid, lockups -------------------------------------------------------------------------

def xids(name, **params):
    return judge_xids(real(f"dmesg/{name}"), XidParams(**params), {}, [])


def test_a_gsp_timeout_is_one_failure_for_its_gpu_however_many_lines():
    (finding,) = xids("xid-119-gsp-rpc-timeout-h100-dmesg-T-gpud.txt")
    assert (finding.severity, finding.value, finding.bus_id, finding.action) == ("failure", 5, "0000:9b:00.0",
                                                                                 "reset_gpu")
    assert "Xid 119 (GSP_RPC_TIMEOUT, GSP RPC timeout) x5 this boot" in finding.message


def test_an_application_xid_flood_is_two_warnings_counted_not_repeated():
    findings = xids("xid-13-43-flood-decode-iso-gpud.txt")
    assert [(f.severity, f.value) for f in findings] == [("warning", 629), ("warning", 7)]
    assert "Xid 13" in findings[0].message and "Xid 43" in findings[1].message


def test_ecc_xids_by_the_catalog_once_per_code():
    """48 (DBE) fails; 63 (a row remap recorded) and 94 (a contained error: restart the app) warn."""
    findings = xids("xid-48-63-94-dbe-rowremap-contained-iso-timestamps-gpud.txt")
    assert [(f.message.split(": ")[1].split(" (")[0], f.value, f.severity, f.action) for f in findings] == [
        ("Xid 48", 1, "failure", "reset_gpu"), ("Xid 63", 1, "warning", None), ("Xid 94", 9, "warning", "restart_app")]


def test_legacy_lines_without_pid_and_a_per_code_override():
    findings = xids("xid-32-31-legacy-format-no-pid-bumblebee-677.txt", severity_by_code={31: "ok"})
    assert [(f.value, f.severity) for f in findings] == [(2, "warning"), (1, "ok")]   # 32 restart the app, 31 silenced
    assert findings[0].bus_id == "0000:01:00.0"


def test_a_log_without_xids_passes():
    (finding,) = xids("journalctl-k-short-iso-gpud.txt")
    assert finding.severity == "ok" and finding.value == 0


@pytest.mark.parametrize("name", ["xid-13-43-flood-decode-iso-gpud.txt", "xid-119-gsp-rpc-timeout-h100-dmesg-T-gpud.txt",
                                  "xid-48-63-94-dbe-rowremap-contained-iso-timestamps-gpud.txt",
                                  "xid-32-31-legacy-format-no-pid-bumblebee-677.txt"])
def test_the_runner_side_filter_keeps_every_xid_line(name):
    """The kernel log read's grep and tail, done by the real runner (through -c local) on the capture."""
    text = real(f"dmesg/{name}")
    fact = command(["cat", str(REAL / "dmesg" / name)], lambda out: out.stdout, grep=CANDIDATES, tail=5000)
    connection = LocalConnection(ConnectionSpec(host="localhost", connection="local", python=sys.executable))
    (reply,) = connection.call([dict(fact.request)], readonly=True, timeout=60)
    kept = fact.parse(reply)
    assert "Xid" in kept
    assert judge_xids(kept, XidParams(), {}, []) == judge_xids(text, XidParams(), {}, [])


def test_a_stack_through_the_nvidia_module_is_no_lockup_but_ioctl_frames_warn():
    assert judge_lockups(real("dmesg/xid-119-gsp-rpc-timeout-h100-dmesg-T-gpud.txt"))[0].severity == "ok"
    findings = judge_lockups("[ 612.1] watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [python3:4242]\n"
                             "[ 612.2]  nvidia_unlocked_ioctl+0x5c/0x90 [nvidia]\n")
    assert [(f.severity, f.value) for f in findings] == [("warning", 1), ("warning", 1)]


# -- NVLink --------------------------------------------------------------------------------

A100_BUSES = {i: f"0000:{b}:00.0" for i, b in enumerate(("07", "0f", "47", "4e", "87", "90", "b7", "bd"))}


def test_eight_a100s_with_twelve_links_each_pass():
    findings = judge_nvlinks(parse_nvlink_status(real("nvidia-smi/nvlink-s-8x-a100-sxm4-80gb-gpud.txt")),
                             NvlinkParams(expected_links=12), A100_BUSES)
    assert severities(findings) == dict.fromkeys(range(8), "ok") and findings[0].value == 12


def test_a_gpu_with_every_link_inactive_fails_by_index_and_bus():
    status = parse_nvlink_status(real("nvidia-smi/nvlink-s-i-6-a100-80gb-all-links-inactive-azure-nhc.txt"))
    (finding,) = judge_nvlinks(status, NvlinkParams(), {6: "0000:b7:00.0"})
    assert finding.severity == "failure" and finding.message.startswith("GPU 6 (0000:b7:00.0): all NVLinks")


def test_empty_nvlink_output_on_an_nvswitch_node_fails():
    (finding,) = judge_nvlinks(parse_nvlink_status(real("nvidia-smi/nvlink-s-a10-empty-output-gpud.txt")),
                               NvlinkParams(), {})
    assert finding.severity == "failure"


# -- driver --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, version, pin, severity", [
    ("open-565.57.01-ubuntu2404-nixGL-186.txt", "565.57.01", "565.57.01", "ok"),
    ("proprietary-384.98-ubuntu-neofetch-876.txt", "384.98", "535.104.05", "failure"),
    ("open-525.60.11-arch-nixGL-121.txt", "525.60.11", None, "ok"),
])
def test_the_loaded_driver_against_the_pin(name, version, pin, severity):
    path = "/proc/driver/nvidia/version"
    check, unknown = run_probe("health_driver", {"version": pin}, stat(path, real(f"proc-driver-nvidia-version/{name}")))
    (finding,) = check.findings
    assert (finding.severity, finding.value) == (severity, version)


# -- InfiniBand (sysfs files, and ibstat converted to the same ports) -------------------------

def from_ibstat(name) -> tuple[SysfsIbDevice, ...]:
    parsed = parse_ibstat(real(f"ibstat/{name}"))
    return tuple(SysfsIbDevice(ca.name, ca.firmware_version, None, ca.ca_type, tuple(
        sysfs_port(ca.name, p.number, p.state or "", p.physical_state or "",
                   f"{p.rate_gbps:g} Gb/sec" if p.rate_gbps else "", p.link_layer or "")
        for p in ca.ports)) for ca in parsed.cas)


def test_real_sysfs_ports_active_at_their_rates():
    devices = tuple(SysfsIbDevice(dev, None, None, None, (sysfs_port(
        dev, 1, *(real(f"sysfs-infiniband/gpud-h100-{dev}-ports-1-{n}.txt") for n in
                  ("state", "phys_state", "rate", "link_layer"))),)) for dev in ("mlx5_0", "mlx5_bond_0"))
    findings = judge_ports(devices, InfinibandParams())
    assert [(f.severity, f.value) for f in findings] == [("ok", 400), ("ok", 200)]
    assert [f.severity for f in judge_ports(devices, InfinibandParams(rate_gbps=400))] == ["ok", "failure"]


def test_ports_down_on_a_real_h100_fail_by_name():
    findings = judge_ports(from_ibstat("ibstat-h100-cx7-ib-some-ports-down-disabled-gpud.txt"), InfinibandParams())
    down = sorted(f.message.split(":")[0] for f in findings if f.severity == "failure")
    assert down and all("mlx5_" in name for name in down)
    assert {"port mlx5_2/1, Ethernet", "port mlx5_7/1, Ethernet"} <= set(down)


def test_an_all_active_hdr_node_passes_at_200():
    findings = judge_ports(from_ibstat("ibstat-a100-azure-cx6-mt4124-ibpanic-exit255-gpud.txt"),
                           InfinibandParams(rate_gbps=200, min_ports=8))
    assert len(findings) == 8 and {f.severity for f in findings} == {"ok"}
