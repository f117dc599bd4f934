"""InfiniBand: every port of every HCA reaches the wanted state (sysfs)."""
from __future__ import annotations

import time

from pydantic import Field

from gpuconf.facts.base import Output, shell
from gpuconf.tasks.base import Change, Check, CheckContext, Params, Refused, TaskType, in_sync, run
from gpuconf.tasks.pending import pending

PORTS = ('for p in /sys/class/infiniband/*/ports/*; do [ -e "$p/state" ] || continue; '
         'd=${p#/sys/class/infiniband/}; printf "%s\\t%s\\t%s\\t%s\\n" "${d%%/ports/*}/${p##*/}" '
         '"$(cat "$p/state")" "$(cat "$p/phys_state" 2>/dev/null)" "$(cat "$p/rate" 2>/dev/null)"; done; true')


def parse_ports(out: Output) -> dict[str, tuple[str, str, str]]:
    """`mlx5_0/1` -> (state, phys_state, rate), states without their number: `ACTIVE`."""
    ports = {}
    for line in out.stdout.splitlines():
        cells = line.split("\t")
        if len(cells) == 4:
            strip = [c.split(":", 1)[-1].strip() for c in cells[1:3]]
            ports[cells[0]] = (strip[0], strip[1], cells[3].strip())
    return ports


def ports_fact():
    return shell("ib:ports", PORTS, parse_ports, timeout=10)


class IbPortsParams(Params):
    state: str = "ACTIVE"
    phys_state: str = "LinkUp"
    rate: str | None = None
    min_ports: int = Field(1, ge=0)
    wait: float = Field(60, ge=0)


class IbPorts(TaskType):
    """Every InfiniBand port is ACTIVE and LinkUp (at `rate`, if given). In
    apply, ports still coming up (INIT while the subnet manager sweeps) are
    waited for, up to `wait` seconds."""

    name = "ib_ports"
    Params = IbPortsParams

    def facts(self, params: IbPortsParams):
        return [ports_fact()]

    def _problems(self, params: IbPortsParams, ports) -> list[str]:
        problems = []
        if len(ports) < params.min_ports:
            problems.append(f"{len(ports)} InfiniBand port(s) found, want at least {params.min_ports}")
        for name, (state, phys, rate) in sorted(ports.items()):
            if state != params.state or phys != params.phys_state:
                problems.append(f"{name} is {state}/{phys}, want {params.state}/{params.phys_state}")
            elif params.rate and not rate.startswith(params.rate):
                problems.append(f"{name} rate is {rate}, want {params.rate}")
        return problems

    def check(self, ctx: CheckContext, params: IbPortsParams) -> Check:
        problems = self._problems(params, ctx.get(ports_fact()))
        if not problems:
            return in_sync(f"all InfiniBand ports {params.state}")
        summary = "; ".join(problems[:4]) + (f"; +{len(problems) - 4} more" if len(problems) > 4 else "")
        if ctx.check_mode:
            return pending(ctx, summary)
        if ctx.after_apply:
            raise Refused(summary)
        return Check([Change(f"wait for ports: {summary}", [], verify=True)], summary)

    def apply(self, ctx, params: IbPortsParams, changes: list[Change]) -> None:
        deadline = time.monotonic() + params.wait
        while True:
            ports = ctx.get(ports_fact())
            if not self._problems(params, ports) or time.monotonic() >= deadline:
                return
            time.sleep(2)
            ctx.forget(ports_fact())
