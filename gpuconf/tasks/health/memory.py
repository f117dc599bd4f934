"""GPU memory: uncorrectable ECC errors and row remapping, and how full it is."""
from __future__ import annotations

from pydantic import Field

from gpuconf.results import Finding
from gpuconf.tasks.health.common import FAILURE, OK, WARNING, NvidiaSmiParams, Where
from gpuconf.tasks.health.readings import GpuReading, GpuReadingsProbe


class EccParams(NvidiaSmiParams):
    max_uncorrected_volatile: int = Field(0, ge=0, description="uncorrected ECC errors since the last driver "
                                          "load a GPU may have (ecc.errors.uncorrected.volatile.total)")


def judge_ecc(gpus: tuple[GpuReading, ...], params: EccParams, probe: str = "ecc") -> list[Finding]:
    findings = []
    for gpu in gpus:
        where = Where(gpu=gpu.index, bus_id=gpu.bus_id)
        problems = []
        count = gpu.ecc_uncorrected_volatile
        if count is not None and count > params.max_uncorrected_volatile:
            problems.append(f"{count} uncorrected ECC error(s) since the driver loaded")
        if gpu.remapped_rows_pending:
            problems.append("a row remap is pending (reset the GPU)")
        if gpu.remapped_rows_failure:
            problems.append("row remapping failed (the GPU needs replacing)")
        if gpu.retired_pages_pending:
            problems.append("a page retirement is pending (reset the GPU)")
        if problems:
            findings.append(Finding(probe, FAILURE, f"{gpu.label}: " + "; ".join(problems), value=count, count=count,
                                    **where))
        elif count is None and gpu.remapped_rows_pending is None and gpu.retired_pages_pending is None:
            findings.append(Finding(probe, OK, f"{gpu.label}: no ECC reporting (ECC off or not supported)",
                                    **where))
        else:
            findings.append(Finding(probe, OK, f"{gpu.label}: {count or 0} uncorrected ECC errors, no pending "
                                    "remap", value=count or 0, count=count or 0, **where))
    return findings


class NoEccErrors(GpuReadingsProbe[EccParams]):
    """No GPU has uncorrected ECC errors since the driver loaded
    (`ecc.errors.uncorrected.volatile.total` above `max_uncorrected_volatile`, 0), a
    pending or failed row remap (`remapped_rows.pending`/`failure`, Ampere and later)
    or a pending page retirement (`retired_pages.pending`, older GPUs). Each is a
    failure; GPUs without ECC are reported as such (ok)."""

    name = "health_ecc"
    probe = "ecc"
    Params = EccParams

    def judge_gpus(self, params: EccParams, gpus: tuple[GpuReading, ...]) -> list[Finding]:
        return judge_ecc(gpus, params, self.probe)


class MemoryUseParams(NvidiaSmiParams):
    warn_percent: float = Field(90, gt=0, le=100, description="a warning above this share of memory in use")


def judge_memory(gpus: tuple[GpuReading, ...], params: MemoryUseParams, probe: str = "memory") -> list[Finding]:
    findings = []
    for gpu in gpus:
        where = Where(gpu=gpu.index, bus_id=gpu.bus_id)
        used, total = gpu.memory_used_mib, gpu.memory_total_mib
        if used is None or not total:
            findings.append(Finding(probe, OK, f"{gpu.label}: memory use not reported", **where))
            continue
        share = round(100.0 * used / total, 1)
        severity = WARNING if share > params.warn_percent else OK
        note = f" (warning above {params.warn_percent:g} %)" if severity == WARNING else ""
        findings.append(Finding(probe, severity, f"{gpu.label}: {used:g} of {total:g} MiB in use ({share:g} %)"
                                f"{note}", value=share, **where))
    return findings


class MemoryUse(GpuReadingsProbe[MemoryUseParams]):
    """Reports each GPU's memory in use (`memory.used` / `memory.total`): a warning above
    `warn_percent` (90 %), since a nearly full GPU cannot take a new job."""

    name = "health_memory"
    probe = "memory"
    Params = MemoryUseParams

    def judge_gpus(self, params: MemoryUseParams, gpus: tuple[GpuReading, ...]) -> list[Finding]:
        return judge_memory(gpus, params, self.probe)
