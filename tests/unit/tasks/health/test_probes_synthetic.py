"""Each probe as the engine runs it (check() over a read-only host), on synthetic edge
cases: thresholds at their edges, a hung nvidia-smi, a lost GPU, remedies."""
import pytest

from gpuconf.facts import gather
from gpuconf.facts.nvidia.failure import DRIVER_UNRESPONSIVE
from gpuconf.tasks.health.uvm import COMMANDS, OPEN_FILES
from gpuconf.tasks.registry import TASK_TYPES, build_params
from tests.unit.tasks.health.fakes import (
    IB,
    KERNEL_LOG,
    NVLINK,
    SMI,
    bus,
    files,
    hang,
    links,
    modules,
    pci,
    run_probe,
    shell,
    smi,
    smi_csv,
    stat,
)

NVIDIA_SMI_PROBES = ["health_gpu_count", "health_temperature", "health_clocks", "health_ecc", "health_memory",
                     "health_persistence", "health_utilization", "health_power", "health_host_sizing",
                     "health_fabricmanager"]
MEMINFO = stat("/proc/meminfo", "MemTotal:       2113929216 kB\n")


def host(cpus: int | None = 64) -> dict:
    return {gather.HOST.key: {"hostname": "node1", "machine": "x86_64", "cpus": cpus}}


HOST = {**host(64), **MEMINFO}


def replies(*parts: dict) -> dict:
    merged = {}
    for part in parts:
        merged.update(part)
    return merged


def only(check):
    return [(f.gpu, f.severity) for f in check.findings if f.severity != "ok"]


# -- a hung or missing driver is never a pass -------------------------------------------------

@pytest.mark.parametrize("probe", NVIDIA_SMI_PROBES)
def test_a_hung_nvidia_smi_is_unknown_with_a_driver_unresponsive_failure(probe):
    extra = {"health:is-active:nvidia-fabricmanager": shell("active\n")}
    check, unknown = run_probe(probe, {}, replies({SMI: hang()}, pci(), HOST, extra))
    assert check is None, f"{probe} passed on a hung nvidia-smi"
    assert [f.value for f in unknown.findings if f.severity == "failure"][-1] == DRIVER_UNRESPONSIVE


@pytest.mark.parametrize("probe", NVIDIA_SMI_PROBES)
@pytest.mark.parametrize("cut", ["temperature", "power"])
def test_nvidia_smi_output_cut_mid_field_is_unknown_never_a_value(probe, cut):
    """GPU 7's row cut inside a value (34 -> 3 °C, 62.50 -> 62.5 W): no probe reads it, none passes."""
    text = smi_csv(8)
    row = text.splitlines()[-1]
    end = row.index(", P0, ") + 7 if cut == "temperature" else row.index("62.50") + 4
    extra = {"health:is-active:nvidia-fabricmanager": shell("active\n")}
    check, unknown = run_probe(probe, {}, replies({SMI: shell(text[: text.rindex(row) + end])}, pci(), HOST, extra))
    assert check is None, f"{probe} judged nvidia-smi output cut short"
    assert [f.value for f in unknown.findings if f.severity == "failure"][-1] == "incomplete"
    assert "incomplete" in str(unknown) and "cut short" in str(unknown)


def test_the_driver_not_loaded_is_unknown_too():
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the " \
              "latest NVIDIA driver is installed and running.\n"
    check, unknown = run_probe("health_temperature", {}, {SMI: shell(message, rc=9)})
    assert check is None and unknown.findings[0].value == "driver_not_loaded"


# -- temperature ---------------------------------------------------------------------------

@pytest.mark.parametrize("degrees, severity", [(79, "ok"), (80, "warning"), (84, "warning"), (85, "failure"),
                                               (91, "failure")])
def test_temperature_thresholds_at_their_edges(degrees, severity):
    check, _ = run_probe("health_temperature", {}, smi(gpu3={"temperature.gpu": str(degrees)}))
    finding = check.findings[3]
    assert (finding.gpu, finding.bus_id, finding.severity, finding.value) == (3, bus(3), severity, degrees)
    assert f"GPU 3 ({bus(3)}) at {degrees} °C" in finding.message
    assert only(check) == ([] if severity == "ok" else [(3, severity)])


def test_temperature_thresholds_are_params_and_checked():
    check, _ = run_probe("health_temperature", {"warn_c": 70, "fail_c": 75}, smi(gpu0={"temperature.gpu": "76"}))
    assert only(check) == [(0, "failure")]
    with pytest.raises(ValueError, match="warn_c"):
        build_params("health_temperature", {"warn_c": 90, "fail_c": 85})


# -- clock event reasons ---------------------------------------------------------------------

@pytest.mark.parametrize("mask, severity", [("0x0000000000000001", "ok"), ("0x0000000000000004", "ok"),
                                            ("0x0000000000000000", "ok"), ("0x0000000000000002", "warning"),
                                            ("0x0000000000000010", "warning"), ("0x0000000000001000", "warning"),
                                            ("0x0000000000000008", "failure"), ("0x0000000000000020", "failure"),
                                            ("0x0000000000000044", "failure")])
def test_clock_reasons(mask, severity):
    check, _ = run_probe("health_clocks", {}, smi(gpu5={"clocks_event_reasons.active": mask}))
    assert only(check) == ([] if severity == "ok" else [(5, severity)])


def test_clock_reason_names_are_validated():
    with pytest.raises(ValueError, match="unknown clock event reason"):
        build_params("health_clocks", {"failure_reasons": ["hw_slowdwn"]})


# -- PCIe ----------------------------------------------------------------------------------

GEN3 = ("8.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16")


def test_a_gen3_link_on_a_gen4_slot_fails_only_under_load():
    busy = smi(gpu2={"utilization.gpu": "50", "clocks_event_reasons.active": "0x0000000000000000"})
    check, _ = run_probe("health_pcie", {}, replies(links(gpu2=GEN3), busy))
    assert only(check) == [(2, "failure")]
    assert check.findings[2].message == (f"GPU 2 ({bus(2)}) PCIe link below max: gen 3 x16 (max gen 4 x16) while "
                                         "busy, utilization 50 %")
    idle, _ = run_probe("health_pcie", {}, replies(links(gpu2=GEN3), smi()))
    assert only(idle) == [] and "while idle" in idle.findings[2].message


def test_a_narrowed_link_under_load_fails():
    busy = smi(gpu1={"utilization.gpu": "80", "clocks_event_reasons.active": "0x0000000000000000"})
    check, _ = run_probe("health_pcie", {}, replies(links(gpu1=("16.0 GT/s PCIe", "16.0 GT/s PCIe", "8", "16")),
                                                    busy))
    assert only(check) == [(1, "failure")] and "gen 4 x8 (max gen 4 x16)" in check.findings[1].message


def test_links_at_max_pass_from_sysfs_even_when_nvidia_smi_hangs():
    check, _ = run_probe("health_pcie", {}, replies(links(), {SMI: hang()}))
    assert only(check) == [] and [f.gpu for f in check.findings] == list(range(8))


def test_a_reduced_link_with_nvidia_smi_hung_is_unknown_not_a_guess():
    check, unknown = run_probe("health_pcie", {}, replies(links(gpu2=GEN3), {SMI: hang()}))
    assert check is None
    assert [f.value for f in unknown.findings if f.severity == "failure"] == [DRIVER_UNRESPONSIVE]
    assert len([f for f in unknown.findings if f.severity == "ok"]) == 7   # the seven links at max still reported


# -- ECC and memory ----------------------------------------------------------------------------

@pytest.mark.parametrize("fields, text", [
    ({"ecc.errors.uncorrected.volatile.total": "2"}, "2 uncorrected ECC error(s)"),
    ({"remapped_rows.pending": "Yes"}, "row remap is pending"),
    ({"remapped_rows.failure": "Yes"}, "row remapping failed"),
])
def test_ecc_failures(fields, text):
    check, _ = run_probe("health_ecc", {}, smi(gpu6=fields))
    assert only(check) == [(6, "failure")] and text in check.findings[6].message
    assert check.findings[6].bus_id == bus(6)


def test_ecc_threshold_is_a_param():
    check, _ = run_probe("health_ecc", {"max_uncorrected_volatile": 2},
                         smi(gpu6={"ecc.errors.uncorrected.volatile.total": "2"}))
    assert only(check) == []


def test_memory_above_90_percent_warns():
    check, _ = run_probe("health_memory", {}, smi(gpu0={"memory.used": "74000"}, gpu1={"memory.used": "73728"}))
    assert only(check) == [(0, "warning")]   # 90.3 % warns, exactly 90 % does not
    assert check.findings[1].value == 90.0


# -- GPU count and model, driver, nouveau ------------------------------------------------------

def without_gpu5() -> str:
    return "\n".join(line for line in smi(8)[SMI]["out"].splitlines() if bus(5)[5:] not in line) + "\n"


def test_a_gpu_on_the_bus_that_nvidia_smi_no_longer_lists_fails_by_bus_id():
    lost = "Unable to determine the device handle for GPU 0000:90:00.0: Unknown Error\n"
    check, _ = run_probe("health_gpu_count", {"expected_count": 8},
                         replies(pci(8), {SMI: shell(lost + without_gpu5(), rc=15)}))
    failing = [f for f in check.findings if f.severity == "failure"]
    assert [(f.gpu, f.bus_id) for f in failing] == [(5, bus(5))]
    assert failing[0].message == (f"GPU 5 ({bus(5)}) is on the PCI bus but nvidia-smi does not list it: lost or "
                                  f"fallen off the bus ({lost.strip()})")
    assert check.findings[0].message == "8 NVIDIA GPU(s) on the PCI bus, as expected"


def test_gpu_count_and_model():
    check, _ = run_probe("health_gpu_count", {"expected_count": 8, "expected_model": "a100-sxm4-80gb"},
                         replies(pci(8), smi(8)))
    assert only(check) == [] and len(check.findings) == 9   # the count, then one per GPU with its name
    assert check.findings[1].message == f"GPU 0 ({bus(0)}): NVIDIA A100-SXM4-80GB"
    short, _ = run_probe("health_gpu_count", {"expected_count": 8}, replies(pci(8, missing=(7,)), smi(7)))
    assert short.findings[0].severity == "failure" and short.findings[0].message == \
        "7 NVIDIA GPU(s) on the PCI bus, expected 8"
    wrong, _ = run_probe("health_gpu_count", {"expected_model": "H100"}, replies(pci(8), smi(8)))
    assert {f.severity for f in wrong.findings} == {"failure"} and "expected H100" in wrong.findings[0].message


def test_driver_absent_and_nouveau_loaded_fail():
    check, _ = run_probe("health_driver", {"version": "535.104.05"}, stat("/proc/driver/nvidia/version", None))
    assert check.findings[0].severity == "failure" and "not loaded" in check.findings[0].message
    loaded = "nouveau 2793472 0 - Live 0x0000000000000000\ndrm 622592 1 nouveau, Live 0x0000000000000000\n"
    check, _ = run_probe("health_nouveau", {}, modules(loaded))
    assert check.findings[0].severity == "failure"
    check, _ = run_probe("health_nouveau", {}, modules("nvidia 56823808 0 - Live 0x0 (POE)\n"))
    assert check.findings[0].severity == "ok"


def test_a_kernel_without_proc_modules_is_read_through_lsmod():
    lsmod = ("Module                  Size  Used by\nnvidia_uvm           1982464  0\n"
             "nvidia              56823808  1 nvidia_uvm\nnouveau              2793472  0\n")
    check, _ = run_probe("health_nouveau", {}, modules(lsmod))
    assert check.findings[0].severity == "failure"
    check, _ = run_probe("health_uvm", {}, modules(lsmod))
    assert check.findings[0].severity == "ok"


@pytest.mark.parametrize("probe", ["health_nouveau", "health_uvm"])
def test_an_unreadable_proc_modules_is_unknown_not_absent(probe):
    check, unknown = run_probe(probe, {}, modules(None))
    assert check is None and unknown.findings[0].severity == "failure"


# -- remedies: offered only when asked, and only as changes apply would run --------------------

def test_persistence_remedy_is_opt_in():
    off = smi(gpu4={"persistence_mode": "Disabled"})
    plain, _ = run_probe("health_persistence", {}, off)
    assert only(plain) == [(4, "failure")] and plain.changes == []
    fixing, _ = run_probe("health_persistence", {"remedy": True}, off)
    assert [op.request["cmd"] for c in fixing.changes for op in c.ops] == ["nvidia-smi -pm 1"]
    assert only(fixing) == [(4, "failure")]
    assert not fixing.changes[0].verify   # an action: the re-check after apply judges the GPUs, not the change
    fixed, _ = run_probe("health_persistence", {"remedy": True}, smi())
    assert fixed.changes == [] and only(fixed) == []


def test_fabric_manager_down_fails_and_the_remedy_restarts_it():
    down = replies(smi(), {"health:is-active:nvidia-fabricmanager": shell("inactive\n", rc=3),
                           "health:journal:nvidia-fabricmanager": shell("")})   # stopped, no refusal logged
    check, _ = run_probe("health_fabricmanager", {"remedy": True}, down)
    assert check.findings[0].severity == "failure" and check.findings[0].message == "nvidia-fabricmanager is inactive"
    assert [op.request["cmd"] for c in check.changes for op in c.ops] == ["systemctl restart nvidia-fabricmanager"]
    assert not check.changes[0].verify   # a restart is an action: the engine's re-check does not expect it gone
    plain, _ = run_probe("health_fabricmanager", {}, down)
    assert plain.changes == [] and plain.findings[0].severity == "failure"


def test_hopper_fabric_in_progress_fails_per_gpu():
    check, _ = run_probe("health_fabricmanager", {}, replies(
        smi(gpu1={"fabric.state": "In Progress", "fabric.status": "[N/A]"}, gpu0={"fabric.state": "Completed",
                                                                               "fabric.status": "Success"}),
        {"health:is-active:nvidia-fabricmanager": shell("active\n")}))
    assert only(check) == [(1, "failure")] and "fabric state In Progress" in check.findings[-1].message


UVM_HELD = "nvidia_uvm 1982464 2 - Live 0x0000000000000000 (POE)\nnvidia 56823808 10 nvidia_uvm, Live 0x0 (POE)\n"


def processes(holding: dict[int, str] | None = None) -> dict:
    """/proc/PID/fd/* link targets and /proc/PID/comm: `holding` pids have /dev/nvidia0 open,
    a shell (pid 1) has a terminal and a file open."""
    links = {"/proc/1/fd/0": "/dev/pts/0", "/proc/1/fd/3": "/var/log/syslog", "/proc/1/fd/4": "socket:[1234]"}
    names = {"/proc/1/comm": "bash"}
    for pid, name in (holding or {}).items():
        links.update({f"/proc/{pid}/fd/0": "/dev/null", f"/proc/{pid}/fd/7": "/dev/nvidiactl",
                      f"/proc/{pid}/fd/8": "/dev/nvidia0"})
        names[f"/proc/{pid}/comm"] = name
    return {OPEN_FILES.key: files(links), COMMANDS.key: files(names)}


def test_uvm_reload_only_when_no_process_holds_the_gpu():
    gone = modules("nvidia 56823808 0 - Live 0x0 (POE)\n")
    check, _ = run_probe("health_uvm", {"remedy": True}, replies(gone, processes({4242: "python3", 77: "nv-hostengine"})))
    assert check.changes == [] and "held by 77 (nv-hostengine), 4242 (python3)" in check.findings[0].message
    check, _ = run_probe("health_uvm", {"remedy": True}, replies(gone, processes()))
    assert [op.request["cmd"] for c in check.changes for op in c.ops] == ["modprobe nvidia_uvm"]
    assert not check.changes[0].verify
    check, _ = run_probe("health_uvm", {}, modules(UVM_HELD))
    assert check.findings[0].severity == "ok"


def test_uvm_reads_the_processes_only_for_its_remedy():
    plain = {f.key for f in TASK_TYPES["health_uvm"].reads(build_params("health_uvm", {}))}
    remedy = {f.key for f in TASK_TYPES["health_uvm"].reads(build_params("health_uvm", {"remedy": True}))}
    assert OPEN_FILES.key not in plain and {OPEN_FILES.key, COMMANDS.key} <= remedy


def test_uvm_not_loaded_warns_and_stuck_fails():
    plain, _ = run_probe("health_uvm", {}, modules("nvidia 56823808 0 - Live 0x0 (POE)\n"))
    assert plain.findings[0].severity == "warning" and plain.changes == []
    stuck = modules("nvidia_uvm 1982464 1 - Unloading 0x0 (POE)\nnvidia 56823808 1 nvidia_uvm, Live "
                                  "0x0 (POE)\n")
    check, _ = run_probe("health_uvm", {"remedy": True}, replies(stuck, processes()))
    assert check.findings[0].severity == "failure" and "stuck Unloading" in check.findings[0].message
    assert check.changes == [] and "use count 1" in check.findings[0].message   # in use: never reloaded


# -- host sizing, utilization, power ----------------------------------------------------------

def test_host_sizing_warns_when_too_small_and_only_reports_more_than_advised():
    small = replies(smi(), host(16), MEMINFO)
    check, _ = run_probe("health_host_sizing", {}, small)
    assert [f.severity for f in check.findings] == ["warning", "ok"]   # 2 CPUs per GPU; 2016 GiB for 640 GiB
    assert check.findings[0].value == 2.0 and check.findings[1].value == 3.15
    assert check.findings[0].message == "16 logical CPUs for 8 GPU(s): 2 per GPU, advised 4-8 per GPU (too few)"
    big, _ = run_probe("health_host_sizing", {"warn_above_max": True},
                       replies(smi(), host(128), MEMINFO))
    assert [f.severity for f in big.findings] == ["warning", "ok"] and "more than advised" in big.findings[0].message


def test_utilization_and_power_are_reported_not_judged():
    busy = smi(gpu0={"utilization.gpu": "100", "power.draw": "499.00"})
    util, _ = run_probe("health_utilization", {}, busy)
    power, _ = run_probe("health_power", {}, busy)
    assert {f.severity for f in util.findings + power.findings} == {"ok"}
    assert util.findings[0].value == 100 and power.findings[0].value == 499
    assert "drawing 499 W of its 500 W limit (100 %)" in power.findings[0].message


# -- Xid, kernel ------------------------------------------------------------------------------

BOOT = stat("/proc/sys/kernel/random/boot_id", "8d1c\n")
XID79 = "[ 4242.100000] NVRM: Xid (PCI:0000:4e:00): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"


def log(text: str, source: str = "dmesg") -> dict:
    argv = ["dmesg"] if source == "dmesg" else ["journalctl", "-k", "-b", "0"]
    return {KERNEL_LOG: shell(text, argv=argv), **BOOT}


def test_xid_79_fails_the_gpu_it_names_with_nvidia_smi_index_or_sysfs_order():
    check, _ = run_probe("health_xid", {}, replies(log(XID79), pci(), smi()))
    (finding,) = [f for f in check.findings if f.probe == "xid"]
    assert (finding.severity, finding.gpu, finding.bus_id, finding.value) == ("failure", 3, bus(3), 1)
    assert finding.action == "reboot_node" and "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" in finding.message
    assert {f.severity for f in check.findings if f.probe == "recovery_action"} == {"ok"}   # nvidia-smi: None
    assert check.data["boot_id"] == "8d1c" and "first at 4242.100000" in finding.message
    hung, _ = run_probe("health_xid", {}, replies(log(XID79), pci(), {SMI: hang()}))
    assert hung.findings[0].gpu == 3   # no nvidia-smi needed: the Xid probe never hangs with it


def test_the_journal_answers_when_dmesg_cannot():
    check, _ = run_probe("health_xid", {}, replies(log("", source="journal"), pci(), smi()))
    assert check.findings[0].message == "no Xid errors in this boot's kernel log (journal)"


def test_xid_severities_are_validated():
    with pytest.raises(ValueError, match="severity_by_code"):
        build_params("health_xid", {"severity_by_code": {13: "fatal"}})


def test_a_fallen_off_the_bus_line_without_an_xid_fails_naming_the_pci_address():
    text = "[ 88.1] NVRM: GPU 0000:87:00.0: GPU has fallen off the bus.\n"
    check, _ = run_probe("health_xid", {}, replies(log(text), pci(), smi()))
    (finding,) = [f for f in check.findings if f.severity == "failure"]
    assert (finding.probe, finding.gpu, finding.bus_id, finding.action) == ("fallen_off_bus", 4, bus(4), "reboot_node")
    assert "GPU 4 (0000:87:00.0)" in finding.message and "fallen off the bus" in finding.message


@pytest.mark.parametrize("code, severity, action", [(154, "failure", "reboot_node"), (13, "warning", "restart_app"),
                                                    (149, "failure", "drain"), (155, "failure", "reset_gpu"),
                                                    (63, "warning", None), (106, "ok", None), (201, "warning",
                                                                                                "contact_support")])
def test_the_catalog_and_the_recovery_action_decide_the_severity(code, severity, action):
    message = ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)" if code == 154
               else "pid=1, name=x, something")
    text = f"[ 9.0] NVRM: Xid (PCI:0000:07:00): {code}, {message}\n"
    check, _ = run_probe("health_xid", {}, replies(log(text), pci(), smi()))
    (finding,) = [f for f in check.findings if f.probe == "xid"]
    assert (finding.severity, finding.action, finding.gpu) == (severity, action, 0)
    assert f"Xid {code} (" in finding.message
    if code == 201:
        assert "not in NVIDIA's Xid catalog" in finding.message


def test_a_pending_recovery_action_fails_even_with_a_clean_log():
    check, _ = run_probe("health_xid", {}, replies(log(""), pci(), smi(gpu5={"gpu_recovery_action": "Reboot"},
                                                                       gpu6={"gpu_recovery_action": "Drain P2P"})))
    failing = [(f.probe, f.gpu, f.action) for f in check.findings if f.severity == "failure"]
    assert failing == [("recovery_action", 5, "reboot_node"), ("recovery_action", 6, "drain_p2p")]
    assert "GPU 5 (0000:90:00.0): the driver asks for recovery action Reboot" in check.findings[6].message


@pytest.mark.parametrize("reply", [
    shell("", rc=1, err="Failed to get journal access: Operation not permitted\n", argv=["journalctl", "-k"]),
    hang(),
])
def test_an_unreadable_or_hung_kernel_log_is_unknown(reply):
    check, unknown = run_probe("health_xid", {}, replies({KERNEL_LOG: reply}, BOOT, pci(), smi()))
    assert check is None and unknown.findings[-1].severity == "failure" and unknown.findings[-1].value == "unreadable"
    assert ("Operation not permitted" if reply["rc"] == 1 else "did not finish within 10 s") in str(unknown)


@pytest.mark.parametrize("tainted, severity", [("0", "ok"), ("12289", "ok"), ("12801", "warning")])
def test_taint_beyond_the_nvidia_driver_warns(tainted, severity):
    check, _ = run_probe("health_kernel", {}, replies(stat("/proc/sys/kernel/tainted", tainted + "\n"), log("")))
    assert check.findings[0].severity == severity and check.findings[1].severity == "ok"
    if severity == "warning":
        assert "W (kernel issued a warning)" in check.findings[0].message


# -- NVLink, InfiniBand ----------------------------------------------------------------------

def nvlink_text(inactive: dict[int, list[int]]) -> str:
    lines = []
    for gpu in range(8):
        lines.append(f"GPU {gpu}: NVIDIA A100-SXM4-80GB (UUID: GPU-{gpu:08d}-0000-0000-0000-000000000000)")
        lines += [f"\t Link {n}: " + ("<inactive>" if n in inactive.get(gpu, []) else "25 GB/s") for n in range(12)]
    return "\n".join(lines) + "\n"


def test_an_inactive_nvlink_fails_its_gpu_by_index_and_bus():
    check, _ = run_probe("health_nvlink", {"expected_links": 12}, replies(pci(), smi(nvlink=nvlink_text({2: [3]}))))
    assert only(check) == [(2, "failure")]
    assert check.findings[2].message == f"GPU 2 ({bus(2)}): NVLink(s) 3 inactive; 11 active, expected 12"
    healthy, _ = run_probe("health_nvlink", {"expected_links": 12}, replies(pci(), smi(nvlink=nvlink_text({}))))
    assert only(healthy) == [] and len(healthy.findings) == 8


@pytest.mark.parametrize("hung", [{SMI: hang()}, {NVLINK: hang()}])
def test_a_hung_nvidia_smi_or_nvlink_read_is_unknown(hung):
    check, unknown = run_probe("health_nvlink", {}, replies(pci(), smi(nvlink=nvlink_text({})), hung))
    assert check is None and unknown.findings[0].value == DRIVER_UNRESPONSIVE


def test_without_an_nvswitch_nvlinks_are_not_judged():
    check, _ = run_probe("health_nvlink", {}, replies(pci(nvswitches=0), smi(nvlink="")))
    assert check.findings[0].severity == "failure" and "no NVSwitch" in check.findings[0].message


def test_an_infiniband_port_in_init_fails():
    ib = "/sys/class/infiniband"
    sysfs = {f"{ib}/mlx5_0/ports/1/state": "2: INIT", f"{ib}/mlx5_0/ports/1/phys_state": "5: LinkUp",
             f"{ib}/mlx5_0/ports/1/rate": "200 Gb/sec (4X HDR)", f"{ib}/mlx5_0/fw_ver": "20.31.1014",
             f"{ib}/mlx5_1/ports/1/state": "4: ACTIVE", f"{ib}/mlx5_1/ports/1/phys_state": "5: LinkUp",
             f"{ib}/mlx5_1/ports/1/rate": "200 Gb/sec (4X HDR)", f"{ib}/mlx5_1/ports/1/link_layer": "InfiniBand"}
    check, _ = run_probe("health_infiniband", {"rate_gbps": 200, "min_ports": 2}, {IB: files(sysfs)})
    assert [f.severity for f in check.findings] == ["failure", "ok"]
    assert check.findings[0].message == "port mlx5_0/1: INIT/LinkUp, want ACTIVE/LinkUp"
    assert check.findings[1].message == "port mlx5_1/1, InfiniBand: ACTIVE/LinkUp at 200 Gb/s"
    none, _ = run_probe("health_infiniband", {"min_ports": 4}, {IB: files({})})
    assert none.findings[0].severity == "failure"


def test_every_probe_is_documented_and_read_only_by_default():
    for name, task in TASK_TYPES.items():
        if name.startswith("health_"):
            assert type(task).__doc__ and len(type(task).__doc__) > 60, name
            params = build_params(name, {})
            assert getattr(params, "remedy", False) is False, name


def test_host_sizing_without_a_cpu_count_is_unknown():
    check, unknown = run_probe("health_host_sizing", {}, replies(smi(), host(None), MEMINFO))
    assert check is None and unknown.findings[0].value == "unreadable"
