"""The node's ``/sys`` and ``/proc/driver``: plain tmpfs files the simulators keep current.

The runtime mounts empty tmpfs filesystems there (never the machine's sysfs). At boot the PCI
devices of the profile appear; whenever modules load or unload, :func:`render_modules`
rewrites what depends on them: driver bindings, ``/sys/module``, the InfiniBand classes and
``/proc/driver/nvidia``. Formats follow real captures (``fixtures/real/sysfs-infiniband``).
"""
from __future__ import annotations

import os
import shutil

import fabric
import identity
import modules
import state

SYS = "/sys"
PROC_DRIVER = "/proc/driver"
LINK_SPEED = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
              5: "32.0 GT/s PCIe"}


def _write(absolute: str, text: str) -> None:
    real = state.path(absolute)
    os.makedirs(os.path.dirname(real), exist_ok=True)
    with open(real, "w", encoding="utf-8") as handle:
        handle.write(text)


def _symlink(target_real: str, absolute: str) -> None:
    real = state.path(absolute)
    os.makedirs(os.path.dirname(real), exist_ok=True)
    if os.path.lexists(real):
        if os.path.islink(real) and os.readlink(real) == target_real:
            return
        _remove(absolute)
    os.symlink(target_real, real)


def _remove(absolute: str) -> None:
    real = state.path(absolute)
    if os.path.islink(real) or os.path.isfile(real):
        os.unlink(real)
    elif os.path.isdir(real):
        shutil.rmtree(real, ignore_errors=True)


def _clear_dir(absolute: str) -> None:
    real = state.path(absolute)
    if not os.path.isdir(real):
        return
    for name in os.listdir(real):
        _remove(f"{absolute}/{name}")


def reset() -> None:
    """Empty what a previous boot left (the runtime keeps the same tmpfs across reboots)."""
    _clear_dir(SYS)
    _clear_dir(PROC_DRIVER)


def render_pci() -> None:
    """The profile's PCI devices under /sys/bus/pci/devices (GPUs, NVSwitches, HCAs)."""
    import gpu

    profile = state.profile()
    link_gen = {g.bus: g.pcie_gen for g in gpu.gpus()}
    for bus in profile.gpu_buses:
        _pci_device(bus, 0x10DE, profile.gpu.device_id, profile.gpu.subsystem, 0x030200,
                    link_gen.get(bus, profile.gpu.pcie_gen), profile.gpu.pcie_gen, profile.gpu.pcie_width)
    for bus in profile.nvswitch_buses:
        _pci_device(bus, 0x10DE, profile.nvswitch_device_id, 0x16B110DE, 0x068000,
                    profile.gpu.pcie_gen, profile.gpu.pcie_gen, 2)
    if profile.hca:
        gen = 5 if profile.hca.rate_gbps >= 400 else 4
        for bus in profile.hca_buses:
            _pci_device(bus, 0x15B3, profile.hca.device_id, 0x001715B3, 0x020700, gen, gen, 16)


def _pci_device(bus, vendor, device, subsystem, pci_class, gen, max_gen, width) -> None:
    base = f"{SYS}/bus/pci/devices/{identity.sysfs_bdf(bus)}"
    values = {
        "vendor": f"0x{vendor:04x}", "device": f"0x{device:04x}",
        "subsystem_vendor": f"0x{subsystem & 0xFFFF:04x}", "subsystem_device": f"0x{subsystem >> 16:04x}",
        "class": f"0x{pci_class:06x}", "current_link_speed": LINK_SPEED[gen],
        "max_link_speed": LINK_SPEED[max_gen], "current_link_width": str(width),
        "max_link_width": str(width), "numa_node": "0" if bus < 0x80 else "1", "enable": "1",
    }
    for name, value in values.items():
        _write(f"{base}/{name}", value + "\n")


def set_link_gen(bus: int, gen: int) -> None:
    """A PCIe link retrained at another generation (the pcie-downgrade fault)."""
    _write(f"{SYS}/bus/pci/devices/{identity.sysfs_bdf(bus)}/current_link_speed", LINK_SPEED[gen] + "\n")


def render_modules() -> None:
    """Everything in /sys and /proc/driver that depends on which modules are loaded."""
    entries = modules.loaded()
    names = {entry["name"] for entry in entries}
    profile = state.profile()
    _render_sys_module(entries)
    gpu_driver = "nvidia" if "nvidia" in names else ("nouveau" if "nouveau" in names else None)
    for bus in profile.gpu_buses:
        _bind(bus, gpu_driver)
    for bus in profile.hca_buses:
        _bind(bus, "mlx5_core" if "mlx5_core" in names else None)
    _render_infiniband(names)
    _render_proc_driver(next((e for e in entries if e["name"] == "nvidia"), None))


def _render_sys_module(entries: list[dict]) -> None:
    wanted = {entry["name"]: entry for entry in entries}
    real = state.path(f"{SYS}/module")
    if os.path.isdir(real):
        for name in os.listdir(real):
            if name not in wanted:
                _remove(f"{SYS}/module/{name}")
    for name, entry in wanted.items():
        base = f"{SYS}/module/{name}"
        _write(f"{base}/initstate", "live\n")
        _write(f"{base}/refcnt", f"{modules.refcount(entry, entries)}\n")
        _write(f"{base}/taint", (entry.get("taint") or "") + "\n")
        if entry.get("version"):
            _write(f"{base}/version", entry["version"] + "\n")
        _clear_dir(f"{base}/holders")
        os.makedirs(state.path(f"{base}/holders"), exist_ok=True)
        for holder in modules.holders(name, entries):
            _symlink("../../" + holder, f"{base}/holders/{holder}")
        for param in entry.get("params", []):
            key, _, value = param.partition("=")
            if key:
                _write(f"{base}/parameters/{key}", (value or "Y") + "\n")


def _bind(bus: int, driver: str | None) -> None:
    device = f"{SYS}/bus/pci/devices/{identity.sysfs_bdf(bus)}"
    link = f"{device}/driver"
    if driver is None:
        _remove(link)
        return
    os.makedirs(state.path(f"{SYS}/bus/pci/drivers/{driver}"), exist_ok=True)
    _symlink(f"../../drivers/{driver}", link)


def _render_infiniband(names: set) -> None:
    """``class/infiniband`` has the HCAs while mlx5_ib drives them; ``infiniband_mad`` and
    ``infiniband_verbs`` exist (with their ``abi_version``) as soon as ib_umad / ib_uverbs
    load, with one umadN/uverbsN per HCA only when there are HCAs."""
    profile = state.profile()
    hca = profile.hca
    devices = "mlx5_ib" in names and hca is not None
    _render_char_class("infiniband_mad", "umad", "5", "ib_umad" in names, devices)
    _render_char_class("infiniband_verbs", "uverbs", "6", "ib_uverbs" in names, devices)
    if not devices:
        _remove(f"{SYS}/class/infiniband")
        return
    fabric.refresh()
    for i, bus in enumerate(profile.hca_buses):
        base = f"{SYS}/class/infiniband/mlx5_{i}"
        guid = identity.guid_colons(identity.hca_guid(i))
        for name, value in (("node_guid", guid), ("sys_image_guid", guid), ("fw_ver", hca.firmware),
                            ("hca_type", hca.ca_type), ("board_id", hca.board_id),
                            ("node_type", "1: CA"), ("node_desc", f"{state.hostname()} mlx5_{i}")):
            _write(f"{base}/{name}", value + "\n")
        port = f"{base}/ports/1"
        _symlink(fabric.state_file(), f"{port}/state")
        _symlink(fabric.sm_lid_file(), f"{port}/sm_lid")
        for name, value in (("phys_state", "5: LinkUp"), ("rate", f"{hca.rate_gbps} Gb/sec ({hca.rate_name})"),
                            ("link_layer", "InfiniBand"), ("lid", f"0x{identity.port_lid(i):x}"),
                            ("lid_mask_count", "0"), ("sm_sl", "0"), ("cap_mask", "0xa751e848"),
                            ("gids/0", "fe80:0000:0000:0000:" + guid)):
            _write(f"{port}/{name}", value + "\n")
        _symlink(f"../../../bus/pci/devices/{identity.sysfs_bdf(bus)}", f"{base}/device")


def _render_char_class(cls: str, prefix: str, abi: str, present: bool, devices: bool) -> None:
    if not present:
        _remove(f"{SYS}/class/{cls}")
        return
    _clear_dir(f"{SYS}/class/{cls}")
    _write(f"{SYS}/class/{cls}/abi_version", abi + "\n")
    for i in range(state.profile().hca_count if devices else 0):
        _write(f"{SYS}/class/{cls}/{prefix}{i}/ibdev", f"mlx5_{i}\n")
        if prefix == "umad":
            _write(f"{SYS}/class/{cls}/{prefix}{i}/port", "1\n")


def _render_proc_driver(nvidia: dict | None) -> None:
    base = f"{PROC_DRIVER}/nvidia"
    if nvidia is None:
        _remove(base)
        return
    import gpu

    _write(f"{base}/version", f"NVRM version: {gpu.module_banner(nvidia)}\n{gpu.GCC_LINE}")
    params = dict(p.partition("=")[::2] for p in nvidia.get("params", []))
    firmware = params.get("NVreg_EnableGpuFirmware", "18")
    _write(f"{base}/params", "".join(f"{k}: {v}\n" for k, v in (
        ("ResmanDebugLevel", "4294967295"), ("RmLogonRC", "1"), ("ModifyDeviceFiles", "1"),
        ("DeviceFileUID", "0"), ("DeviceFileGID", "0"), ("DeviceFileMode", "438"),
        ("EnableStreamMemOPs", params.get("NVreg_EnableStreamMemOPs", "0")),
        ("EnableGpuFirmware", firmware), ("RegistryDwords", f'"{params.get("NVreg_RegistryDwords", "")}"'))))
    profile = state.profile()
    for index, bus in enumerate(profile.gpu_buses):
        _write(f"{base}/gpus/{identity.sysfs_bdf(bus)}/information",
               f"Model: \t\t {profile.gpu.name}\nIRQ:   \t\t {120 + index}\n"
               f"GPU UUID: \t {identity.gpu_uuid(index)}\nVideo BIOS: \t {profile.gpu.vbios.lower()}\n"
               f"Bus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\n"
               f"Bus Location: \t {identity.sysfs_bdf(bus)}\nDevice Minor: \t {index}\n"
               f"GPU Excluded:\t No\n")


def render_efivars() -> None:
    """The firmware's SecureBoot variable, as this boot started (what mokutil --sb-state reads).
    efivarfs shows a variable as 4 bytes of attributes (here BOOTSERVICE_ACCESS |
    RUNTIME_ACCESS), then its data."""
    real = state.path(state.SECURE_BOOT_VARIABLE)
    os.makedirs(os.path.dirname(real), exist_ok=True)
    with open(real, "wb") as handle:
        handle.write(b"\x06\x00\x00\x00" + (b"\x01" if state.secure_boot() else b"\x00"))


def render_all() -> None:
    """Rebuild everything (boot)."""
    reset()
    render_efivars()
    render_pci()
    render_modules()

