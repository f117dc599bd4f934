"""The simulated kernel's module loader: what is loaded, what may load, and /proc/modules.

State lives in ``/run/gpuconf-lab/modules.json`` (volatile: a reboot unloads everything).
Loading follows the real rules that matter on GPU servers:

* a module is found in ``/lib/modules/<running release>`` (``updates/`` before ``kernel/``,
  as Debian's depmod search order has it), or loading fails with modprobe's real message;
* ``nvidia`` exists there only once DKMS has built it for that kernel, and it refuses to
  load while nouveau holds the GPUs (``No such device``, plus the NVRM lines in dmesg);
* hardware drivers (nouveau, nvidia, mlx5 and the IB stack) need the profile's hardware;
* under Secure Boot an out-of-tree module without a signature (a DKMS build) is refused with
  ``Key was rejected by service`` (EKEYREJECTED, as with ``module.sig_enforce``), while the
  signed precompiled ``linux-modules-nvidia-*`` modules load;
* open modules (``license=Dual MIT/GPL``) refuse GPUs without a GSP (before Turing) with the
  driver's real message; proprietary ones refuse Grace Hopper and Blackwell GPUs (message
  approximated: no capture of it was found);
* a module in use (by another module, by the console, or by a running daemon such as
  nvidia-persistenced) cannot be removed.
"""
from __future__ import annotations

import os
import time
import zlib

import catalog
import logs
import state
from modprobe_conf import ModprobeConfig, live_config, normalise

MODULES_JSON = f"{state.RUN}/modules.json"
PROC_MODULES = f"{state.RUN}/proc/modules"


class ModuleError(Exception):
    """A load or unload refused; ``kind`` picks the tool's wording, ``reason`` is errno text."""

    def __init__(self, kind: str, module: str, reason: str = "", holders: tuple = ()):
        super().__init__(f"{kind}: {module}: {reason}")
        self.kind = kind          # not_found | insert | in_use | not_loaded | builtin | install
        self.module = module
        self.reason = reason
        self.holders = holders


def module_dir(release: str | None = None) -> str:
    return f"/lib/modules/{release or state.running_kernel()}"


def index(release: str | None = None) -> dict:
    """name -> (node path, fields) of every module file for a kernel, ``updates/`` first."""
    base = module_dir(release)
    found: dict = {}
    real_base = state.path(base)
    subdirs = ["updates", "extra", "kernel"]
    try:
        subdirs += [d for d in sorted(os.listdir(real_base)) if d not in subdirs]
    except FileNotFoundError:
        return found
    for sub in subdirs:
        top = os.path.join(real_base, sub)
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        for directory, _dirs, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith(".ko"):
                    continue
                key = normalise(name)
                if key in found:
                    continue
                real = os.path.join(directory, name)
                fields = read_ko(real)
                if fields is not None:
                    found[key] = (state.unroot(real), fields)
    return found


def read_ko(real: str) -> dict | None:
    try:
        with open(real, encoding="utf-8", errors="replace") as handle:
            return catalog.parse_ko(handle.read(4096))
    except OSError:
        return None


def loaded() -> list[dict]:
    """Loaded modules, most recently loaded first (the order of /proc/modules)."""
    return (state.read_json(MODULES_JSON, {}) or {}).get("loaded", [])


def loaded_names() -> set[str]:
    return {entry["name"] for entry in loaded()}


def is_loaded(name: str) -> bool:
    return normalise(name) in loaded_names()


def get(name: str) -> dict | None:
    name = normalise(name)
    return next((entry for entry in loaded() if entry["name"] == name), None)


def holders(name: str, entries: list[dict]) -> list[str]:
    return sorted(entry["name"] for entry in entries if name in entry["deps"])


def _live_users(entry: dict) -> int:
    count = entry.get("users", 0)
    for pid in entry.get("pids", []):
        if alive(pid):
            count += 1
    return count


def alive(pid: int) -> bool:
    """True while ``pid`` runs (not a zombie). /proc is the node's own, never prefixed."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def refcount(entry: dict, entries: list[dict]) -> int:
    return len(holders(entry["name"], entries)) + _live_users(entry)


TAINT_BITS = {"P": 1, "O": 4096, "E": 8192}


def _save(entries: list[dict]) -> None:
    state.write_json(MODULES_JSON, {"loaded": entries})
    render_proc_modules(entries)
    import chardev

    chardev.render({entry["name"] for entry in entries})
    # /proc/sys/kernel/tainted of the simulated kernel (P, O, E once nvidia has loaded;
    # taint stays after unloading, as the real flag does)
    taint = int((state.read_text(f"{state.RUN}/proc/tainted", "0") or "0").strip() or 0)
    for entry in entries:
        for flag in entry.get("taint", ""):
            taint |= TAINT_BITS.get(flag, 0)
    state.write_in_place(f"{state.RUN}/proc/tainted", f"{taint}\n")


def render_proc_modules(entries: list[dict] | None = None) -> None:
    """Rewrite ``/proc/modules`` in its real format: ``name size refcount users state addr``."""
    entries = loaded() if entries is None else entries
    lines = []
    for entry in entries:
        users = holders(entry["name"], entries)
        used_by = "".join(f"{user}," for user in users) or "-"
        address = 0xFFFFFFFFC0000000 + ((zlib.crc32(entry["name"].encode()) & 0x3FF) << 16)
        taint = f" ({entry['taint']})" if entry.get("taint") else ""
        lines.append(f"{entry['name']} {entry['size']} {refcount(entry, entries)} {used_by} "
                     f"Live 0x{address:016x}{taint}")
    state.write_in_place(PROC_MODULES, "".join(line + "\n" for line in lines), bound_at="/proc/modules")


def resolve(name: str, release: str | None = None, modules: dict | None = None) -> list[str]:
    """Names to load for ``name``, dependencies first; raises ModuleError if one is missing."""
    release = release or state.running_kernel()
    modules = index(release) if modules is None else modules
    order: list[str] = []

    def visit(current: str, chain: tuple) -> None:
        if current in order or current in chain:
            return
        if current not in modules:
            raise ModuleError("not_found", current, module_dir(release))
        for dep in filter(None, modules[current][1].get("depends", "").split(",")):
            visit(normalise(dep), chain + (current,))
        order.append(current)

    visit(normalise(name), ())
    return order


def insert(name: str, node_path: str, fields: dict, params: list[str], *, users: int = 0,
           render: bool = True) -> bool:
    """Insert one module whose dependencies are loaded. False if it was already loaded.
    ``render=False`` leaves /sys to the caller (one rewrite after a chain of inserts)."""
    with state.locked("modules"):
        entries = loaded()
        if any(entry["name"] == name for entry in entries):
            return False
        _check_can_load(name, fields, entries)
        deps = [normalise(d) for d in fields.get("depends", "").split(",") if d]
        missing = [dep for dep in deps if not any(e["name"] == dep for e in entries)]
        if missing:
            logs.kmsg(f"{name}: Unknown symbol in module, or unknown parameter (see dmesg)", 3)
            raise ModuleError("insert", name, "Unknown symbol in module")
        taint = "" if fields.get("intree") else _taint(fields)
        entry = {"name": name, "size": int(fields.get("size") or 16384), "deps": deps,
                 "version": fields.get("version", ""), "license": fields.get("license", ""),
                 "path": node_path, "taint": taint,
                 "params": params, "users": users, "pids": [], "since": time.time()}
        entries.insert(0, entry)
        _save(entries)
        _announce(name, entry)
        if name == "nvidia":
            import chardev

            chardev.nvidia_loaded(params)
    if render:
        import sysfs

        sysfs.render_modules()
    return True


def _taint(fields: dict) -> str:
    """Taint flags of an out-of-tree module: P (not GPL-compatible), O, E (unsigned)."""
    proprietary = "P" if fields.get("license", "GPL") == catalog.PROPRIETARY_LICENSE else ""
    return proprietary + "O" + ("" if fields.get("signer") else "E")


def _check_can_load(name: str, fields: dict, entries: list[dict]) -> None:
    if state.secure_boot() and not fields.get("intree") and not fields.get("signer"):
        logs.kmsg("Loading of unsigned module is rejected", 5)
        raise ModuleError("insert", name, "Key was rejected by service")
    release = state.running_kernel()
    if not fields.get("vermagic", "").startswith(release + " "):
        logs.kmsg(f"{name}: version magic '{fields.get('vermagic', '').strip()}' should be "
                  f"'{catalog.vermagic(release).strip()}'", 3)
        raise ModuleError("insert", name, "Exec format error")
    hardware = fields.get("hardware", "")
    profile = state.profile()
    if hardware == "hca" and not profile.hca_count:
        raise ModuleError("insert", name, "No such device")
    if hardware == "gpu" and not profile.gpu_count:
        raise ModuleError("insert", name, "No such device")
    if name == "nvidia":
        _check_flavour(fields, profile)
    if name == "nvidia" and any(entry["name"] == "nouveau" for entry in entries):
        count = profile.gpu_count
        for line in ("NVRM: The NVIDIA probe routine was not called for %d device(s)." % count,
                     "NVRM: This can occur when a driver such as: \nNVRM: nouveau, rivafb, nvidiafb or rivatv \n"
                     "NVRM: was loaded and obtained ownership of the NVIDIA device(s).",
                     "NVRM: Try unloading the conflicting kernel module (and/or\nNVRM: reconfigure your kernel "
                     "without the conflicting\nNVRM: driver(s)), then try loading the NVIDIA kernel module\n"
                     "NVRM: again.",
                     "NVRM: No NVIDIA devices probed."):
            logs.kmsg(line, 4)
        raise ModuleError("insert", name, "No such device")


def _check_flavour(fields: dict, profile) -> None:
    """The open modules need a GSP; the proprietary ones cannot drive Grace Hopper or Blackwell."""
    import profiles

    architecture = profile.gpu.architecture
    is_open = fields.get("license") == catalog.OPEN_LICENSE
    if is_open and architecture in profiles.NO_GSP_ARCHITECTURES:
        reason = ("installed in this system is not supported by open\nNVRM: nvidia.ko because it does not "
                  "include the required GPU\nNVRM: System Processor (GSP).\nNVRM: Please see the 'Open Linux "
                  "Kernel Modules' and 'GSP\nNVRM: Firmware' sections in the driver README, available on\n"
                  "NVRM: the Linux graphics driver download page at\nNVRM: www.nvidia.com.")
    elif not is_open and architecture in profiles.OPEN_ONLY_ARCHITECTURES:
        reason = "installed in this system requires use of the NVIDIA open kernel\nNVRM: modules."
    else:
        return
    for bus in profile.gpu_buses:
        logs.kmsg(f"NVRM: The NVIDIA GPU 0000:{bus:02x}:00.0 (PCI ID: 10de:{profile.gpu.device_id:04x})\n"
                  f"NVRM: {reason}", 3)
        logs.kmsg(f"nvidia 0000:{bus:02x}:00.0: probe with driver nvidia failed with error -1", 4)
    logs.kmsg(f"NVRM: The NVIDIA probe routine failed for {profile.gpu_count} device(s).", 3)
    logs.kmsg("NVRM: None of the NVIDIA devices were initialized.", 3)
    raise ModuleError("insert", "nvidia", "No such device")


def _announce(name: str, entry: dict) -> None:
    """The kernel log lines a real load prints."""
    profile = state.profile()
    if name == "nvidia":
        import gpu

        logs.kmsg("nvidia: loading out-of-tree module taints kernel.", 4)
        if "P" in entry["taint"]:
            logs.kmsg("nvidia: module license 'NVIDIA' taints kernel.", 4)
        if "E" in entry["taint"]:
            logs.kmsg("nvidia: module verification failed: signature and/or required key missing - "
                      "tainting kernel", 4)
        logs.kmsg("nvidia-nvlink: Nvlink Core is being initialized, major device number 237", 6)
        for bus in profile.gpu_buses:
            logs.kmsg(f"nvidia 0000:{bus:02x}:00.0: enabling device (0000 -> 0002)", 6)
        logs.kmsg(f"NVRM: loading {gpu.module_banner(entry)}", 5)
    elif name == "nvidia_uvm":
        logs.kmsg("nvidia-uvm: Loaded the UVM driver, major device number 511.", 6)
    elif name == "nvidia_modeset":
        logs.kmsg(f"nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  "
                  f"{entry['version']}", 6)
    elif name == "nouveau":
        chip = profile.gpu.lspci_name.split()[0].removesuffix("GL")
        chip_id = {"Ampere": "170000a1", "Hopper": "180000a1", "Turing": "164000a1"}.get(profile.gpu.architecture, "0")
        for bus in profile.gpu_buses:
            logs.kmsg(f"nouveau 0000:{bus:02x}:00.0: NVIDIA {chip} ({chip_id})", 6)
            logs.kmsg(f"nouveau 0000:{bus:02x}:00.0: bios: version {profile.gpu.vbios.lower()}", 6)
    elif name == "mlx5_core":
        for bus in profile.hca_buses:
            logs.kmsg(f"mlx5_core 0000:{bus:02x}:00.0: firmware version: {profile.hca.firmware}", 6)
    elif name == "mlx5_ib":
        for i, _bus in enumerate(profile.hca_buses):
            logs.kmsg(f"mlx5_ib: mlx5_{i}: port 1 link is up", 6)


def remove(name: str, *, force: bool = False) -> None:
    """Remove one loaded module; ModuleError if it is not loaded or still in use."""
    name = normalise(name)
    with state.locked("modules"):
        entries = loaded()
        entry = next((e for e in entries if e["name"] == name), None)
        if entry is None:
            raise ModuleError("not_loaded", name)
        users = holders(name, entries)
        if (users or refcount(entry, entries)) and not force:
            raise ModuleError("in_use", name, holders=tuple(users))
        entries = [e for e in entries if e["name"] != name]
        _save(entries)
        if name == "nvidia":
            logs.kmsg("nvidia-nvlink: Unregistered Nvlink Core, major device number 237", 6)
    import sysfs

    sysfs.render_modules()


def add_user(name: str, pid: int) -> None:
    """A daemon (persistenced, fabricmanager) holds the module open while it runs."""
    with state.locked("modules"):
        entries = loaded()
        for entry in entries:
            if entry["name"] == normalise(name):
                entry["pids"] = [p for p in entry.get("pids", []) if alive(p)] + [pid]
        _save(entries)


def load_with_deps(name: str, config: ModprobeConfig | None = None, extra_params=(),
                   *, users: int = 0) -> list[str]:
    """Load a module and its dependencies the way ``modprobe NAME`` does (no install hooks).

    Returns the modules that were newly inserted.
    """
    config = config or live_config()
    modules = index()
    inserted = []
    order = resolve(name, modules=modules)
    try:
        for current in order:
            node_path, fields = modules[current]
            params = config.params(current) + (list(extra_params) if current == order[-1] else [])
            if insert(current, node_path, fields, params, users=users if current == order[-1] else 0, render=False):
                inserted.append(current)
    finally:
        if inserted:
            import sysfs

            sysfs.render_modules()
    return inserted


def unused_dependencies(name: str) -> list[str]:
    """Dependencies ``modprobe -r`` would also remove after ``name`` (those nothing else uses)."""
    entries = loaded()
    entry = next((e for e in entries if e["name"] == normalise(name)), None)
    return list(entry["deps"]) if entry else []


def clear() -> None:
    """Forget every loaded module (a reboot)."""
    _save([])
