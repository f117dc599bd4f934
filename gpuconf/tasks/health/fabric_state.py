"""Each GPU's NVLink fabric registration: the `fabric.*` fields of `nvidia-smi --query-gpu`
(the Fabric section of `nvidia-smi -q`), in the host's one nvidia-smi query.

On an NVLink fabric (an NVSwitch board, or a GB200 tray in its rack) a GPU is usable for
NVLink only once its registration is `State: Completed` with `Status: Success`; until then CUDA
answers "system not yet initialized". A rack tray must also be in a domain: a non-zero clique
id and cluster UUID. Pass rule and failure signatures: reference section 5.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuconf.facts.base import Fact, FactUnavailable, Output
from gpuconf.facts.common import canonical_pci_address, incomplete
from gpuconf.facts.gather import PCI_FACT
from gpuconf.facts.nvidia import NvidiaSmiFailure, QueryCsv, parse_query_csv
from gpuconf.facts.nvidia.fabric import Fabric
from gpuconf.facts.nvidia_smi import DRIVER_UNRESPONSIVE, query_fields
from gpuconf.facts.nvlink_fabric import NONE, RACK, nvlink_fabric
from gpuconf.results import Finding
from gpuconf.tasks.base import Facts, Unknown, Verdict
from gpuconf.tasks.health.common import (
    FAILURE,
    OK,
    HealthProbe,
    NvidiaSmiParams,
    WhereRead,
    after_pending_reboot,
    gpu_name,
    read_or_unknown,
    verdict,
)

if TYPE_CHECKING:
    from gpuconf.facts.nvidia.query_model import GpuDetails, NvidiaSmiQuery

ZERO_UUID = "00000000-0000-0000-0000-000000000000"
# GPUs on NVSwitch boards before Hopper (HGX A100) print Fabric State N/A: nothing to judge there.
BEFORE_FABRIC_STATE = ("Volta", "Ampere")


# `-q`'s Fabric section as --query-gpu fields (R550+; an older driver refuses the newer ones,
# which then read as not reported). compute_cap stands for -q's Product Architecture.
FABRIC_FIELDS = {"fabric.state": "state", "fabric.status": "status", "fabric.cliqueId": "clique_id",
                 "fabric.clusterUuid": "cluster_uuid", "fabric.health.summary": "health_summary",
                 "fabric.health.bandwidth": "health_bandwidth"}
QUERY_FIELDS = ("index", "pci.bus_id", "compute_cap", *FABRIC_FIELDS)


def architecture(compute_cap: object) -> str | None:
    """The GPU architecture a compute capability belongs to (what `-q` prints as Product Architecture)."""
    major, _, minor = str(compute_cap or "").partition(".")
    if not major.isdigit() or not minor.isdigit():
        return None
    names = {7: "Volta" if minor == "0" else "Turing", 8: "Ada Lovelace" if minor == "9" else "Ampere", 9: "Hopper"}
    return names.get(int(major), "Blackwell" if int(major) >= 10 else None)


@dataclass(frozen=True)
class FabricGpu:
    """What the probe judges of one GPU: the fields it shares with `-q`'s GpuDetails."""

    bus_id: str
    pci_address: str | None
    architecture: str | None
    fabric: Fabric | None


@dataclass(frozen=True)
class FabricReport:
    """The GPUs' fabric registration, from --query-gpu; judged as `-q`'s NvidiaSmiQuery is
    (a model of its own: the probe does not load `-q`'s)."""

    gpus: tuple[FabricGpu, ...]
    failure: NvidiaSmiFailure | None = None


def query_report(csv: QueryCsv) -> FabricReport:
    """The GPUs' fabric registration, as `nvidia-smi -q` would report it."""
    def text(value: object) -> str | None:
        return None if value is None else str(value)

    gpus = []
    for row in csv.rows:
        bus_id = str(row.get("pci.bus_id") or "")
        fabric = Fabric(**{name: text(row.get(field)) for field, name in FABRIC_FIELDS.items()})
        gpus.append(FabricGpu(bus_id=bus_id, pci_address=canonical_pci_address(bus_id),
                              architecture=architecture(row.get("compute_cap")), fabric=fabric))
    return FabricReport(gpus=tuple(gpus), failure=csv.failure)


def fabric_query(timeout: float) -> Fact[FabricReport]:
    def parse(out: Output) -> FabricReport:
        if out.timed_out:
            raise FactUnavailable(f"{DRIVER_UNRESPONSIVE}: nvidia-smi did not answer within "
                                  f"{out.timeout or timeout:g} s (its process group was killed)")
        if out.rc == 127:
            raise FactUnavailable("nvidia-smi is not installed")
        return _report((out.stderr.rstrip("\n") + "\n" if out.stderr.strip() and out.rc else "") + out.stdout)

    return query_fields(QUERY_FIELDS, parse, timeout=timeout, key="nvsmi:fabric")


@functools.lru_cache(maxsize=64)  # the hosts of one model print the same rows: read once, shared read-only
def _report(text: str) -> FabricReport:
    csv = parse_query_csv(text)
    if incomplete(csv):
        raise FactUnavailable(f"nvidia-smi's answer is incomplete: {incomplete(csv)}")
    return query_report(csv)


def fabric_problem(fabric: Fabric | None, rack: bool) -> str | None:
    """Why this GPU's registration is not complete, or None when it is."""
    if fabric is None or fabric.state is None:
        return "no fabric state in nvidia-smi -q (a driver too old for this GPU's fabric?)"
    if fabric.state != "Completed":
        waiting = "the rack's NVLink fabric" if rack else "the fabric manager (running at the driver's version?)"
        return f"fabric state {fabric.state}, status {fabric.status or 'N/A'}: not registered by {waiting}"
    if fabric.status != "Success":
        return f"fabric state Completed with status {fabric.status or 'N/A'}, want Success"
    if fabric.health_summary == "Unhealthy":
        return f"fabric health Unhealthy (bandwidth {fabric.health_bandwidth or 'N/A'})"
    if rack and (fabric.clique_id in (None, "0") or fabric.cluster_uuid in (None, ZERO_UUID)):
        return f"in no NVLink domain (clique {fabric.clique_id}, cluster {fabric.cluster_uuid})"
    return None


def judge_fabric_state(report: FabricReport | NvidiaSmiQuery, kind: str, probe: str = "fabric_state") -> list[Finding]:
    rack = kind == RACK
    findings = []
    gpus: tuple[FabricGpu | GpuDetails, ...] = report.gpus
    for index, gpu in enumerate(gpus):
        label = gpu_name(index, gpu.pci_address or gpu.bus_id)
        where = WhereRead(gpu=index, bus_id=gpu.pci_address or gpu.bus_id,
                                     value=gpu.fabric.state if gpu.fabric else None)
        reported = gpu.fabric is not None and gpu.fabric.state is not None
        if not reported and (gpu.architecture or "") in BEFORE_FABRIC_STATE:
            findings.append(Finding(probe, OK, f"{label}: {gpu.architecture} reports no fabric state "
                                    "(Hopper and later do); the fabric manager service is the evidence", **where))
            continue
        problem = fabric_problem(gpu.fabric, rack)
        if problem:
            findings.append(Finding(probe, FAILURE, f"{label}: {problem}", **where))
        else:
            domain = f", clique {gpu.fabric.clique_id}, cluster {gpu.fabric.cluster_uuid}" \
                if rack and gpu.fabric else ""
            findings.append(Finding(probe, OK, f"{label}: fabric Completed, Success{domain}", **where))
    if not findings:
        findings.append(Finding(probe, FAILURE, "nvidia-smi -q reported no GPU"))
    return findings


class FabricStateCompleted(HealthProbe[NvidiaSmiParams]):
    """On an NVLink fabric (NVSwitch board or GB200 rack tray), every GPU's fabric
    registration (nvidia-smi's fabric.* fields, `-q`'s Fabric section) is Completed with Success, health not Unhealthy,
    and on a rack tray in a domain (clique id and cluster UUID not zero). Anything else fails,
    naming the GPU and the reason. Nodes without a fabric pass, saying so. With a reboot
    pending (a fresh driver) the judgement waits for it."""

    name = "health_fabric_state"
    probe = "fabric_state"
    Params = NvidiaSmiParams

    def reads(self, params: NvidiaSmiParams) -> list[Fact]:
        return [PCI_FACT, fabric_query(params.nvidia_smi_timeout)]

    def check(self, params: NvidiaSmiParams, facts: Facts) -> Verdict:
        pci = facts[PCI_FACT]
        kind = nvlink_fabric(pci["gpus"], pci["nvswitches"])
        if kind == NONE:
            return verdict([Finding(self.probe, OK, "no NVSwitch and no rack NVLink: no fabric to register with")])
        waiting = after_pending_reboot(facts, "fabric state")
        if waiting is not None:
            return waiting
        report = read_or_unknown(facts, fabric_query(params.nvidia_smi_timeout), self.probe, "fabric state")
        if report.failure is not None and not report.gpus:
            message = f"{report.failure.kind}: {report.failure.message}"
            raise Unknown(message, findings=[Finding(self.probe, FAILURE, f"fabric state cannot be read: {message}",
                                                     value=report.failure.kind)])
        return verdict(judge_fabric_state(report, kind, self.probe))
