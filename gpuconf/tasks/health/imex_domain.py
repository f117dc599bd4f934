"""The IMEX domain of a GB200/GB300 NVL72 tray, read from `nvidia-imex-ctl -N`.

Multi-node NVLink needs every node of the domain's IMEX daemon connected to every other:
each listed node `READY` and every cell of the connectivity matrix `C`. A peer that is not
is drift (a warning; a failure under `--strict`), named by its address, its node number in
nodes_config.cfg, its state and the letters the matrix shows for it. Format and letters:
`gpuconf.facts.imex`; source: ../shared/reference/nvidia-stack-2026.md section 5.
"""
from __future__ import annotations

import time

from pydantic import Field

from gpuconf.facts.base import Fact, FactUnavailable, Output, command
from gpuconf.facts.gather import PCI_FACT
from gpuconf.facts.imex import ImexDomain, parse_imex_ctl_nodes
from gpuconf.facts.nvlink_fabric import RACK, nvlink_fabric
from gpuconf.results import Finding
from gpuconf.tasks.base import ApplyContext, Change, Facts, Params, Unknown, Verdict, drift
from gpuconf.tasks.health.common import (
    FAILURE,
    OK,
    WARNING,
    HealthProbe,
    after_pending_reboot,
    read_or_unknown,
    verdict,
)


class ImexDomainParams(Params):
    timeout: float = Field(10, gt=0, description="seconds nvidia-imex-ctl -N may take (its process group is killed)")
    wait: float = Field(60, ge=0, description="in apply, seconds to wait for the peers to connect (they start "
                                              "their own daemons at about the same time)")


def imex_domain_fact(timeout: float) -> Fact[ImexDomain | str | None]:
    def parse(out: Output) -> ImexDomain | str | None:
        """The domain; the daemon's complaint when it does not answer; None: no nvidia-imex-ctl."""
        if out.timed_out:
            raise FactUnavailable(f"nvidia-imex-ctl -N did not answer within {timeout:g} s "
                                  "(its process group was killed)")
        if out.rc == 127:
            return None
        if out.rc != 0:   # the daemon is not running or does not answer: said on stderr
            text = (out.stderr or out.stdout).strip()
            return text.splitlines()[-1] if text else f"exit status {out.rc}"
        return parse_imex_ctl_nodes(out.stdout)

    return command(["nvidia-imex-ctl", "-N"], parse, timeout=timeout, key="imex:-N")


def peers_down(domain: ImexDomain) -> list[str]:
    """The nodes that are not READY, each with the letters the matrix shows for it; when every
    node is READY, the pairs whose connection is not C (which side failed is not known)."""
    def letters(index: int) -> list[str]:
        return sorted({state for (a, b), state in domain.connectivity.items()
                       if index in (a, b) and a != b and state != "C"})

    down = []
    for node in domain.nodes:
        if node.state != "READY":
            seen = f", connectivity {'/'.join(letters(node.index))}" if letters(node.index) else ""
            down.append(f"{node.address} (node #{node.index}, {node.state}{seen})")
    if down:
        return down
    address = {node.index: node.address for node in domain.nodes}
    return [f"{address.get(a, a)} -> {address.get(b, b)} (node #{a} to #{b}: {state})"
            for a, b, state in domain.unconnected() if a != b]


def judge_domain(domain: ImexDomain | str, probe: str) -> list[Finding]:
    if isinstance(domain, str):
        return [Finding(probe, WARNING, f"the local IMEX daemon does not answer nvidia-imex-ctl -N: {domain}")]
    if not domain.complete:
        raise Unknown("nvidia-imex-ctl -N output was cut short (no Domain State line or an incomplete matrix)",
                      findings=[Finding(probe, FAILURE, "IMEX domain state cannot be read: output cut short")])
    down = peers_down(domain)
    if down:
        return [Finding(probe, WARNING, f"IMEX peer not connected: {d}", value=domain.state) for d in down]
    return [Finding(probe, OK, f"IMEX domain {domain.state}: {len(domain.nodes)} nodes READY and connected "
                    f"({', '.join(n.address for n in domain.nodes)})", value=domain.state)]


class ImexDomainConnected(HealthProbe[ImexDomainParams]):
    """On a GB200/GB300 NVL72 tray (facts.nvlink_fabric `rack`), every node of the IMEX
    domain (`nvidia-imex-ctl -N`) is READY and connected to every other. A peer that is not
    is drift naming it (a warning, a failure under `--strict`); in apply the probe first
    waits up to `wait` seconds for the peers to connect. Other nodes pass, saying why."""

    name = "health_imex_domain"
    probe = "imex_domain"
    Params = ImexDomainParams

    def reads(self, params: ImexDomainParams) -> list[Fact]:
        return [PCI_FACT, imex_domain_fact(params.timeout)]

    def check(self, params: ImexDomainParams, facts: Facts) -> Verdict:
        pci = facts[PCI_FACT]
        if nvlink_fabric(pci["gpus"], pci["nvswitches"]) != RACK:
            return verdict([Finding(self.probe, OK, "not a rack NVLink tray: no IMEX domain to join")])
        waiting = after_pending_reboot(facts, "IMEX domain")
        if waiting is not None:
            return waiting
        domain = read_or_unknown(facts, imex_domain_fact(params.timeout), self.probe, "IMEX domain")
        if domain is None:   # check mode, before the imex role's package task has run
            return drift(Change("IMEX domain: judged once nvidia-imex is installed (no nvidia-imex-ctl yet)"))
        findings = judge_domain(domain, self.probe)
        problems = [f.message for f in findings if f.severity != OK]
        if problems:
            return verdict(findings, [Change("; ".join(problems))])
        return verdict(findings)

    def apply(self, ctx: ApplyContext, params: ImexDomainParams, changes: list[Change]) -> None:
        if any(change.reboot for change in changes):
            return
        deadline = time.monotonic() + params.wait
        while time.monotonic() < deadline:
            try:
                domain = ctx.read(imex_domain_fact(params.timeout))
            except FactUnavailable:
                return
            if isinstance(domain, ImexDomain) and domain.complete and not peers_down(domain):
                return
            time.sleep(2)
