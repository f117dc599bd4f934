"""A node's boot, in the two steps the runtime's PID 1 calls (see docs/lab-contract.md).

``boot prepare`` runs on a fresh ``/run``, before the runtime binds the ``/proc`` overrides:
it picks the kernel (the newest installed, as GRUB would), makes a new boot id, takes the
firmware's Secure Boot setting for this boot, writes the proc files, and lays out the PCI
devices in ``/sys``.

``boot start`` then does what a Debian boot does with modules and services:

1. the initramfs stage loads nouveau for the GPUs unless the *initramfs snapshot* of
   ``modprobe.d`` blacklists it (a blacklist only in ``/etc`` is not seen yet);
2. ``systemd-modules-load`` loads ``/etc/modules-load.d`` (and ``/etc/modules``);
3. udev coldplug: mlx5_core for the HCAs; for the GPUs nvidia if this kernel has it (a DKMS
   build or a precompiled package) and it may load (nouveau not loaded, a signature under
   Secure Boot, a flavour the GPU supports), else nouveau if the live config does not
   blacklist it;
4. every enabled unit starts (``*.wants`` of the default targets).
"""
from __future__ import annotations

import os
import sys
import time
import uuid

import catalog
import chardev
import el
import entry
import gpu_faults
import initramfs
import kernels
import lifecycle
import logs
import modprobe_conf
import modules
import mounts
import state
import sysfs
import units
from modules import ModuleError
from services import StartError

MODULES_LOAD_DIRS = ("/usr/lib/modules-load.d", "/lib/modules-load.d", "/run/modules-load.d", "/etc/modules-load.d")


def prepare() -> None:
    release = kernels.next_kernel()
    boot_id = str(uuid.uuid4())
    now = time.time()
    secure_boot = state.firmware_secure_boot()
    state.write_json(f"{state.RUN}/boot.json", {"boot_id": boot_id, "kernel": release, "booted_at": now,
                                                "secure_boot": secure_boot})
    proc = f"{state.RUN}/proc"
    state.write_in_place(f"{proc}/osrelease", release + "\n")
    state.write_in_place(f"{proc}/boot_id", boot_id + "\n")
    state.write_in_place(f"{proc}/version", catalog.proc_version(release))
    state.write_in_place(f"{proc}/tainted", "0\n")
    state.write_in_place(f"{proc}/cmdline", kernel_cmdline(release))
    state.write_in_place(f"{proc}/meminfo", meminfo(state.profile().memory_gib))
    modules.clear()
    chardev.boot_reset()
    for directory in ("/run/systemd/system", "/run/lock", "/run/user"):
        os.makedirs(state.path(directory), exist_ok=True)
    profile = state.profile()
    logs.kmsg(catalog.proc_version(release).strip(), 5)
    logs.kmsg(f"Command line: {kernel_cmdline(release).strip()}", 6)
    logs.kmsg(f"DMI: gpuconf lab node, profile {profile.name}: {profile.description}", 6)
    logs.kmsg(f"secureboot: Secure boot {'enabled' if secure_boot else 'disabled'}", 6)
    if secure_boot:
        logs.kmsg("Kernel is locked down from EFI Secure Boot mode; see man kernel_lockdown.7", 5)
    for bus in profile.gpu_buses:
        logs.kmsg(f"pci {sysfs_bdf(bus)}: [10de:{profile.gpu.device_id:04x}] type 00 class 0x030200", 6)
    for bus in profile.nvswitch_buses:
        logs.kmsg(f"pci {sysfs_bdf(bus)}: [10de:{profile.nvswitch_device_id:04x}] type 00 class 0x068000", 6)
    for bus in profile.hca_buses:
        logs.kmsg(f"pci {sysfs_bdf(bus)}: [15b3:{profile.hca.device_id:04x}] type 00 class 0x020700", 6)
    sysfs.render_all()


def kernel_cmdline(release: str) -> str:
    """/proc/cmdline: on EL the options of the kernel's BLS entry (grubby edits them)."""
    if el.is_el():
        return el.cmdline(release)
    return f"BOOT_IMAGE=/boot/vmlinuz-{release} root=/dev/vda1 ro console=ttyS0 quiet\n"


def sysfs_bdf(bus: int) -> str:
    return f"0000:{bus:02x}:00.0"


def _load(name: str, config, *, users: int = 0, ident: str = "") -> bool:
    try:
        modules.load_with_deps(name, config, users=users)
        if ident:
            logs.journal(f"Inserted module '{name}'", ident, 312)
        return True
    except ModuleError as error:
        if ident:
            text = f"Failed to find module '{name}'" if error.kind == "not_found" else \
                f"Failed to insert module '{name}': {error.reason}"
            logs.journal(text, ident, 312, priority=3)
        return False


def modules_load_list() -> list[str]:
    chosen: dict[str, str] = {}
    for directory in MODULES_LOAD_DIRS:
        try:
            names = sorted(os.listdir(state.path(directory)))
        except OSError:
            continue
        for name in names:
            if name.endswith(".conf"):
                chosen[name] = f"{directory}/{name}"
    wanted = []
    for name in sorted(chosen):
        for line in (state.read_text(chosen[name], "") or "").splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith(";"):
                wanted.append(line.split()[0])
    return wanted


def start() -> None:
    release = state.running_kernel()
    profile = state.profile()
    early = initramfs.snapshot_config(release)
    live = modprobe_conf.live_config()
    early_refused, always_refused = el.blacklisted_by_cmdline(state.read_text(f"{state.RUN}/proc/cmdline", "") or "")
    early.blacklist |= early_refused
    live.blacklist |= always_refused
    if profile.gpu_count and "nouveau" not in early.blacklist and "nouveau" not in early.install \
            and initramfs.carries_module(release, "nouveau"):
        # nouveau binds the GPUs and the framebuffer console: in use until reboot.
        _load("nouveau", early, users=1)
    for name in modules_load_list():
        if not modules.is_loaded(name):
            _load(name, live, ident="systemd-modules-load")
    if profile.hca_count and "mlx5_core" not in live.blacklist:
        _load("mlx5_core", live)
    if profile.gpu_count and not modules.is_loaded("nvidia") and "nvidia" not in live.blacklist:
        if "nvidia" in modules.index() and _load("nvidia", live):
            for name in catalog.NVIDIA_BOOT_MODULES[1:]:
                _load(name, live)
    if profile.gpu_count and not modules.is_loaded("nvidia") and not modules.is_loaded("nouveau") \
            and "nouveau" not in live.blacklist:
        _load("nouveau", live, users=1)
    if modules.is_loaded("nvidia"):
        gpu_faults.reapply_sticky()   # failed hardware fails again at every boot
    mounts.mount_all()   # local-fs.target and remote-fs.target: what /etc/fstab asks for
    for name in _boot_order(units.enabled_units()):
        try:
            lifecycle.start(name)
        except StartError:
            pass
    logs.systemd("Reached target multi-user.target - Multi-User System.")
    logs.systemd(f"Startup finished in 2.183s (kernel) + {state.uptime():.3f}s (userspace) = "
                 f"{2.183 + state.uptime():.3f}s.")


def _boot_order(names: list[str]) -> list[str]:
    """Enabled units, each after the enabled units its ``After=`` names."""
    after = {name: set(units.load(name).words("Unit", "After")) & set(names) for name in names}
    ordered: list[str] = []

    def visit(name: str, chain: tuple) -> None:
        if name in ordered or name in chain:
            return
        for dep in sorted(after.get(name, ())):
            visit(dep, chain + (name,))
        ordered.append(name)

    for name in names:
        visit(name, ())
    return ordered


def meminfo(gib: int) -> str:
    """The node's /proc/meminfo: its profile's memory (a DGX A100's 1 TiB), not the machine's."""
    total = gib * 1024 * 1024
    free = total * 97 // 100
    fields = [("MemTotal", total), ("MemFree", free), ("MemAvailable", total * 98 // 100), ("Buffers", 1024),
              ("Cached", total // 100), ("SwapCached", 0), ("SwapTotal", 0), ("SwapFree", 0),
              ("Shmem", 1024), ("HugePages_Total", 0), ("Hugepagesize", 2048)]
    return "".join(f"{name + ':':<16}{value:>8} kB\n" if not name.startswith("HugePages_") else
                   f"{name + ':':<16}{value:>8}\n" for name, value in fields)


def main(argv: list[str]) -> int:
    step = argv[0] if argv else ""
    if step == "prepare":
        prepare()
    elif step == "start":
        start()
    elif step == "all":
        prepare()
        start()
    else:
        sys.stderr.write("usage: boot prepare|start\n")
        return 2
    return 0


if __name__ == "__main__":
    entry.run(main)

