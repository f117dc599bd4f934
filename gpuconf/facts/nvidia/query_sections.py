"""Extract the typed sections of one GPU block from an nvidia-smi -q tree.

Each function takes the text-format path first and the XML path second (see
``tree.Node.get``); internal to ``query.py``.
"""
from __future__ import annotations

from gpuconf.facts.common import bool_value, float_value, int_value, text_value
from gpuconf.facts.nvidia.clocks import CLOCK_EVENT_REASON_BITS, ClockEventReasons
from gpuconf.facts.nvidia.fabric import Fabric
from gpuconf.facts.nvidia.query_model import (
    Clocks,
    EccErrors,
    GpuProcess,
    MigDevice,
    PowerReadings,
    RemappedRows,
    RetiredPages,
    Temperatures,
)
from gpuconf.facts.nvidia.tree import Node


def temperatures(node: Node) -> Temperatures:
    """The Temperature section (absolute thresholds and T.Limit-relative ones)."""
    return Temperatures(
        gpu_c=int_value(node.get("gpu_current_temp", "gpu_temp")),
        memory_c=int_value(node.get("memory_current_temp", "memory_temp")),
        shutdown_c=int_value(node.get("gpu_shutdown_temp", "gpu_temp_max_threshold")),
        slowdown_c=int_value(node.get("gpu_slowdown_temp", "gpu_temp_slow_threshold")),
        max_operating_c=int_value(node.get("gpu_max_operating_temp", "gpu_temp_max_gpu_threshold")),
        target_c=int_value(node.get("gpu_target_temperature")),
        tlimit_c=int_value(node.get("gpu_t_limit_temp", "gpu_temp_tlimit")),
        shutdown_tlimit_c=int_value(
            node.get("gpu_shutdown_t_limit_temp", "gpu_temp_max_tlimit_threshold")
        ),
        slowdown_tlimit_c=int_value(
            node.get("gpu_slowdown_t_limit_temp", "gpu_temp_slow_tlimit_threshold")
        ),
    )


def power(node: Node) -> PowerReadings:
    """GPU Power Readings (535+) or Power Readings (older)."""
    # Pre-535 "Power Readings": "Power Limit" is the requested one, "Enforced" the current.
    return PowerReadings(
        draw_w=float_value(node.get("instantaneous_power_draw", "power_draw")),
        average_draw_w=float_value(node.get("average_power_draw")),
        limit_w=float_value(node.get("current_power_limit", "enforced_power_limit")),
        requested_limit_w=float_value(node.get("requested_power_limit", "power_limit")),
        default_limit_w=float_value(node.get("default_power_limit")),
        min_limit_w=float_value(node.get("min_power_limit")),
        max_limit_w=float_value(node.get("max_power_limit")),
    )


def clocks(gpu: Node) -> Clocks:
    """Current and Max Clocks."""
    def mhz(section: str, name: str) -> int | None:
        return int_value(gpu.get(f"{section}/{name}", f"{section}/{name}_clock"))

    return Clocks(
        graphics_mhz=mhz("clocks", "graphics"),
        sm_mhz=mhz("clocks", "sm"),
        memory_mhz=int_value(gpu.get("clocks/memory", "clocks/mem_clock")),
        video_mhz=mhz("clocks", "video"),
        max_graphics_mhz=mhz("max_clocks", "graphics"),
        max_sm_mhz=mhz("max_clocks", "sm"),
        max_memory_mhz=int_value(gpu.get("max_clocks/memory", "max_clocks/mem_clock")),
        max_video_mhz=mhz("max_clocks", "video"),
    )


REASON_ALIASES = {"idle": "gpu_idle", "display_clocks_setting": "display_clock_setting"}


def reasons(node: Node | None) -> ClockEventReasons | None:
    """Clocks Event Reasons / Clocks Throttle Reasons, nested HW Slowdown children included."""
    if node is None or not node.children:
        return None
    active: list[str] = []
    inactive: list[str] = []
    unrecognised: list[str] = []
    for _, child in node.walk():
        name = child.key
        for prefix in ("clocks_event_reason_", "clocks_throttle_reason_"):
            name = name.removeprefix(prefix)
        name = REASON_ALIASES.get(name, name)
        if name not in CLOCK_EVENT_REASON_BITS:
            unrecognised.append(name)
            continue
        state = bool_value(child.value)
        if state is True:
            active.append(name)
        elif state is False:
            inactive.append(name)
    return ClockEventReasons(tuple(active), tuple(inactive), tuple(unrecognised))


def ecc_sums(node: Node | None) -> tuple[int | None, int | None]:
    """(corrected, uncorrected) totals of a Volatile/Aggregate ECC node."""
    if node is None:
        return None, None
    single, double = node.child("single_bit"), node.child("double_bit")
    if single is not None or double is not None:
        return (
            int_value(single.get("total")) if single else None,
            int_value(double.get("total")) if double else None,
        )
    corrected: list[int] = []
    uncorrected: list[int] = []
    for child in node.children:
        value = int_value(child.value)
        if value is None:
            continue
        if "uncorrectable" in child.key:
            uncorrected.append(value)
        elif "correctable" in child.key:
            corrected.append(value)
    return (sum(corrected) if corrected else None, sum(uncorrected) if uncorrected else None)


def ecc(gpu: Node) -> EccErrors:
    """ECC Mode and ECC Errors totals."""
    volatile = ecc_sums(gpu.find("ecc_errors/volatile"))
    aggregate = ecc_sums(gpu.find("ecc_errors/aggregate"))
    return EccErrors(
        mode_current=bool_value(gpu.get("ecc_mode/current", "ecc_mode/current_ecc")),
        mode_pending=bool_value(gpu.get("ecc_mode/pending", "ecc_mode/pending_ecc")),
        volatile_corrected=volatile[0],
        volatile_uncorrected=volatile[1],
        aggregate_corrected=aggregate[0],
        aggregate_uncorrected=aggregate[1],
        sram_threshold_exceeded=bool_value(gpu.get("ecc_errors/aggregate/sram_threshold_exceeded")),
    )


def retired_pages(node: Node | None) -> RetiredPages | None:
    """Retired Pages; None when absent or all N/A (Ampere and later)."""
    if node is None or not node.children:
        return None
    pages = RetiredPages(
        single_bit=int_value(node.get("single_bit_ecc", "multiple_single_bit_retirement/retired_count")),
        double_bit=int_value(node.get("double_bit_ecc", "double_bit_retirement/retired_count")),
        pending=bool_value(
            node.get("pending_page_blacklist", "pending_page_retirement", "pending_retirement",
                     "pending_blacklist")
        ),
    )
    return None if pages == RetiredPages() else pages  # all N/A: no page retirement


def remapped_rows(node: Node | None) -> RemappedRows | None:
    """Remapped Rows; None for "Remapped Rows : N/A" (no row remapping on this GPU)."""
    if node is None or not node.children:
        return None
    return RemappedRows(
        correctable=int_value(node.get("correctable_error", "remapped_row_corr")),
        uncorrectable=int_value(node.get("uncorrectable_error", "remapped_row_unc")),
        pending=bool_value(node.get("pending", "remapped_row_pending")),
        failure=bool_value(node.get("remapping_failure_occurred", "remapped_row_failure")),
    )


def fabric(node: Node | None) -> Fabric | None:
    """Fabric (NVSwitch registration); None when the section is absent."""
    if node is None:
        return None
    return Fabric(
        state=text_value(node.get("state")),
        status=text_value(node.get("status")),
        clique_id=text_value(node.get("cliqueid", "clique_id")),
        cluster_uuid=text_value(node.get("clusteruuid", "cluster_uuid")),
        health_summary=text_value(node.get("health/summary")),
        health_bandwidth=text_value(node.get("health/bandwidth")),
    )


def processes(node: Node | None) -> tuple[GpuProcess, ...]:
    """The Processes section, text (GI/CI lines before each Process ID) or XML."""
    if node is None:
        return ()
    processes: list[GpuProcess] = []
    pending: dict[str, str | None] = {}
    for child in node.children:
        if child.key == "process_info":  # XML: one element per process
            processes.append(
                process(child, child.get("pid"), child.get("process_name"), {
                    "gpu_instance_id": child.get("gpu_instance_id"),
                    "compute_instance_id": child.get("compute_instance_id"),
                })
            )
        elif child.key in ("gpu_instance_id", "compute_instance_id"):
            pending[child.key] = child.value
        elif child.key == "process_id":  # text: GI/CI lines precede "Process ID"
            processes.append(process(child, child.value, child.get("name"), pending))
            pending = {}
    return tuple(processes)


def process(node: Node, pid: str | None, name: str | None, ids: dict[str, str | None]) -> GpuProcess:
    """One process entry."""
    return GpuProcess(
        pid=int_value(pid),
        type=text_value(node.get("type")),
        name=text_value(name),
        used_memory_mib=int_value(node.get("used_gpu_memory", "used_memory")),
        gpu_instance_id=int_value(ids.get("gpu_instance_id")),
        compute_instance_id=int_value(ids.get("compute_instance_id")),
    )


def mig_devices(gpu: Node) -> tuple[MigDevice, ...]:
    """MIG Device blocks (text: directly under the GPU; XML: under mig_devices)."""
    nodes = gpu.all("mig_device") + [
        device for group in gpu.all("mig_devices") for device in group.all("mig_device")
    ]
    return tuple(
        MigDevice(
            index=int_value(node.get("index")),
            gpu_instance_id=int_value(node.get("gpu_instance_id")),
            compute_instance_id=int_value(node.get("compute_instance_id")),
            multiprocessor_count=int_value(node.get("device_attributes/shared/multiprocessor_count")),
            memory_total_mib=int_value(node.get("shared_fb_memory_usage/total", "fb_memory_usage/total")),
            memory_used_mib=int_value(node.get("shared_fb_memory_usage/used", "fb_memory_usage/used")),
        )
        for node in nodes
    )

