"""The firmware step of a remediation: a firmware update that the node's BMC failed (its Task
ended in an exception, it stopped answering, the new version did not verify) is the hardware's
to look at, not the playbook's to retry. The `firmware` task says so in what it registers
(`hold`: the components and what the BMC said, once something was sent to it); the ladder then
holds the node instead of verifying it (gpuconf/remediate/ladder.py), drained with
`gpuconf: hardware: firmware: <components>: <what the BMC said>`.
"""
from __future__ import annotations

from gpuconf.remediate.decision import HOLD, Decision
from gpuconf.results import Status, TaskResult

FIRMWARE = "firmware"


def firmware_hold(task: TaskResult) -> Decision | None:
    """The hold a failed task asks for, or None (any other failure: the remediation fails)."""
    why = task.data.get("hold")
    if task.status != Status.FAILED or task.ignored or not isinstance(why, str) or not why.strip():
        return None
    return Decision("contact_support", HOLD, " ".join(why.split()), f"task '{task.task}': the BMC's firmware update",
                    FIRMWARE)
