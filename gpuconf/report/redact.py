"""What a secret task may show: its name and status, never its content."""
from __future__ import annotations

from gpuconf.engine.results import ChangeReport, TaskResult

HIDDEN = "(hidden: no_log)"


def visible_changes(result: TaskResult) -> list[ChangeReport]:
    if not result.secret:
        return result.changes
    return [ChangeReport(HIDDEN) for _ in result.changes]


def visible_error(result: TaskResult) -> str | None:
    if result.secret and result.error:
        return f"task failed {HIDDEN}"
    return result.error
