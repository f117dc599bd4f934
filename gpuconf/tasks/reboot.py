"""Reboot a host and wait for it to come back with a new boot id."""
from __future__ import annotations

from pydantic import Field

from gpuconf.tasks.base import ApplyContext, Change, Facts, Params, TaskType, Verdict, drift, in_sync


class RebootParams(Params):
    required_only: bool = False
    timeout: float = Field(600, gt=0)
    command: str = "systemctl reboot || reboot"
    msg: str = "rebooting to apply changes"


class Reboot(TaskType[RebootParams]):
    """Reboot, then wait until the host answers SSH with a new boot id, up to
    `timeout` seconds. With `required_only`, reboot only when an earlier task
    marked the host *reboot required* (a new kernel module, an initramfs)."""

    name = "reboot"
    reboots = True
    Params = RebootParams

    def check(self, params: RebootParams, facts: Facts) -> Verdict:
        if params.required_only and not facts.reboot_pending:
            return in_sync("no reboot required")
        why = ", ".join(facts.reboot_pending) or "requested"
        return drift(Change(f"reboot ({why})", verify=False))

    def apply(self, ctx: ApplyContext, params: RebootParams, changes: list[Change]) -> dict[str, object]:
        seconds = ctx.reboot(params.command, params.timeout)
        return {"elapsed": seconds}
