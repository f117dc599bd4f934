"""Host facts, gathered in one round trip at play start.

Everything here reads procfs/sysfs or runs commands that cannot hang (no
nvidia-smi: a wedged GPU must never stall fact gathering). GPUs and NVSwitches
are found by PCI vendor 0x10de in sysfs, HCAs in /sys/class/infiniband.
"""
from __future__ import annotations

from typing import Any

from gpuconf.facts.base import Fact, FactUnavailable, FileState, Output, file_state, shell
from gpuconf.facts.nvidia import OPEN, parse_proc_driver_version

PCI_NVIDIA = (
    'for d in /sys/bus/pci/devices/*; do [ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] && '
    'printf "%s %s %s\\n" "${d##*/}" "$(cat "$d/class")" "$(cat "$d/device")"; done; true'
)
GPU_CLASSES = ("0x030000", "0x030200", "0x030100")
BRIDGE_CLASS = "0x068000"  # NVSwitch


def _text(state: FileState) -> str:
    return state.text or "" if state.exists else ""


def _os_release(text: str) -> dict[str, str]:
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.lower()] = value.strip().strip('"')
    return {"id": values.get("id", ""), "version_id": values.get("version_id", ""),
            "pretty_name": values.get("pretty_name", "")}


def _meminfo_mb(text: str) -> int:
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 0


def _pci(output: Output) -> dict[str, Any]:
    gpus, switches = [], []
    for line in output.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            address, klass, device = parts
            if klass in GPU_CLASSES:
                gpus.append({"pci_address": address, "device_id": device})
            elif klass == BRIDGE_CLASS:
                switches.append({"pci_address": address, "device_id": device})
    return {"gpus": gpus, "nvswitches": switches}


def _driver(state: FileState) -> dict[str, Any]:
    text = _text(state)
    if not text:
        return {"loaded": False, "version": None, "open": False}
    loaded = parse_proc_driver_version(text)
    version = getattr(loaded, "version", None)
    return {"loaded": True, "version": version, "open": getattr(loaded, "flavour", None) == OPEN}


def module_names(out: Output) -> list[str]:
    """Loaded modules from /proc/modules or, where the kernel has none, `lsmod`."""
    if out.timed_out:
        raise FactUnavailable(f"cat /proc/modules || lsmod did not finish within {out.timeout or 10:g} s")
    if out.rc != 0 and not out.stdout.strip():
        raise FactUnavailable(f"neither /proc/modules nor lsmod is readable: {out.stderr.strip()[:200] or 'no output'}")
    names = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if parts and not (parts[0] == "Module" and parts[1:2] == ["Size"]):
            names.append(parts[0])
    return sorted(names)


def modules_fact() -> Fact:
    return shell("modules", "cat /proc/modules 2>/dev/null || lsmod", module_names, timeout=10)


FACTS: dict[str, tuple[Fact, Any]] = {
    "kernel": (file_state("/proc/sys/kernel/osrelease"), lambda s: _text(s).strip()),
    "boot_id": (file_state("/proc/sys/kernel/random/boot_id"), lambda s: _text(s).strip()),
    "modules": (modules_fact(), None),
    "os": (file_state("/etc/os-release", follow=True), lambda s: _os_release(_text(s))),
    "memory_mb": (file_state("/proc/meminfo"), lambda s: _meminfo_mb(_text(s))),
    "nvidia_driver": (file_state("/proc/driver/nvidia/version"), _driver),
    "hostname": (shell("hostname", "hostname", lambda o: o.stdout.strip()), None),
    "cpus": (shell("nproc", "nproc", lambda o: int(o.stdout.strip() or 0)), None),
    "architecture": (shell("arch", "uname -m", lambda o: o.stdout.strip()), None),
    "pci": (shell("pci:10de", PCI_NVIDIA, _pci), None),
    "infiniband": (shell("ib:devices", "ls -1 /sys/class/infiniband 2>/dev/null; true",
                         lambda o: o.stdout.split()), None),
}


def fact_requests() -> list[Fact]:
    return [fact for fact, _ in FACTS.values()]


def assemble(values: dict[str, Any]) -> dict[str, Any]:
    """Build the `facts` variable from the parsed fact values (by fact key)."""
    facts: dict[str, Any] = {}
    for name, (fact, convert) in FACTS.items():
        value = values.get(fact.key)
        if isinstance(value, Exception):
            facts[name] = None
            continue
        facts[name] = convert(value) if convert else value
    pci = facts.pop("pci") or {"gpus": [], "nvswitches": []}
    facts["gpus"] = pci["gpus"]
    facts["gpu_count"] = len(pci["gpus"])
    facts["nvswitch"] = bool(pci["nvswitches"])
    facts["nvswitch_count"] = len(pci["nvswitches"])
    facts["infiniband"] = facts["infiniband"] or []
    return facts
