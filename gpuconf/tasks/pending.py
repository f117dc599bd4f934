"""A prerequisite that an earlier task of the play provides.

In check mode nothing is installed yet, so a task whose prerequisite is missing
reports what apply would do (drift, exit 2) instead of failing. In apply the
earlier task has run, so the same situation is a real failure.
"""
from __future__ import annotations

from gpuconf.tasks.base import Change, Check, CheckContext, Op, Refused, drift


def pending(ctx: CheckContext, summary: str, ops: list[Op] | None = None, reboot: bool = False) -> Check:
    if not ctx.check_mode:
        raise Refused(summary)
    return drift(Change(summary, ops or [], verify=False, reboot=reboot))
