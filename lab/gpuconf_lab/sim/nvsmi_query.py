"""``nvidia-smi --query-gpu`` fields: real names, aliases, units and value formats.

Names, units and spellings follow the real CSV captures in ``fixtures/real/nvidia-smi``
(``query-gpu-csv-*``): a value with a unit prints as ``81920 MiB``, ``0 %``, ``62.50 W``,
``1410 MHz`` (``nounits`` drops the unit, in the header too), and a value the GPU does not
have prints ``[N/A]``. An unknown field is refused the way nvidia-smi refuses it.
"""
from __future__ import annotations

import time

import gpu as gpu_state
import nvsmi_report
import state

NA = "[N/A]"

# alias -> canonical name
ALIASES = {"gpu_name": "name", "gpu_serial": "serial", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id",
           "clocks.gr": "clocks.current.graphics", "clocks.sm": "clocks.current.sm",
           "clocks.mem": "clocks.current.memory", "clocks.video": "clocks.current.video",
           "clocks.applications.gr": "clocks.applications.graphics",
           "clocks.applications.mem": "clocks.applications.memory",
           "clocks.default_applications.gr": "clocks.default_applications.graphics",
           "clocks.default_applications.mem": "clocks.default_applications.memory",
           "clocks.max.gr": "clocks.max.graphics", "clocks.max.mem": "clocks.max.memory"}

REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
           "hw_power_brake_slowdown", "sw_thermal_slowdown", "sync_boost")
ECC_PARTS = ("device_memory", "dram", "register_file", "l1_cache", "l2_cache", "texture_memory", "cbu", "sram", "total")


# nvidia-smi's spelling of NVML's nvmlDeviceGpuRecoveryAction_t
RECOVERY_ACTIONS = nvsmi_report.RECOVERY_ACTIONS


def _active(flag: bool) -> str:
    return "Active" if flag else "Not Active"


def _watts(value: float) -> tuple[str, str]:
    return f"{value:.2f}", "W"


def fields_for(g: gpu_state.Gpu, driver: str, count: int) -> dict:
    """Every field's (value, unit) for one GPU."""
    m = g.model
    graphics, sm, memory, video = g.clocks()
    reasons = g.reasons()
    hopper = m.temp_limit_style
    values = {
        "timestamp": (time.strftime("%Y/%m/%d %H:%M:%S.") + f"{int(time.time() * 1000) % 1000:03d}", ""),
        "driver_version": (driver, ""), "count": (str(count), ""), "name": (m.name, ""),
        "serial": (g.serial, ""), "uuid": (g.uuid, ""), "pci.bus_id": (g.bdf, ""),
        "pci.domain": ("0x0000", ""), "pci.bus": (f"0x{g.bus:02X}", ""), "pci.device": ("0x00", ""),
        "pci.device_id": (f"0x{m.device_id:04X}10DE", ""), "pci.sub_device_id": (f"0x{m.subsystem:08X}", ""),
        "pci.baseClass": ("0x3", ""), "pci.subClass": ("0x2", ""),
        "pcie.link.gen.current": (str(g.pcie_gen), ""), "pcie.link.gen.gpucurrent": (str(g.pcie_gen), ""),
        "pcie.link.gen.max": (str(m.pcie_gen), ""), "pcie.link.gen.gpumax": (str(m.pcie_gen), ""),
        "pcie.link.gen.hostmax": (str(m.pcie_gen), ""),
        "pcie.link.width.current": (str(m.pcie_width), ""), "pcie.link.width.max": (str(m.pcie_width), ""),
        "index": (str(g.index), ""), "display_mode": ("Enabled", ""), "display_active": ("Disabled", ""),
        "display_attached": ("No", ""),
        "persistence_mode": ("Enabled" if g.persistence else "Disabled", ""), "addressing_mode": ("None", ""),
        "accounting.mode": ("Disabled", ""), "accounting.buffer_size": ("4000", ""),
        "driver_model.current": (NA, ""), "driver_model.pending": (NA, ""),
        "vbios_version": (m.vbios, ""), "inforom.img": (m.inforom[0], ""), "inforom.oem": (m.inforom[1], ""),
        "inforom.ecc": (m.inforom[2], ""), "inforom.pwr": (NA, ""), "inforom.checksum_validation": ("valid", ""),
        "gom.current": (NA, ""), "gom.pending": (NA, ""), "fan.speed": (NA, "%"), "pstate": ("P0", ""),
        "clocks_event_reasons.supported": ("0x00000000000001FF", ""),
        "clocks_event_reasons.active": (f"0x{g.reasons_mask():016X}", ""),
        "memory.total": (str(m.memory_mib), "MiB"), "memory.reserved": (str(m.memory_reserved_mib), "MiB"),
        "memory.used": (str(g.memory_used), "MiB"), "memory.free": (str(g.memory_free), "MiB"),
        "compute_mode": ("Default", ""), "compute_cap": (m.compute_cap, ""),
        "utilization.gpu": (str(g.utilization), "%"), "utilization.memory": (str(g.utilization // 3), "%"),
        "utilization.encoder": ("0", "%"), "utilization.decoder": ("0", "%"), "utilization.jpeg": ("0", "%"),
        "utilization.ofa": ("0", "%"),
        "encoder.stats.sessionCount": ("0", ""), "encoder.stats.averageFps": ("0", ""),
        "encoder.stats.averageLatency": ("0", ""),
        "ecc.mode.current": ("Enabled", ""), "ecc.mode.pending": ("Enabled", ""),
        "retired_pages.single_bit_ecc.count": (NA if m.architecture != "Turing" else "0", ""),
        "retired_pages.double_bit.count": (NA if m.architecture != "Turing" else "0", ""),
        "retired_pages.pending": (NA if m.architecture != "Turing" else "No", ""),
        "remapped_rows.correctable": ("0", "") if m.architecture != "Turing" else (NA, ""),
        "remapped_rows.uncorrectable": (str(g.ecc_aggregate), "") if m.architecture != "Turing" else (NA, ""),
        "remapped_rows.pending": ("Yes" if g.remap_pending else "No", "") if m.architecture != "Turing" else (NA, ""),
        "remapped_rows.failure": ("No", "") if m.architecture != "Turing" else (NA, ""),
        "temperature.gpu": (str(g.temperature), ""),
        "temperature.gpu.tlimit": (str(g.tlimit()) if hopper else NA, ""),
        "temperature.memory": ("N/A" if g.memory_temperature is None else str(g.memory_temperature), ""),
        "power.management": ("Enabled", ""), "power.draw": _watts(g.power_draw),
        "power.draw.average": _watts(g.power_draw), "power.draw.instant": _watts(g.power_draw),
        "power.limit": _watts(g.power_limit), "enforced.power.limit": _watts(g.power_limit),
        "power.default_limit": _watts(m.power_default_w), "power.min_limit": _watts(m.power_min_w),
        "power.max_limit": _watts(m.power_max_w),
        "clocks.current.graphics": (str(graphics), "MHz"), "clocks.current.sm": (str(sm), "MHz"),
        "clocks.current.memory": (str(memory), "MHz"), "clocks.current.video": (str(video), "MHz"),
        "clocks.applications.graphics": (str(m.clocks_applications[0]), "MHz"),
        "clocks.applications.memory": (str(m.clocks_applications[1]), "MHz"),
        "clocks.default_applications.graphics": (str(m.clocks_applications[0]), "MHz"),
        "clocks.default_applications.memory": (str(m.clocks_applications[1]), "MHz"),
        "clocks.max.graphics": (str(m.clocks_max[0]), "MHz"), "clocks.max.sm": (str(m.clocks_max[1]), "MHz"),
        "clocks.max.memory": (str(m.clocks_max[2]), "MHz"),
        "mig.mode.current": ("Disabled" if m.architecture != "Turing" else NA, ""),
        "mig.mode.pending": ("Disabled" if m.architecture != "Turing" else NA, ""),
        "fabric.state": (g.fabric_state if m.fabric_probe else NA, ""),
        "fabric.status": (g.fabric_status if m.fabric_probe else NA, ""),
        "protected_memory.total": ("0", "MiB"), "protected_memory.used": ("0", "MiB"),
        "protected_memory.free": ("0", "MiB"),
        "hostname": (state.hostname(), ""),
        "gpu_recovery_action": (RECOVERY_ACTIONS.get(g.recovery_action, "Unknown"), ""),
    }
    values.update(fabric_fields(g, driver))
    for reason in REASONS:
        for prefix in ("clocks_event_reasons", "clocks_throttle_reasons"):
            values[f"{prefix}.{reason}"] = (_active(reasons[reason]), "")
    values["clocks_throttle_reasons.supported"] = values["clocks_event_reasons.supported"]
    values["clocks_throttle_reasons.active"] = values["clocks_event_reasons.active"]
    values["clocks_event_reasons.display_clock_setting"] = (_active(False), "")
    for counter in ("sw_power_cap", "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"):
        values[f"clocks_event_reasons_counters.{counter}"] = ("0", "us")
    for kind, count in (("corrected", 0), ("uncorrected", None)):
        for scope in ("volatile", "aggregate"):
            amount = 0 if count == 0 else (g.ecc_volatile if scope == "volatile" else g.ecc_aggregate)
            for part in ECC_PARTS:
                shown = str(amount) if part in ("device_memory", "dram", "total") else \
                    ("0" if part == "sram" else NA)
                values[f"ecc.errors.{kind}.{scope}.{part}"] = (shown, "")
    for bucket, value in (("max", "2560" if hopper else "640"), ("high", "0"), ("partial", "0"), ("low", "0"), ("none", "0")):
        values[f"remapped_rows.histogram.{bucket}"] = (value if m.architecture != "Turing" else NA, "")
    return values


def fabric_fields(g: gpu_state.Gpu, driver: str) -> dict:
    """The fabric ids and health, as `-q`'s Fabric section shows them (nvsmi_report.fabric_block):
    known from 550 (the summary from 580); an older driver refuses them."""
    major = int(driver.split(".")[0])
    if major < 550:
        return {}
    probe = g.model.fabric_probe
    rack = g.cluster_uuid not in ("N/A", gpu_state.ZERO_UUID)
    summary, bandwidth = ("Healthy", "Full") if rack else (NA, NA)
    values = {"fabric.cliqueId": (g.clique_id if probe and g.clique_id != "N/A" else NA, ""),
              "fabric.clusterUuid": (g.cluster_uuid if probe and g.cluster_uuid != "N/A" else NA, ""),
              "fabric.health.bandwidth": (bandwidth if probe else NA, "")}
    if major >= 580:
        values["fabric.health.summary"] = (summary if probe else NA, "")
    return values


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def query(gpus: list, names: list[str], driver: str, header: bool, units: bool) -> tuple[str, int]:
    """The CSV text and exit status for ``--query-gpu=names``."""
    if not gpus:
        return "No devices were found\n", 6
    count = len(gpu_state.gpus())
    rows = [fields_for(g, driver, count) for g in gpus]
    for name in names:
        if canonical(name) not in rows[0]:
            return f'Field "{name}" is not a valid field to query.\n\n', 2
    lines = []
    if header:
        cells = []
        for name in names:
            unit = rows[0][canonical(name)][1]
            cells.append(f"{canonical(name)} [{unit}]" if unit and units else canonical(name))
        lines.append(", ".join(cells))
    for row in rows:
        cells = []
        for name in names:
            value, unit = row[canonical(name)]
            cells.append(f"{value} {unit}" if unit and units and not value.startswith("[") else value)
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n", 0

