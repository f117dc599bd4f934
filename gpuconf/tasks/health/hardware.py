"""The GPUs and their driver: count and model, the loaded driver's version, nouveau."""
from __future__ import annotations

from pydantic import Field

from gpuconf.facts import gather
from gpuconf.facts.base import Fact, FactUnavailable, file_state
from gpuconf.facts.common import canonical_pci_address
from gpuconf.facts.kernel import ProcModules
from gpuconf.facts.nvidia import LoadedDriver, parse_proc_driver_version
from gpuconf.facts.nvidia.failure import GPU_LOST
from gpuconf.results import Finding
from gpuconf.tasks.base import Facts, Params, Unknown
from gpuconf.tasks.health.common import FAILURE, OK, HealthProbe, NvidiaSmiParams, gpu_name
from gpuconf.tasks.health.readings import gpu_readings, require_readings

PCI_FACT = gather.PCI_FACT
DRIVER_VERSION = "/proc/driver/nvidia/version"


class GpuCountParams(NvidiaSmiParams):
    expected_count: int | None = Field(None, ge=0, description="GPUs the inventory expects (null: not checked)")
    expected_model: str | None = Field(None, description="a substring of every GPU's name, e.g. A100-SXM4-80GB "
                                       "(case-insensitive; null: not checked)")


class GpuCountMatches(HealthProbe[GpuCountParams]):
    """The host has the GPUs the inventory expects: the count of NVIDIA GPUs on the PCI
    bus (sysfs, vendor 0x10de) equals `expected_count`, every one of them is listed by
    nvidia-smi (a GPU on the bus that the driver no longer lists has fallen off the bus
    or is lost), and each GPU's name contains `expected_model`. Failures otherwise."""

    name = "health_gpu_count"
    probe = "gpu_count"
    Params = GpuCountParams

    def reads(self, params: GpuCountParams) -> list[Fact]:
        return [PCI_FACT, gpu_readings(params.nvidia_smi_timeout)]

    def judge(self, params: GpuCountParams, facts: Facts) -> list[Finding]:
        pci = facts[PCI_FACT]
        addresses = sorted(a for a in (canonical_pci_address(g["pci_address"]) for g in pci["gpus"]) if a)
        findings = []
        if params.expected_count is not None:
            good = len(addresses) == params.expected_count
            findings.append(Finding(self.probe, OK if good else FAILURE,
                                    f"{len(addresses)} NVIDIA GPU(s) on the PCI bus"
                                    + (", as expected" if good else f", expected {params.expected_count}"),
                                    value=len(addresses)))
        readings = require_readings(facts, self.probe, params.nvidia_smi_timeout, findings)
        listed = readings.by_bus()
        lost = canonical_pci_address(readings.failure.bus_id) if readings.failure and \
            readings.failure.kind == GPU_LOST else None
        for position, address in enumerate(addresses):
            if address not in listed:
                reason = f" ({readings.failure.message})" if address == lost and readings.failure else ""
                findings.append(Finding(self.probe, FAILURE, f"{gpu_name(position, address)} is on the PCI bus "
                                        f"but nvidia-smi does not list it: lost or fallen off the bus{reason}",
                                        gpu=position, bus_id=address))
        for gpu in readings.gpus:
            wanted = params.expected_model
            if wanted and wanted.lower() not in (gpu.name or "").lower():
                findings.append(Finding(self.probe, FAILURE, f"{gpu.label} is {gpu.name}, expected {wanted}",
                                        gpu=gpu.index, bus_id=gpu.bus_id, value=gpu.name))
            else:
                findings.append(Finding(self.probe, OK, f"{gpu.label}: {gpu.name}", gpu=gpu.index,
                                        bus_id=gpu.bus_id, value=gpu.name))
        if not addresses and not readings.gpus and params.expected_count is None:
            findings.append(Finding(self.probe, FAILURE, "no NVIDIA GPU on the PCI bus", value=0))
        return findings


class DriverParams(Params):
    version: str | None = Field(None, description="the pinned driver version, e.g. 535.104.05 (null: any)")


class DriverLoaded(HealthProbe[DriverParams]):
    """The NVIDIA kernel module is loaded (`/proc/driver/nvidia/version`, procfs: it
    cannot hang) and its version is exactly the pinned `version`."""

    name = "health_driver"
    probe = "driver"
    Params = DriverParams

    def reads(self, params: DriverParams) -> list[Fact]:
        return [file_state(DRIVER_VERSION)]

    def judge(self, params: DriverParams, facts: Facts) -> list[Finding]:
        state = facts[file_state(DRIVER_VERSION)]
        if not state.exists:
            return [Finding(self.probe, FAILURE, f"the NVIDIA driver is not loaded ({DRIVER_VERSION} is absent)")]
        loaded = parse_proc_driver_version(state.text or "")
        if not isinstance(loaded, LoadedDriver):
            return [Finding(self.probe, FAILURE, f"cannot read the loaded driver's version from {DRIVER_VERSION}: "
                            f"{(state.text or '').strip()[:120]!r}")]
        if params.version and loaded.version != params.version:
            return [Finding(self.probe, FAILURE, f"driver {loaded.version} is loaded, pinned {params.version} "
                            "(a reboot or reload is needed)", value=loaded.version)]
        pinned = ", the pinned version" if params.version else ""
        return [Finding(self.probe, OK, f"driver {loaded.version} ({loaded.flavour}) loaded{pinned}",
                        value=loaded.version)]


def read_modules(facts: Facts, probe: str) -> ProcModules:
    """The loaded modules (gather.MODULE_FACTS: /proc/modules, else lsmod); `Unknown` when
    neither can be read (that is not "no modules")."""
    try:
        proc, lsmod = facts[gather.PROC_MODULES], facts[gather.LSMOD]
    except FactUnavailable as exc:
        reason = str(exc)
    else:
        if proc.exists or lsmod is not None:
            return gather.proc_modules(proc, lsmod)
        reason = "no /proc/modules and no lsmod output"
    raise Unknown(f"cannot read the loaded modules: {reason}", findings=[Finding(
        probe, FAILURE, f"{probe} cannot be read: {reason}", value="unreadable")])


class NouveauParams(Params):
    pass


class NouveauAbsent(HealthProbe[NouveauParams]):
    """The nouveau module is not loaded (`/proc/modules`). When it is, it holds the GPUs
    and the NVIDIA driver cannot bind them: the `nouveau` role blacklists it."""

    name = "health_nouveau"
    probe = "nouveau"
    Params = NouveauParams

    def reads(self, params: NouveauParams) -> list[Fact]:
        return list(gather.MODULE_FACTS)

    def judge(self, params: NouveauParams, facts: Facts) -> list[Finding]:
        modules = read_modules(facts, self.probe)
        if "nouveau" in modules.names:
            return [Finding(self.probe, FAILURE, "nouveau is loaded: it holds the GPUs instead of nvidia "
                            "(blacklist it in the initramfs and reboot: the nouveau role)")]
        return [Finding(self.probe, OK, "nouveau is not loaded")]
