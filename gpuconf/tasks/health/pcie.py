"""PCIe links: trained at their maximum generation and width, judged only under load.

An idle GPU drops its link to gen 1 by design (power saving), so a naive "current
below max" check false-alarms on every idle node. A GPU counts as idle when its
`gpu_idle` clock event reason is active or its utilization is 0 %; an idle GPU's
reduced link is reported with severity ok and the reason. Links come from sysfs
(which cannot hang); nvidia-smi's `pcie.link.*` fields are used for a GPU sysfs
does not show.
"""
from __future__ import annotations

from pydantic import Field

from gpuconf.facts.base import Fact
from gpuconf.facts.gather import PCI_FACT
from gpuconf.results import Finding
from gpuconf.tasks.base import Facts
from gpuconf.tasks.health.common import FAILURE, OK, HealthProbe, NvidiaSmiParams, WhereRead, gpu_name
from gpuconf.tasks.health.pci import GENERATIONS, LINK_FACT, PcieLink, gpu_links, index_of
from gpuconf.tasks.health.readings import (
    GpuReading,
    GpuReadings,
    gpu_readings,
    optional_readings,
    require_readings,
    smi_indexes,
)


class PcieParams(NvidiaSmiParams):
    judge_idle: bool = Field(False, description="also fail idle GPUs whose link is below max (they downshift "
                                                "by design: expect false alarms)")


def is_idle(gpu: GpuReading | None) -> bool | None:
    """True when idle, False when busy, None when nvidia-smi did not say."""
    if gpu is None:
        return None
    if gpu.clock_reasons is not None and "gpu_idle" in gpu.clock_reasons.active:
        return True
    if gpu.utilization_percent is not None:
        return gpu.utilization_percent == 0
    return None


def link_from_smi(gpu: GpuReading) -> PcieLink | None:
    """nvidia-smi's view of the link, as a sysfs-like PcieLink."""
    speeds = {gen: speed for speed, gen in GENERATIONS.items()}
    if gpu.bus_id is None or gpu.pcie_gen_current is None or gpu.pcie_gen_max is None:
        return None
    return PcieLink(gpu.bus_id, speeds.get(gpu.pcie_gen_current), speeds.get(gpu.pcie_gen_max),
                    gpu.pcie_width_current, gpu.pcie_width_max)


def judge_links(links: tuple[PcieLink, ...], readings: GpuReadings | None, params: PcieParams,
                probe: str = "pcie_link", sysfs_order: list[str] | None = None) -> list[Finding]:
    """Findings per link; `readings` None means nvidia-smi did not answer (idle unknown)."""
    by_bus = readings.by_bus() if readings else {}
    indexes = smi_indexes(readings)
    order = sysfs_order if sysfs_order is not None else [link.bus_id for link in links]
    findings = []
    for link in links:
        index = index_of(link.bus_id, indexes, order)
        label = gpu_name(index, link.bus_id)
        where = WhereRead(gpu=index, bus_id=link.bus_id, value=link.generation)
        if not link.below_max:
            findings.append(Finding(probe, OK, f"{label} PCIe link at {link.describe()}", **where))
            continue
        idle = is_idle(by_bus.get(link.bus_id))
        if idle and not params.judge_idle:
            findings.append(Finding(probe, OK, f"{label} PCIe link at {link.describe()} while idle "
                                    "(idle GPUs downshift by design; judged under load)", **where))
        elif idle is None and not params.judge_idle:
            findings.append(Finding(probe, FAILURE, f"{label} PCIe link at {link.describe()}, and whether the GPU "
                                    "is idle is not known", **where))
        else:
            load = by_bus.get(link.bus_id)
            util = f", utilization {load.utilization_percent:g} %" if load and load.utilization_percent else ""
            findings.append(Finding(probe, FAILURE, f"{label} PCIe link below max: {link.describe()} while "
                                    f"busy{util}", **where))
    return findings


class PcieLinkAtMax(HealthProbe[PcieParams]):
    """Each GPU's PCIe link runs at its maximum generation and width (sysfs
    `current_link_speed`/`max_link_speed` and widths). Below max is a failure only when
    the GPU is not idle: idle GPUs downshift by design."""

    name = "health_pcie"
    probe = "pcie_link"
    Params = PcieParams

    def reads(self, params: PcieParams) -> list[Fact]:
        return [PCI_FACT, LINK_FACT, gpu_readings(params.nvidia_smi_timeout)]

    def judge(self, params: PcieParams, facts: Facts) -> list[Finding]:
        links = gpu_links(facts[PCI_FACT], facts[LINK_FACT])
        readings = optional_readings(facts, params.nvidia_smi_timeout)
        if readings is not None:
            seen = {link.bus_id for link in links}
            extra = tuple(link for link in (link_from_smi(g) for g in readings.gpus)
                          if link is not None and link.bus_id not in seen)
            links = tuple(sorted(links + extra, key=lambda link: link.bus_id))
        if not links:
            require_readings(facts, self.probe, params.nvidia_smi_timeout)
            return [Finding(self.probe, FAILURE, "no PCIe link to judge: no NVIDIA GPU in sysfs or nvidia-smi")]
        if readings is None and any(link.below_max for link in links) and not params.judge_idle:
            partial = judge_links(tuple(link for link in links if not link.below_max), None, params, self.probe,
                                  [link.bus_id for link in links])
            require_readings(facts, self.probe, params.nvidia_smi_timeout, partial)
        return judge_links(links, readings, params, self.probe)
