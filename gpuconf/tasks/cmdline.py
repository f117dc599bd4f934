"""Kernel command-line arguments of every boot entry, through grubby (RHEL family)."""
from __future__ import annotations

import re

from pydantic import Field, field_validator

from gpuconf.facts.base import Fact, FactUnavailable, Output, command
from gpuconf.facts.kernel import BootEntry, parse_grubby_info
from gpuconf.tasks.base import Change, Facts, Params, TaskType, Unknown, Verdict, drift, in_sync, run

ARGUMENT = r"^[A-Za-z0-9_.\-]+(=[A-Za-z0-9_.,:/\-]+)?$"


def _entries(output: Output) -> tuple[BootEntry, ...]:
    if output.timed_out or output.rc != 0:
        tail = (output.stderr or output.stdout).strip()[-200:] or "timed out"
        raise FactUnavailable(f"grubby --info=ALL failed: {tail}")
    return parse_grubby_info(output.stdout)


BOOT_ENTRIES = command(["grubby", "--info=ALL"], _entries, timeout=30)


class CmdlineParams(Params):
    args: list[str] = Field(min_length=1)

    @field_validator("args")
    @classmethod
    def _plain(cls, value: list[str]) -> list[str]:
        for arg in value:
            if not re.match(ARGUMENT, arg):
                raise ValueError(f"'{arg}' is not a kernel argument like name or name=value")
        return value


class KernelCmdline(TaskType[CmdlineParams]):
    """Every boot entry's kernel command line carries each of `args` (`grubby --info=ALL`);
    otherwise `grubby --update-kernel=ALL --args=...` adds them. Effective at the next boot.
    Rescue entries are left alone, as grubby itself does."""

    name = "kernel_cmdline"
    Params = CmdlineParams

    def reads(self, params: CmdlineParams) -> list[Fact]:
        return [BOOT_ENTRIES]

    def check(self, params: CmdlineParams, facts: Facts) -> Verdict:
        entries = [e for e in facts[BOOT_ENTRIES] if "rescue" not in e.kernel]
        if not entries:
            raise Unknown("grubby lists no boot entry")
        lacking = {arg: [e.kernel for e in entries if arg not in e.args] for arg in params.args}
        lacking = {arg: kernels for arg, kernels in lacking.items() if kernels}
        if not lacking:
            return in_sync(f"{' '.join(params.args)} on {len(entries)} boot entries")
        missing = list(lacking)
        kernels = sorted({k for ks in lacking.values() for k in ks})
        return drift(Change(f"kernel command line lacks {' '.join(missing)} on {', '.join(kernels)}: grubby",
                            [run(["grubby", "--update-kernel=ALL", f"--args={' '.join(missing)}"], timeout=120)],
                            reboot=True, before=None, after=missing))
