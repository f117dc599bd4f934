"""What a secret task may show: its name and status, never its content.

Every reporter (text, JSON, JUnit, Prometheus) goes through these helpers, so
a `no_log` task looks the same, and hides the same, in every format.
"""
from __future__ import annotations

from gpuconf.results import ChangeReport, Finding, TaskResult

HIDDEN = "(hidden: no_log)"


def visible_changes(result: TaskResult) -> list[ChangeReport]:
    if not result.secret:
        return result.changes
    return [ChangeReport(HIDDEN) for _ in result.changes]


def visible_error(result: TaskResult) -> str | None:
    if result.secret and result.error:
        return f"task failed {HIDDEN}"
    return result.error


def visible_message(result: TaskResult) -> str:
    return HIDDEN if result.secret and result.message else result.message


def visible_output(result: TaskResult) -> tuple[str, str]:
    """The stdout and stderr tails a report may show."""
    if result.secret:
        return ("", "")
    return (result.stdout, result.stderr)


def visible_findings(result: TaskResult) -> list[Finding]:
    """Findings keep probe, severity and GPU (they drive alerts); a secret task's message and value go."""
    if not result.secret:
        return result.findings
    return [Finding(f.probe, f.severity, HIDDEN, f.gpu, f.bus_id, action=f.action, code=f.code, count=f.count,
                    rule=f.rule) for f in result.findings]
