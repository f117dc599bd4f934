"""The CDI devices the container runtimes would resolve, read from `nvidia-ctk cdi list`.

A container asking for `nvidia.com/gpu=all` fails to start ("unresolvable CDI devices") when
no spec under /etc/cdi or /var/run/cdi defines it: the toolkit is missing, no spec was
generated, or the spec is unreadable. The probe only reads; the `cdi_spec` task repairs.
With a reboot pending (an image build holds the one that loads the driver), a device that does
not resolve yet is judged after it: the spec is generated at that boot.
"""
from __future__ import annotations

from pydantic import Field

from gpuconf.facts.base import Fact, FactUnavailable, Output, command
from gpuconf.facts.cdi import CdiListError, parse_cdi_list
from gpuconf.results import Finding
from gpuconf.tasks.base import Facts, Params, Verdict
from gpuconf.tasks.health.common import FAILURE, OK, HealthProbe, after_pending_reboot, read_or_unknown, verdict


class CdiDevicesParams(Params):
    device: str = Field("nvidia.com/gpu=all", pattern=r"^[A-Za-z0-9.-]+/[A-Za-z0-9_.-]+=[A-Za-z0-9_.:-]+$",
                        description="the qualified CDI device name that must resolve")
    timeout: float = Field(30, gt=0, description="seconds nvidia-ctk cdi list may take")


def cdi_list_fact(timeout: float) -> Fact[tuple[str, ...] | str]:
    def parse(out: Output) -> tuple[str, ...] | str:
        """The device names, or why there are none (the program is missing or failed)."""
        if out.timed_out:
            raise FactUnavailable(f"nvidia-ctk cdi list did not answer within {timeout:g} s")
        if out.rc == 127:
            return "nvidia-ctk is not installed (the NVIDIA container toolkit)"
        if out.rc != 0:
            text = (out.stderr or out.stdout).strip()
            return f"nvidia-ctk cdi list failed: {text.splitlines()[-1] if text else f'exit status {out.rc}'}"
        try:
            return parse_cdi_list(out.stdout + "\n" + out.stderr)   # the toolkit logs its INFO lines to stderr
        except CdiListError as exc:
            raise FactUnavailable(str(exc)) from None

    return command(["nvidia-ctk", "cdi", "list"], parse, timeout=timeout, key="cdi:list")


class CdiDevicesResolve(HealthProbe[CdiDevicesParams]):
    """`device` (default `nvidia.com/gpu=all`) is among the CDI devices `nvidia-ctk cdi list`
    finds in /etc/cdi and /var/run/cdi; a failure otherwise, naming what it found."""

    name = "health_cdi_devices"
    probe = "cdi_devices"
    Params = CdiDevicesParams

    def reads(self, params: CdiDevicesParams) -> list[Fact]:
        return [cdi_list_fact(params.timeout)]

    def check(self, params: CdiDevicesParams, facts: Facts) -> Verdict:
        findings = self.judge(params, facts)
        if any(f.severity != OK for f in findings):
            waiting = after_pending_reboot(facts, f"CDI device {params.device}")
            if waiting is not None:
                return waiting
        return verdict(findings)

    def judge(self, params: CdiDevicesParams, facts: Facts) -> list[Finding]:
        found = read_or_unknown(facts, cdi_list_fact(params.timeout), self.probe, "the CDI device list")
        if isinstance(found, str):
            return [Finding(self.probe, FAILURE, f"{params.device} does not resolve: {found}")]
        if params.device in found:
            return [Finding(self.probe, OK, f"{params.device} resolves ({len(found)} CDI devices)")]
        seen = ", ".join(found[:6]) + (f", +{len(found) - 6} more" if len(found) > 6 else "") if found else "none"
        return [Finding(self.probe, FAILURE, f"{params.device} does not resolve: nvidia-ctk cdi list found {seen}; "
                                             "generate the spec (the cdi_spec task: nvidia-ctk cdi generate)")]
