"""The simulated GPUs: what each one reports, from the profile, driver state, settings and faults.

A GPU's settings (persistence mode, power limit) live in volatile state tied to one load of
the ``nvidia`` module, so they reset when the driver is reloaded or the node reboots, as on a
real host. Faults come from ``sim/fault`` and are either volatile (``/run``: ECC volatile
counts, a hung driver) or persistent (``/var/lib``: temperature, PCIe link, NVLink) until
cleared.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import identity
import modules
import state

SETTINGS_JSON = f"{state.RUN}/gpu-settings.json"
VOLATILE_FAULTS = f"{state.RUN}/faults.json"
PERSISTENT_FAULTS = f"{state.VAR}/faults.json"

# Build dates of the releases the lab's repository ships (release-day approximations where no
# capture of that release's /proc/driver/nvidia/version was found).
BUILD_DATES = {
    "535.86.05": "Fri Jul 14 20:20:58 UTC 2023",
    "535.104.05": "Sat Aug 19 01:15:15 UTC 2023",
    "535.247.01": "Thu May  1 05:12:33 UTC 2025",
    "550.127.05": "Tue Oct  8 20:06:25 UTC 2024",
    "570.195.03": "Fri Sep 19 22:41:08 UTC 2025",
    "580.95.05": "Tue Sep 23 09:41:26 UTC 2025",
    "580.105.08": "Wed Oct 29 23:18:02 UTC 2025",
    "595.71.05": "Thu Apr 30 18:02:47 UTC 2026",
    "595.91.07": "Mon Aug  3 00:00:00 UTC 2026",     # redistrib_595.91.07.json's release_date
    "620.70.10": "Mon Nov 23 00:00:00 UTC 2026",     # redistrib_620.70.10.json's release_date
}
# The builder named in the open modules' banner (a real one, from open 5xx captures).
OPEN_BUILDER = "dvs-builder@U16-I3-B03-4-3"
GCC_LINE = "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n"
CUDA_BY_BRANCH = {"470": "11.4", "515": "11.7", "525": "12.0", "535": "12.2", "550": "12.4",
                  "560": "12.6", "565": "12.7", "570": "12.8", "575": "12.9", "580": "13.0",
                  "590": "13.1", "595": "13.2", "620": "13.5"}   # 620: its cuda_compat is cuda13.5 (redistrib)

# nvidia-smi's clocks_event_reasons bits
REASON_BITS = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4,
               "hw_slowdown": 0x8, "sync_boost": 0x10, "sw_thermal_slowdown": 0x20,
               "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80,
               "display_clock_setting": 0x100}


def build_date(version: str) -> str:
    return BUILD_DATES.get(version, "Thu Jan  1 00:00:00 UTC 2024")


def module_banner(entry: dict) -> str:
    """What follows ``NVRM version: `` (and ``NVRM: loading ``) for a loaded nvidia module:
    the open modules name themselves and their builder, the proprietary ones do not."""
    version = entry["version"]
    if entry.get("license") == "Dual MIT/GPL":
        return (f"NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  ({OPEN_BUILDER})  "
                f"{build_date(version)}")
    return f"NVIDIA UNIX x86_64 Kernel Module  {version}  {build_date(version)}"


def cuda_version(driver: str) -> str:
    return CUDA_BY_BRANCH.get(driver.split(".")[0], "12.4")


def driver() -> dict | None:
    """The loaded ``nvidia`` module entry (version, load time), or None."""
    return modules.get("nvidia")


def driver_version() -> str | None:
    entry = driver()
    return entry["version"] if entry else None


def faults() -> dict:
    merged = dict(state.read_json(PERSISTENT_FAULTS, {}) or {})
    merged.update(state.read_json(VOLATILE_FAULTS, {}) or {})
    return merged


def settings() -> dict:
    """Settings of the current driver load; empty after a reload or reboot."""
    entry = driver()
    data = state.read_json(SETTINGS_JSON, {}) or {}
    if not entry or data.get("load") != entry.get("since"):
        return {}
    return data


def update_settings(change) -> None:
    """Apply ``change(dict)`` to the settings of the current driver load."""
    with state.locked("gpu"):
        entry = driver()
        data = settings()
        data["load"] = entry.get("since") if entry else None
        change(data)
        state.write_json(SETTINGS_JSON, data)


def _per_gpu(fault: dict | None, index: int):
    """A per-GPU fault value: faults store {"<index>": value}."""
    if not fault:
        return None
    return fault.get(str(index))


@dataclass
class Gpu:
    """Everything nvidia-smi can say about one GPU right now."""

    index: int
    bus: int
    model: object
    uuid: str
    serial: str
    persistence: bool
    power_limit: float
    temperature: int
    memory_temperature: int | None
    utilization: int
    pcie_gen: int
    ecc_volatile: int
    ecc_aggregate: int
    remap_pending: bool
    nvlinks_down: list = field(default_factory=list)
    fabric_state: str = "N/A"
    fabric_status: str = "N/A"
    clique_id: str = "N/A"
    cluster_uuid: str = "N/A"
    recovery_action: int = 0   # NVML's gpu_recovery_action: 0 None, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset
    lost: bool = False         # fallen off the bus: nvidia-smi cannot get a handle for it

    @property
    def bdf(self) -> str:
        return identity.gpu_bdf(self.bus)

    @property
    def power_draw(self) -> float:
        idle = self.model.power_idle_w
        busy = min(self.power_limit, self.model.power_default_w) * 0.92
        return round(idle + (busy - idle) * self.utilization / 100.0, 2)

    @property
    def memory_used(self) -> int:
        return 0 if self.utilization == 0 else int(self.model.memory_mib * 0.6)

    @property
    def memory_free(self) -> int:
        return self.model.memory_mib - self.model.memory_reserved_mib - self.memory_used

    def reasons(self) -> dict:
        """Which clock event (throttle) reasons are active."""
        active = dict.fromkeys(REASON_BITS, False)
        active["gpu_idle"] = self.utilization == 0
        if self.temperature >= self.model.temp_slowdown_c:
            active["hw_slowdown"] = active["hw_thermal_slowdown"] = True
        elif self.temperature >= self.model.temp_max_operating_c:
            active["sw_thermal_slowdown"] = True
        if self.power_limit < self.model.power_default_w and self.utilization > 0:
            active["sw_power_cap"] = True
        return active

    def reasons_mask(self) -> int:
        return sum(bit for name, bit in REASON_BITS.items() if self.reasons()[name])

    def clocks(self) -> tuple[int, int, int, int]:
        """Current graphics, SM, memory, video clocks (MHz)."""
        if self.utilization == 0:
            graphics, sm, memory, video = self.model.clocks_idle
        else:
            graphics, sm, memory, video = self.model.clocks_max
        reasons = self.reasons()
        if reasons["hw_thermal_slowdown"]:
            graphics, sm = graphics // 2, sm // 2
        elif reasons["sw_thermal_slowdown"]:
            graphics, sm = int(graphics * 0.8), int(sm * 0.8)
        return graphics, sm, memory, video

    def tlimit(self) -> int:
        """Hopper's "GPU T.Limit Temp": degrees left before the max operating temperature."""
        return self.model.temp_max_operating_c - self.temperature


def fabric_manager_running() -> bool:
    info = state.read_json(f"{state.RUN}/fabricmanager.json")
    return bool(info) and modules.alive(info.get("pid", 0))


def persistenced_enables() -> bool:
    """True while nvidia-persistenced runs with persistence mode on (its default)."""
    info = state.read_json(f"{state.RUN}/persistenced.json")
    return bool(info) and info.get("persistence", True) and modules.alive(info.get("pid", 0))


ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def fabric_registration(profile) -> tuple[str, str, str, str]:
    """State, status, clique id and cluster UUID of the node's GPUs in the NVLink fabric.

    On HGX boards the node's own fabric manager registers the GPUs; until it runs they stay
    "In Progress" (reference section 5), and the ids stay zero (no multi-node domain). A GB200
    tray is registered by the rack, which assigns a non-zero clique and the domain's UUID.
    """
    if not profile.gpu.fabric_probe:
        return "N/A", "N/A", "N/A", "N/A"
    if profile.nvlink_domain == "rack":
        done, clique, cluster = True, "32766", identity.rack_cluster_uuid()
    elif profile.has_nvswitch:
        done, clique, cluster = fabric_manager_running(), "0", ZERO_UUID
    else:
        return "N/A", "N/A", "N/A", "N/A"
    if not done:
        return "In Progress", "N/A", clique, cluster
    return "Completed", "Success", clique, cluster


def gpus() -> list[Gpu]:
    """The node's GPUs in index order (by PCI bus, as nvidia-smi enumerates them)."""
    profile = state.profile()
    model = profile.gpu
    current = settings()
    found = faults()
    daemon = persistenced_enables()
    fabric, status, clique, cluster = fabric_registration(profile)
    result = []
    for index, bus in enumerate(profile.gpu_buses):
        key = str(index)
        util = _per_gpu(found.get("util"), index) or 0
        temp = _per_gpu(found.get("temp"), index)
        if temp is None:
            temp = model.temp_idle_c + (util * 3) // 10 + (index % 3)
        pcie = _per_gpu(found.get("pcie"), index) or model.pcie_gen
        links = _per_gpu(found.get("nvlink_down"), index) or []
        stuck = fabric != "N/A" and _per_gpu(found.get("fabric_in_progress"), index)   # never finishes
        result.append(Gpu(
            index=index, bus=bus, model=model, uuid=identity.gpu_uuid(index),
            serial=identity.gpu_serial(index),
            persistence=bool(current.get("persistence", {}).get(key, daemon)),
            power_limit=float(current.get("power_limit", {}).get(key, model.power_default_w)),
            temperature=int(temp),
            memory_temperature=None if model.temp_memory_c is None else model.temp_memory_c + util // 10,
            utilization=int(util), pcie_gen=int(pcie),
            ecc_volatile=int(_per_gpu(found.get("ecc_volatile"), index) or 0),
            ecc_aggregate=int(_per_gpu(found.get("ecc_aggregate"), index) or 0),
            remap_pending=bool(_per_gpu(found.get("ecc_volatile"), index)),
            nvlinks_down=list(links), fabric_state="In Progress" if stuck else fabric,
            fabric_status="N/A" if stuck else status,
            clique_id=clique, cluster_uuid=cluster,
            recovery_action=int(_per_gpu(found.get("recovery_action"), index) or 0),
            lost=bool(_per_gpu(found.get("lost"), index)),
        ))
    return result


def set_persistence(indexes: list[int], enabled: bool) -> None:
    def change(data):
        modes = data.setdefault("persistence", {})
        for index in indexes:
            modes[str(index)] = enabled
    update_settings(change)


def daemon_started(indexes: list[int]) -> None:
    """nvidia-persistenced took over: explicit ``-pm`` settings give way to the daemon's."""
    def change(data):
        modes = data.setdefault("persistence", {})
        for index in indexes:
            modes.pop(str(index), None)
    update_settings(change)


def set_power_limit(indexes: list[int], watts: float) -> None:
    def change(data):
        limits = data.setdefault("power_limit", {})
        for index in indexes:
            limits[str(index)] = watts
    update_settings(change)
