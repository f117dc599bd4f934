"""InfiniBand: every port of every HCA reaches the wanted state (sysfs)."""
from __future__ import annotations

import time

from pydantic import Field

from gpuconf.facts.base import Fact, file_glob
from gpuconf.tasks.base import ApplyContext, Change, Facts, Params, TaskType, Verdict, drift, in_sync

PORT = "/sys/class/infiniband/*/ports/*/"


def parse_ports(files: dict[str, str]) -> dict[str, tuple[str, str, str]]:
    """`mlx5_0/1` -> (state, phys_state, rate), states without their number: `ACTIVE`."""
    ports = {}
    for path, state in files.items():
        if not path.endswith("/state") or path.endswith("/phys_state"):
            continue
        directory = path[: -len("state")]
        device, _, port = directory[len("/sys/class/infiniband/"):].rstrip("/").partition("/ports/")
        phys, rate = files.get(directory + "phys_state", ""), files.get(directory + "rate", "")
        ports[f"{device}/{port}"] = (state.split(":", 1)[-1].strip(), phys.split(":", 1)[-1].strip(), rate.strip())
    return ports


def ports_fact() -> Fact[dict[str, tuple[str, str, str]]]:
    return file_glob([PORT + "state", PORT + "phys_state", PORT + "rate"], parse_ports, key="ib:ports")


class IbPortsParams(Params):
    state: str = "ACTIVE"
    phys_state: str = "LinkUp"
    rate: str | None = None
    min_ports: int = Field(1, ge=0)
    wait: float = Field(60, ge=0)


class IbPorts(TaskType[IbPortsParams]):
    """Every InfiniBand port is ACTIVE and LinkUp (at `rate`, if given). In
    apply, ports still coming up (INIT while the subnet manager sweeps) are
    waited for, up to `wait` seconds."""

    name = "ib_ports"
    Params = IbPortsParams

    def reads(self, params: IbPortsParams) -> list[Fact]:
        return [ports_fact()]

    def _problems(self, params: IbPortsParams, ports: dict[str, tuple[str, str, str]]) -> list[str]:
        problems = []
        if len(ports) < params.min_ports:
            problems.append(f"{len(ports)} InfiniBand port(s) found, want at least {params.min_ports}")
        for name, (state, phys, rate) in sorted(ports.items()):
            if state != params.state or phys != params.phys_state:
                problems.append(f"{name} is {state}/{phys}, want {params.state}/{params.phys_state}")
            elif params.rate and not rate.startswith(params.rate):
                problems.append(f"{name} rate is {rate}, want {params.rate}")
        return problems

    def check(self, params: IbPortsParams, facts: Facts) -> Verdict:
        problems = self._problems(params, facts[ports_fact()])
        if not problems:
            return in_sync(f"all InfiniBand ports {params.state}")
        summary = "; ".join(problems[:4]) + (f"; +{len(problems) - 4} more" if len(problems) > 4 else "")
        return drift(Change(f"wait for ports: {summary}"))

    def apply(self, ctx: ApplyContext, params: IbPortsParams, changes: list[Change]) -> None:
        deadline = time.monotonic() + params.wait
        while self._problems(params, ctx.read(ports_fact())) and time.monotonic() < deadline:
            time.sleep(2)
