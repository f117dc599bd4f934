"""The HTML fleet report: one self-contained file, a hosts × roles matrix coloured by status.

The machines that read it often have no network, so the file carries its CSS,
its script and its data inline: no CDN, no font, no image fetched. The data is
one JSON document inside a `<script type="application/json">`; the script builds
the table from it in one pass (fast at 1,000 hosts), filters rows by host name
or status, and shows a clicked cell's changes, diffs (a package's as `name: old → new`) and findings,
failures that were ignored or rescued among them. The address
can select a cell (`#host=a100-003&role=cuda`) and a filter (`&filter=failed`),
so a link in a ticket opens the right cell. A `no_log` task shows its name and
status only, as in every other report.
"""
from __future__ import annotations

import json
from pathlib import Path

from gpuconf.files.bounded import write_atomic
from gpuconf.report.aggregate import told_by_changes
from gpuconf.report.redact import visible_changes, visible_error, visible_findings, visible_message
from gpuconf.results import HostResult, RunResult, Status, TaskResult

# the cell's status: the worst of its tasks, in this order (index = the code in the JSON data)
STATES = ["in sync", "drift", "changed", "reboot pending", "unknown", "failed", "unreachable", "not run"]
PLAY_ROLE = "(play)"  # a play's own tasks, outside any role
NOT_RUN = STATES.index("not run")
TASK_STATE = {Status.OK: 0, Status.WOULD_CHANGE: 1, Status.CHANGED: 2, Status.REBOOT_PENDING: 3,
              Status.UNKNOWN: 4, Status.FAILED: 5, Status.UNREACHABLE: 6}
WORST = [0, 2, 1, 3, 4, 5, 6]  # rank of each state code: a failure outranks drift, and so on
TEMPLATE = Path(__file__).with_name("html_template.html")


def _role(task: TaskResult) -> str:
    return task.role or PLAY_ROLE


def _task_state(task: TaskResult) -> int | None:
    if task.status == Status.SKIPPED:
        return None
    if task.ignored:
        return 0  # ignore_errors: the run went on, and so does the matrix
    return TASK_STATE[task.status]


def _shown(value: object) -> str:
    return "(none)" if value is None else str(value)


def before_after(before: object, after: object) -> list[str]:
    """A change's values as `name: old → new` lines (a package's versions, keyed by name), or one
    `old → new` line for a single value: never the Python repr of a dict."""
    if isinstance(before, dict) or isinstance(after, dict):
        old = before if isinstance(before, dict) else {}
        new = after if isinstance(after, dict) else {}
        names = list(new) + [name for name in old if name not in new]
        return [f"{name}: {_shown(old.get(name))} → {_shown(new.get(name))}" for name in names]
    return [f"{_shown(before)} → {_shown(after)}"]


def _detail(task: TaskResult) -> dict[str, object]:
    changes = [{"summary": c.summary, **({"diff": c.diff} if c.diff and not task.secret else {}),
                **({"values": before_after(c.before, c.after)}
                   if not c.diff and not task.secret and (c.before is not None or c.after is not None) else {})}
               for c in visible_changes(task)]
    findings = [{"probe": f.probe, "severity": f.severity, "message": f.message,
                 **({"gpu": f.gpu} if f.gpu is not None else {})} for f in visible_findings(task)]
    # ignore_errors and a block's rescue both leave the result failed and `ignored`: the run went on
    status = "failed, ignored or rescued" if task.ignored else task.status.value
    out: dict[str, object] = {"task": task.task, "status": status}
    # a message that only joins the change summaries would say each change twice
    text = visible_error(task) or ("" if told_by_changes(task) else visible_message(task))
    for key, value in (("text", text), ("changes", changes), ("findings", findings)):
        if value:
            out[key] = value
    return out


def to_data(run: RunResult) -> dict[str, object]:
    """The report's data: roles, one row of state codes per host, and the tasks of each cell that
    say something (not in sync, or with a finding); in-sync tasks are only counted."""
    roles: list[str] = []
    for host in run.hosts.values():
        for task in host.tasks:
            if task.task != "connect" and _role(task) not in roles:
                roles.append(_role(task))
    rows: list[list[object]] = []
    cells: dict[str, list[dict[str, object]]] = {}
    for name, host in run.hosts.items():
        states, in_sync = _row(host, roles)
        rows.append([name, states, in_sync])
        for task in host.tasks:
            state = _task_state(task)
            if task.task == "connect" and task.status == Status.UNREACHABLE:
                cells.setdefault(f"{name}\t*", []).append(_detail(task))
            elif state or task.findings or task.ignored:  # an ignored or rescued failure is still shown
                cells.setdefault(f"{name}\t{_role(task)}", []).append(_detail(task))
    return {"verb": run.verb, "playbook": run.playbook, "started": run.started, "ended": run.ended,
            "states": STATES, "roles": roles, "hosts": rows, "cells": cells}


def _row(host: HostResult, roles: list[str]) -> tuple[list[int], list[int]]:
    states, in_sync = [NOT_RUN] * len(roles), [0] * len(roles)
    for task in host.tasks:
        state = _task_state(task)
        if state is None or task.task == "connect":
            continue
        column = roles.index(_role(task))
        in_sync[column] += state == 0 and not task.ignored
        if states[column] == NOT_RUN or WORST[state] > WORST[states[column]]:
            states[column] = state
    if host.unreachable:
        states = [6 if state == NOT_RUN else state for state in states]
    return states, in_sync


def render(run: RunResult) -> str:
    # "<" escaped: no task text can close the script element that holds the data
    data = json.dumps(to_data(run), separators=(",", ":")).replace("<", "\\u003c")
    title = f"gpuconf {run.verb}: {run.playbook}".replace("&", "&amp;").replace("<", "&lt;")
    before, after = TEMPLATE.read_text().split("{{DATA}}")
    return before.replace("{{TITLE}}", title) + data + after


def write(run: RunResult, path: str | Path) -> None:
    write_atomic(path, render(run))
