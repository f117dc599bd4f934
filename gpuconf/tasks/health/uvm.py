"""nvidia_uvm, which every CUDA program needs, and its one safe remedy: a reload when
no process holds the GPU."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from gpuconf.engine.results import Finding
from gpuconf.facts.base import Fact, Output, file_state, shell
from gpuconf.tasks.base import Change, Check, CheckContext, Params, run
from gpuconf.tasks.health.common import FAILURE, OK, WARNING, HealthProbe, Severity, verdict
from gpuconf.tasks.health.hardware import loaded_modules, read_modules

# Processes with a /dev/nvidia* file open (procfs: cannot hang; needs root to see all).
HOLDERS = ('for p in /proc/[0-9]*; do ls -l "$p/fd" 2>/dev/null | grep -q " /dev/nvidia" && '
           'printf "%s %s\\n" "${p#/proc/}" "$(cat "$p/comm" 2>/dev/null)"; done; true')


@dataclass(frozen=True)
class GpuHolder:
    pid: int
    command: str


def parse_holders(out: Output) -> tuple[GpuHolder, ...]:
    holders = []
    for line in out.stdout.splitlines():
        pid, _, command = line.partition(" ")
        if pid.isdigit():
            holders.append(GpuHolder(int(pid), command.strip()))
    return tuple(holders)


def gpu_holders() -> Fact:
    return shell("health:gpu-holders", HOLDERS, parse_holders, timeout=10)


class UvmParams(Params):
    not_loaded: Severity = Field(WARNING, description="severity when nvidia_uvm is not loaded at all (CUDA loads "
                                 "it on first use through nvidia-modprobe, so this is often normal)")
    remedy: bool = Field(False, description="apply only: (re)load nvidia_uvm when it is not loaded and live, but "
                                            "only when no process holds a /dev/nvidia* device")


class UvmReady(HealthProbe):
    """The nvidia_uvm module (CUDA's unified memory driver) is loaded and live
    (`/proc/modules`): stuck loading or unloading is a failure, not loaded at all a
    warning (`not_loaded`; CUDA loads it on first use). Remedy (`remedy: true`, apply
    only): reload it, only when no process holds the GPU (no process has a /dev/nvidia*
    device open and the module's use count is 0); otherwise the finding names the
    processes and nothing is done."""

    name = "health_uvm"
    probe = "uvm"
    Params = UvmParams

    def facts(self, params: UvmParams):
        return [loaded_modules(), gpu_holders()]

    def check(self, ctx: CheckContext, params: UvmParams) -> Check:
        uvm = read_modules(ctx, self.probe).get("nvidia_uvm")
        if uvm is not None and uvm.state in (None, "Live"):
            return verdict([Finding(self.probe, OK, f"nvidia_uvm loaded (used by {uvm.refcount or 0})")])
        if uvm is None:
            finding = Finding(self.probe, params.not_loaded, "nvidia_uvm is not loaded (CUDA loads it on first use)")
        else:
            finding = Finding(self.probe, FAILURE, f"nvidia_uvm is stuck {uvm.state}: CUDA programs cannot start")
        if not params.remedy:
            return verdict([finding])
        holders = ctx.get(gpu_holders())
        if holders or (uvm is not None and uvm.refcount):
            shown = ", ".join(f"{h.pid} ({h.command})" for h in holders[:5]) or f"use count {uvm.refcount}"
            finding.message += f"; not reloaded: the GPU is held by {shown}"
            return verdict([finding])
        ops = ([run(["modprobe", "-r", "nvidia_uvm"])] if uvm is not None else []) + \
            [run(["modprobe", "nvidia_uvm"])]
        return verdict([finding], [Change("reload nvidia_uvm (no process holds the GPU)", ops)])
