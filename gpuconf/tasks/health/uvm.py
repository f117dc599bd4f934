"""nvidia_uvm, which every CUDA program needs, and its one safe remedy: a reload when
no process holds the GPU."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from gpuconf.facts import gather
from gpuconf.facts.base import Fact, file_glob
from gpuconf.results import Finding
from gpuconf.tasks.base import Change, Facts, Params, Verdict, run
from gpuconf.tasks.health.common import FAILURE, OK, WARNING, HealthProbe, Severity, verdict
from gpuconf.tasks.health.hardware import read_modules

# Processes with a /dev/nvidia* file open: their open files' link targets, and their names
# (procfs, read by the remote runner: cannot hang; needs root to see every process).
OPEN_FILES = file_glob(["/proc/[0-9]*/fd/*"], dict, what="link", key="health:open-files")
COMMANDS = file_glob(["/proc/[0-9]*/comm"], dict, key="health:commands")


@dataclass(frozen=True)
class GpuHolder:
    pid: int
    command: str


def gpu_holders(open_files: dict[str, str], commands: dict[str, str]) -> tuple[GpuHolder, ...]:
    """The processes with a /dev/nvidia* device open, by pid."""
    pids = sorted({int(path.split("/")[2]) for path, target in open_files.items()
                   if target.startswith("/dev/nvidia") and path.split("/")[2].isdigit()})
    return tuple(GpuHolder(pid, commands.get(f"/proc/{pid}/comm", "").strip()) for pid in pids)


class UvmParams(Params):
    not_loaded: Severity = Field(WARNING, description="severity when nvidia_uvm is not loaded at all (CUDA loads "
                                 "it on first use through nvidia-modprobe, so this is often normal)")
    remedy: bool = Field(False, description="apply only: (re)load nvidia_uvm when it is not loaded and live, but "
                                            "only when no process holds a /dev/nvidia* device")


class UvmReady(HealthProbe[UvmParams]):
    """The nvidia_uvm module (CUDA's unified memory driver) is loaded and live
    (`/proc/modules`): stuck loading or unloading is a failure, not loaded at all a
    warning (`not_loaded`; CUDA loads it on first use). Remedy (`remedy: true`, apply
    only): reload it, only when no process holds the GPU (no process has a /dev/nvidia*
    device open and the module's use count is 0); otherwise the finding names the
    processes and nothing is done."""

    name = "health_uvm"
    probe = "uvm"
    Params = UvmParams

    def reads(self, params: UvmParams) -> list[Fact]:
        # the processes are read only when a remedy may reload the module
        return list(gather.MODULE_FACTS) + ([OPEN_FILES, COMMANDS] if params.remedy else [])

    def check(self, params: UvmParams, facts: Facts) -> Verdict:
        uvm = read_modules(facts, self.probe).get("nvidia_uvm")
        if uvm is not None and uvm.state in (None, "Live"):
            return verdict([Finding(self.probe, OK, f"nvidia_uvm loaded (used by {uvm.refcount or 0})")])
        if uvm is None:
            finding = Finding(self.probe, params.not_loaded, "nvidia_uvm is not loaded (CUDA loads it on first use)")
        else:
            finding = Finding(self.probe, FAILURE, f"nvidia_uvm is stuck {uvm.state}: CUDA programs cannot start")
        if not params.remedy:
            return verdict([finding])
        holders = gpu_holders(facts[OPEN_FILES], facts[COMMANDS])
        if holders or (uvm is not None and uvm.refcount):
            shown = ", ".join(f"{h.pid} ({h.command})" for h in holders[:5]) or \
                f"use count {uvm.refcount if uvm is not None else '?'}"
            finding.message += f"; not reloaded: the GPU is held by {shown}"
            return verdict([finding])
        ops = ([run(["modprobe", "-r", "nvidia_uvm"])] if uvm is not None else []) + \
            [run(["modprobe", "nvidia_uvm"])]
        return verdict([finding], [Change("reload nvidia_uvm (no process holds the GPU)", ops, verify=False)])
