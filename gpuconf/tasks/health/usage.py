"""How the GPUs are set up and used: persistence mode, utilization, power, host sizing."""
from __future__ import annotations

from pydantic import Field, model_validator

from gpuconf.facts import gather
from gpuconf.facts.base import Fact
from gpuconf.results import Finding
from gpuconf.tasks.base import Change, Facts, Unknown, Verdict, run
from gpuconf.tasks.health.common import FAILURE, OK, WARNING, HealthProbe, NvidiaSmiParams, Severity, verdict
from gpuconf.tasks.health.readings import GpuReading, GpuReadingsProbe, gpu_readings, require_readings


class PersistenceParams(NvidiaSmiParams):
    severity: Severity = Field(FAILURE, description="the severity of a GPU with persistence mode Disabled")
    remedy: bool = Field(False, description="apply only: nvidia-smi -pm 1 when a GPU has it Disabled")


def judge_persistence(gpus: tuple[GpuReading, ...], severity: str, probe: str = "persistence") -> list[Finding]:
    findings = []
    for gpu in gpus:
        state = {True: "Enabled", False: "Disabled", None: "not reported"}[gpu.persistence]
        findings.append(Finding(probe, OK if gpu.persistence else severity, f"{gpu.label}: persistence mode {state}",
                                gpu=gpu.index, bus_id=gpu.bus_id, value=state))
    return findings


class PersistenceEnabled(GpuReadingsProbe[PersistenceParams]):
    """Persistence mode is Enabled on every GPU (`persistence_mode`). Without it the
    driver tears down and re-initialises the GPUs between jobs, and settings such as
    power limits are lost. Remedy (`remedy: true`, apply only): `nvidia-smi -pm 1`."""

    name = "health_persistence"
    probe = "persistence"
    Params = PersistenceParams

    def check(self, params: PersistenceParams, facts: Facts) -> Verdict:
        readings = self.readings(params, facts)
        findings = judge_persistence(readings.gpus, params.severity, self.probe)
        off = [g.label for g in readings.gpus if g.persistence is False]
        changes = []
        if params.remedy and off:
            changes.append(Change(f"enable persistence mode on {', '.join(off)}: nvidia-smi -pm 1",
                                  [run(["nvidia-smi", "-pm", "1"], timeout=params.nvidia_smi_timeout * 3)],
                                  verify=False))
        return verdict(findings, changes)


class UtilizationParams(NvidiaSmiParams):
    pass


class Utilization(GpuReadingsProbe[UtilizationParams]):
    """Reports each GPU's utilization (`utilization.gpu`, percent) as a finding with
    severity ok: reported for dashboards, not judged."""

    name = "health_utilization"
    probe = "utilization"
    Params = UtilizationParams

    def judge_gpus(self, params: UtilizationParams, gpus: tuple[GpuReading, ...]) -> list[Finding]:
        return [Finding(self.probe, OK, f"{g.label}: utilization " + (f"{g.utilization_percent:g} %" if
                        g.utilization_percent is not None else "not reported"), gpu=g.index, bus_id=g.bus_id,
                        value=g.utilization_percent)
                for g in gpus]


class PowerParams(NvidiaSmiParams):
    pass


def describe_power(gpu: GpuReading) -> str:
    if gpu.power_draw_w is None:
        return f"{gpu.label}: power draw not reported"
    if not gpu.power_limit_w:
        return f"{gpu.label}: drawing {gpu.power_draw_w:g} W"
    share = 100.0 * gpu.power_draw_w / gpu.power_limit_w
    return f"{gpu.label}: drawing {gpu.power_draw_w:g} W of its {gpu.power_limit_w:g} W limit ({share:.0f} %)"


class PowerDraw(GpuReadingsProbe[PowerParams]):
    """Reports each GPU's power draw against its limit (`power.draw`, `power.limit`) as a
    finding with severity ok (value: watts drawn): reported, not judged."""

    name = "health_power"
    probe = "power"
    Params = PowerParams

    def judge_gpus(self, params: PowerParams, gpus: tuple[GpuReading, ...]) -> list[Finding]:
        return [Finding(self.probe, OK, describe_power(g), gpu=g.index, bus_id=g.bus_id, value=g.power_draw_w)
                for g in gpus]


class HostSizingParams(NvidiaSmiParams):
    cpus_per_gpu_min: float = Field(4, ge=0, description="advised logical CPUs (nproc) per GPU, at least")
    cpus_per_gpu_max: float = Field(8, ge=0, description="advised logical CPUs per GPU, at most")
    ram_per_vram_min: float = Field(2, ge=0, description="advised host RAM as a multiple of total GPU memory, "
                                    "at least")
    ram_per_vram_max: float = Field(4, ge=0, description="advised host RAM per total GPU memory, at most")
    warn_above_max: bool = Field(False, description="also warn above the advised range (more than needed is not "
                                 "a health problem, so by default it is only reported)")

    @model_validator(mode="after")
    def _ranges(self) -> HostSizingParams:
        if self.cpus_per_gpu_min > self.cpus_per_gpu_max or self.ram_per_vram_min > self.ram_per_vram_max:
            raise ValueError("each minimum must not be above its maximum")
        return self


MEMINFO, MEMORY_MB = gather.MEMINFO, gather.memory_mb


def judge_sizing(cpus: int, ram_mb: int, gpus: tuple[GpuReading, ...], params: HostSizingParams,
                 probe: str = "host_sizing") -> list[Finding]:
    if not gpus:
        return [Finding(probe, OK, "no GPU: nothing to size")]
    vram_mib = sum(g.memory_total_mib or 0 for g in gpus)

    def advise(what: str, ratio: float, low: float, high: float, unit: str) -> Finding:
        text = f"{what}: {round(ratio, 2):g}{unit}, advised {low:g}-{high:g}{unit}"
        if ratio < low:
            return Finding(probe, WARNING, text + " (too few)", value=round(ratio, 2))
        if ratio > high:
            return Finding(probe, WARNING if params.warn_above_max else OK, text + " (more than advised)",
                           value=round(ratio, 2))
        return Finding(probe, OK, text, value=round(ratio, 2))

    findings = [advise(f"{cpus} logical CPUs for {len(gpus)} GPU(s)", cpus / len(gpus),
                       params.cpus_per_gpu_min, params.cpus_per_gpu_max, " per GPU")]
    if vram_mib:
        findings.append(advise(f"{ram_mb / 1024:.0f} GiB RAM for {vram_mib / 1024:.0f} GiB of GPU memory",
                               ram_mb / vram_mib, params.ram_per_vram_min, params.ram_per_vram_max, "x"))
    else:
        findings.append(Finding(probe, OK, "GPU memory not reported: RAM sizing not judged"))
    return findings


class HostSizing(HealthProbe[HostSizingParams]):
    """Sizing advice, warnings only: logical CPUs per GPU within `cpus_per_gpu_min`-
    `cpus_per_gpu_max` (4-8) and host RAM within `ram_per_vram_min`-`ram_per_vram_max`
    (2-4) times the GPUs' total memory. Too few is a warning; more than advised is
    reported (a warning with `warn_above_max`)."""

    name = "health_host_sizing"
    probe = "host_sizing"
    Params = HostSizingParams

    def reads(self, params: HostSizingParams) -> list[Fact]:
        return [gather.HOST, MEMINFO, gpu_readings(params.nvidia_smi_timeout)]

    def judge(self, params: HostSizingParams, facts: Facts) -> list[Finding]:
        cpus, ram_mb = facts[gather.HOST]["cpus"], MEMORY_MB(facts[MEMINFO])
        if not cpus:
            raise Unknown("the host's CPU count cannot be read", findings=[Finding(
                self.probe, FAILURE, "host_sizing cannot be read: no CPU count", value="unreadable")])
        gpus = require_readings(facts, self.probe, params.nvidia_smi_timeout).gpus
        return judge_sizing(cpus, ram_mb, gpus, params, self.probe)
