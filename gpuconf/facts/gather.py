"""Host facts, gathered in one round trip at play start.

Everything here reads procfs/sysfs or runs commands that cannot hang (no
nvidia-smi: a wedged GPU must never stall fact gathering). GPUs and NVSwitches
are found by PCI vendor 0x10de in sysfs, HCAs in /sys/class/infiniband.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypedDict

from gpuconf.facts.base import Fact, FactUnavailable, FileState, Output, command, file_glob, file_state, host_info
from gpuconf.facts.kernel import ProcModules, parse_lsmod, parse_proc_modules
from gpuconf.facts.nvidia import OPEN, parse_proc_driver_version
from gpuconf.facts.nvlink_fabric import nvlink_fabric
from gpuconf.facts.platform import OS_RELEASE_FACT, os_facts
from gpuconf.files.values import JSONValue

GPU_CLASSES = ("0x030000", "0x030200", "0x030100")
BRIDGE_CLASS = "0x068000"  # NVSwitch


def _text(state: FileState) -> str:
    return state.text or "" if state.exists else ""


def _meminfo_mb(text: str) -> int:
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 0


class PciDevice(TypedDict):
    pci_address: str
    device_id: str


class PciDevices(TypedDict):
    """The `pci` fact: NVIDIA GPUs and NVSwitches, as the host fact `gpus` shows them."""

    gpus: list[PciDevice]
    nvswitches: list[PciDevice]


def pci_devices(files: dict[str, str]) -> PciDevices:
    """NVIDIA GPUs and NVSwitches from sysfs: /sys/bus/pci/devices/ADDRESS/{vendor,class,device}."""
    gpus: list[PciDevice] = []
    switches: list[PciDevice] = []
    for path, vendor in sorted(files.items()):
        if not path.endswith("/vendor") or vendor.strip() != "0x10de":
            continue
        directory = path[: -len("/vendor")]
        address = directory.rsplit("/", 1)[-1]
        klass, device = files.get(directory + "/class", "").strip(), files.get(directory + "/device", "").strip()
        if klass in GPU_CLASSES:
            gpus.append(PciDevice(pci_address=address, device_id=device))
        elif klass == BRIDGE_CLASS:
            switches.append(PciDevice(pci_address=address, device_id=device))
    return PciDevices(gpus=gpus, nvswitches=switches)


PCI = "/sys/bus/pci/devices/*/"
PCI_FACT = file_glob([PCI + "vendor", PCI + "class", PCI + "device"], pci_devices, key="pci")


def _driver(state: FileState) -> dict[str, JSONValue]:
    text = _text(state)
    if not text:
        return {"loaded": False, "version": None, "open": False}
    loaded = parse_proc_driver_version(text)
    version = getattr(loaded, "version", None)
    return {"loaded": True, "version": version, "open": getattr(loaded, "flavour", None) == OPEN}


def _lsmod(out: Output) -> ProcModules | None:
    """None when /proc/modules exists (lsmod was not run)."""
    if out.timed_out:
        raise FactUnavailable(f"lsmod did not finish within {out.timeout or 10:g} s")
    if out.rc != 0:
        raise FactUnavailable(f"no /proc/modules, and lsmod failed: {out.stderr.strip()[:200] or 'no output'}")
    return parse_lsmod(out.stdout) if out.stdout.strip() else None


# A kernel without module support (CONFIG_MODULES=n) has no /proc/modules: lsmod then says what is built in.
PROC_MODULES = file_state("/proc/modules")
LSMOD = command(["lsmod"], _lsmod, timeout=10, unless_exists="/proc/modules")
MODULE_FACTS = [PROC_MODULES, LSMOD]


def proc_modules(proc: FileState, lsmod: ProcModules | None) -> ProcModules:
    """The loaded modules with their state and use count, from /proc/modules or else lsmod."""
    if proc.exists:
        return parse_proc_modules(proc.text or "")
    return lsmod or ProcModules(())


def loaded_modules(proc: FileState, lsmod: ProcModules | None) -> list[str]:
    modules = proc_modules(proc, lsmod)
    # a line the parser did not know still names a loaded module
    return sorted(modules.names | {line.split()[0] for line in modules.problems if line.split()})


BOOT_ID = file_state("/proc/sys/kernel/random/boot_id")
HOST = host_info()
MEMINFO = file_state("/proc/meminfo")
INFINIBAND = file_glob(["/sys/class/infiniband/*"], lambda files: sorted(p.rsplit("/", 1)[-1] for p in files),
                       what="name", key="ib:devices")
# host fact -> the file it is read from, and how
FACTS: dict[str, tuple[Fact[FileState], Callable[[FileState], JSONValue]]] = {
    "kernel": (file_state("/proc/sys/kernel/osrelease"), lambda s: _text(s).strip()),
    "boot_id": (BOOT_ID, lambda s: _text(s).strip()),
    "os": (OS_RELEASE_FACT, lambda s: os_facts(_text(s))),  # the platform's read and table
    "memory_mb": (MEMINFO, lambda s: _meminfo_mb(_text(s))),
    "nvidia_driver": (file_state("/proc/driver/nvidia/version"), _driver),
}


def memory_mb(state: FileState) -> int:
    return _meminfo_mb(_text(state))


def fact_requests() -> list[Fact]:
    return [*(fact for fact, _ in FACTS.values()), HOST, PCI_FACT, INFINIBAND, *MODULE_FACTS]


def assemble(values: Mapping[str, object]) -> dict[str, JSONValue]:
    """Build the `facts` variable from the parsed fact values (by fact key). A fact that
    could not be read is None, never a guess."""
    facts: dict[str, JSONValue] = {}
    for name, (fact, convert) in FACTS.items():
        value = values.get(fact.key)
        if not isinstance(value, FileState):  # not read (an exception, or no reply)
            facts[name] = None
            continue
        try:
            facts[name] = convert(value)
        except (ValueError, IndexError):  # a host that prints something odd: unknown, never a crash
            facts[name] = None
    release = facts["os"]
    facts["os_family"] = (release.get("family") if isinstance(release, Mapping) else None) or None  # ansible_os_family
    host = values.get(HOST.key)
    host = host if isinstance(host, dict) else {}
    facts["hostname"], facts["architecture"], facts["cpus"] = host.get("hostname"), host.get("architecture"), \
        host.get("cpus")
    proc, lsmod = values.get(PROC_MODULES.key), values.get(LSMOD.key)
    facts["modules"] = loaded_modules(proc, lsmod) if isinstance(proc, FileState) and \
        (lsmod is None or isinstance(lsmod, ProcModules)) else None
    pci = values.get(PCI_FACT.key)
    pci = pci if isinstance(pci, dict) else PciDevices(gpus=[], nvswitches=[])
    facts["infiniband"] = infiniband if isinstance(infiniband := values.get(INFINIBAND.key), list) else []
    facts["gpus"] = [{"pci_address": gpu["pci_address"], "device_id": gpu["device_id"]} for gpu in pci["gpus"]]
    facts["gpu_count"] = len(pci["gpus"])
    facts["nvswitch"] = bool(pci["nvswitches"])
    facts["nvswitch_count"] = len(pci["nvswitches"])
    facts["nvlink_fabric"] = nvlink_fabric(pci["gpus"], pci["nvswitches"])
    return facts
