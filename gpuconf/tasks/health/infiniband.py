"""InfiniBand ports from sysfs (which cannot hang): ACTIVE, LinkUp, at the expected rate."""
from __future__ import annotations

from pydantic import Field

from gpuconf.facts.base import Fact, file_glob
from gpuconf.facts.infiniband import SysfsIbDevice, parse_sysfs_infiniband_files
from gpuconf.results import Finding
from gpuconf.tasks.base import Facts, Params
from gpuconf.tasks.health.common import FAILURE, OK, HealthProbe

IB = "/sys/class/infiniband"
FILES = [f"{IB}/*/{name}" for name in ("fw_ver", "board_id", "hca_type")] + \
    [f"{IB}/*/ports/*/{name}" for name in ("state", "phys_state", "rate", "link_layer")]
IB_SYSFS = file_glob(FILES, parse_sysfs_infiniband_files, key="health:ib-sysfs")


class InfinibandParams(Params):
    rate_gbps: float | None = Field(None, gt=0, description="the rate every port must run at, in Gb/s (200 for "
                                    "HDR, 400 for NDR); null: any rate")
    min_ports: int = Field(1, ge=0, description="ports the host must have at least")
    devices: list[str] | None = Field(None, description="judge only these HCAs (e.g. the compute fabric's "
                                      "mlx5_0..3); null: all")


def judge_ports(devices: tuple[SysfsIbDevice, ...], params: InfinibandParams, probe: str = "infiniband"
                ) -> list[Finding]:
    findings = []
    ports = [p for d in devices if params.devices is None or d.name in params.devices for p in d.ports]
    if len(ports) < params.min_ports:
        findings.append(Finding(probe, FAILURE, f"{len(ports)} InfiniBand port(s) in {IB}, expected at least "
                                f"{params.min_ports}", value=len(ports)))
    for port in ports:
        name = f"{port.device}/{port.port}"
        state = port.state.name if port.state else "unknown"
        phys = port.physical_state.name if port.physical_state else "unknown"
        rate = port.rate.gbps if port.rate else None
        problems = []
        if state.upper() != "ACTIVE" or phys != "LinkUp":
            problems.append(f"{state}/{phys}, want ACTIVE/LinkUp")
        if params.rate_gbps is not None and rate != params.rate_gbps:
            problems.append(f"rate {rate:g} Gb/s, want {params.rate_gbps:g}" if rate is not None
                            else f"rate unknown, want {params.rate_gbps:g} Gb/s")
        layer = f", {port.link_layer}" if port.link_layer else ""
        if problems:
            findings.append(Finding(probe, FAILURE, f"port {name}{layer}: " + "; ".join(problems), value=rate))
        else:
            shown = f" at {rate:g} Gb/s" if rate is not None else ""
            findings.append(Finding(probe, OK, f"port {name}{layer}: ACTIVE/LinkUp{shown}", value=rate))
    return findings


class InfinibandPortsActive(HealthProbe[InfinibandParams]):
    """Every InfiniBand port (`/sys/class/infiniband/*/ports/*/{state,phys_state,rate}`)
    is ACTIVE and LinkUp, at `rate_gbps` when given, and the host has at least
    `min_ports` ports. Each port that is not is a failure."""

    name = "health_infiniband"
    probe = "infiniband"
    Params = InfinibandParams

    def reads(self, params: InfinibandParams) -> list[Fact]:
        return [IB_SYSFS]

    def judge(self, params: InfinibandParams, facts: Facts) -> list[Finding]:
        return judge_ports(facts[IB_SYSFS], params, self.probe)
