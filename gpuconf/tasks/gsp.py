"""GSP firmware: `NVreg_EnableGpuFirmware=0` turns it off, on the proprietary modules only.

The open kernel modules need the GSP unconditionally and ignore the parameter, so disabling it
there would be a setting that silently does nothing; it is refused, with the remedy the Xid
catalog gives for the GSP errors (Xid 119, 120) that make operators reach for it.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuconf.facts.base import Fact, file_state
from gpuconf.facts.nvidia import parse_proc_driver_version
from gpuconf.tasks.base import Change, Facts, Params, Refused, TaskType, Verdict, drift, in_sync, remove, write_file
from gpuconf.tasks.nvidia import wanted_flavour

LINE = "options nvidia NVreg_EnableGpuFirmware=0\n"
XID_REMEDY = ("for Xid 119 (GSP RPC timeout) and Xid 120 (GSP error) NVIDIA's Xid catalog says: reset the GPU "
              "(nvidia-smi -r, or drain and reboot the node), and update the driver if they recur")
PROC_VERSION = file_state("/proc/driver/nvidia/version")


class GspParams(Params):
    disable: bool
    version: str = Field(pattern=r"^\d{3}\.\d+(\.\d+)?$")      # the driver the stack installs
    flavour: Literal["auto", "open", "proprietary"] = "auto"
    path: str = "/etc/modprobe.d/nvidia-gsp.conf"


class GspFirmware(TaskType[GspParams]):
    """With `disable`, `path` sets NVreg_EnableGpuFirmware=0 (effective at the next module load);
    without, no such override exists. Refused on the open kernel modules (the flavour the
    driver stack installs, or the one loaded now), which require the GSP."""

    name = "gsp_firmware"
    Params = GspParams
    host_facts = frozenset({"gpus"})   # the catalog's flavour for `auto`

    def reads(self, params: GspParams) -> list[Fact]:
        return [file_state(params.path), PROC_VERSION]

    def check(self, params: GspParams, facts: Facts) -> Verdict:
        current = facts[file_state(params.path)]
        if not params.disable:
            if current.exists:
                return drift(Change(f"remove the GSP override {params.path}", [remove(params.path)], reboot=True))
            return in_sync("no GSP override: the driver's default (GSP on)")
        loaded = facts[PROC_VERSION]
        loaded_flavour = getattr(parse_proc_driver_version(loaded.text or ""), "flavour", None) if loaded.exists \
            else None
        flavour = wanted_flavour(params.flavour, params.version, facts)
        if "open" in (flavour, loaded_flavour):
            which = "installed" if flavour == "open" else "loaded"
            raise Refused(f"the open kernel modules ({which}) require the GSP firmware and ignore "
                          f"NVreg_EnableGpuFirmware=0: refusing to disable it; {XID_REMEDY}")
        if current.exists and current.text == LINE:
            return in_sync(f"GSP firmware disabled by {params.path}")
        return drift(Change(f"disable the GSP firmware: {params.path}", [write_file(params.path, LINE, 0o644)],
                            reboot=True, before=current.text, after=LINE))
