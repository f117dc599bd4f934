"""Human output: one line per task and host, a PLAY RECAP, a summary paragraph.

On a TTY the lines are coloured (rich); elsewhere (CI logs, cron) they are
plain text with no control characters.
"""
from __future__ import annotations

import sys
import threading
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from gpuconf.engine.results import RunResult, Status, TaskResult
from gpuconf.report.redact import visible_changes, visible_error, visible_message

STYLE = {
    Status.OK: "green", Status.WOULD_CHANGE: "yellow", Status.CHANGED: "yellow", Status.FAILED: "bold red",
    Status.SKIPPED: "cyan", Status.UNKNOWN: "magenta", Status.UNREACHABLE: "bold red",
    Status.REBOOT_PENDING: "bold yellow",
}
LABEL = {Status.WOULD_CHANGE: "would change", Status.FAILED: "FAILED", Status.UNREACHABLE: "UNREACHABLE",
         Status.UNKNOWN: "UNKNOWN", Status.REBOOT_PENDING: "reboot pending"}


class TextReporter:
    def __init__(self, stream: TextIO | None = None, verbose: int = 0, diff: bool = False):
        stream = stream or sys.stdout
        self.console = Console(file=stream, highlight=False, soft_wrap=True)
        self.verbose, self.diff = verbose, diff
        self.lock = threading.Lock()
        self.current_play: str | None = None

    def play(self, name: str) -> None:
        with self.lock:
            self.console.print(f"\n[bold]{escape(f'PLAY [{name}]')}[/bold]")

    def task(self, result: TaskResult) -> None:
        if result.status == Status.SKIPPED and not self.verbose:
            return
        label = LABEL.get(result.status, result.status.value)
        name = f"{result.role} : {result.task}" if result.role else result.task
        detail = visible_error(result) or visible_message(result)
        if result.handler:
            name = f"handler {name}"
        line = f"[{STYLE[result.status]}]{label}[/]: {escape(f'[{result.host}]')} {escape(name)}"
        if detail:
            line += f" [dim]-[/dim] {escape(detail)}"
        with self.lock:
            self.console.print(line)
            changes = visible_changes(result)
            if len(changes) > 1 or (changes and self.verbose):
                for change in changes:
                    self.console.print(f"    - {escape(change.summary)}")
                    if self.verbose:
                        for op in change.ops:
                            self.console.print(f"[dim]        {escape(op)}[/dim]")
            if self.diff and not result.secret:
                for change in changes:
                    self._diff(change)

    def _diff(self, change) -> None:
        if change.diff:
            for line in change.diff.splitlines():
                style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
                self.console.print(f"[{style}]    {escape(line)}[/]")
        elif change.before is not None or change.after is not None:
            self.console.print(f"[red]    before: {escape(str(change.before))}[/]")
            self.console.print(f"[green]    after:  {escape(str(change.after))}[/]")

    def recap(self, run: RunResult) -> None:
        with self.lock:
            self.console.print("\n[bold]PLAY RECAP[/bold]")
            width = max((len(h) for h in run.hosts), default=4)
            changed = "would_change" if run.verb == "check" else "changed"
            changed_status = Status.WOULD_CHANGE if run.verb == "check" else Status.CHANGED
            for name, host in run.hosts.items():
                ignored = sum(1 for t in host.tasks if t.ignored)
                counts = [("ok", host.count(Status.OK)), (changed, host.count(changed_status)),
                          ("unreachable", int(host.unreachable)), ("failed", host.count(Status.FAILED) - ignored),
                          ("skipped", host.count(Status.SKIPPED)), ("unknown", host.count(Status.UNKNOWN)),
                          ("ignored", ignored)]
                colour = "red" if host.unreachable or host.failed else "yellow" if host.changed or \
                    host.drifted else "green"
                cells = "  ".join(f"{k}={v}" for k, v in counts)
                reboot = "  [yellow]reboot required[/]" if host.reboot_required else ""
                self.console.print(f"[{colour}]{escape(name.ljust(width))}[/] : {cells}{reboot}")
            self.console.print("\n" + escape(summary(run)))


def _first_reason(host) -> str:
    for task in host.tasks:
        if task.status in (Status.FAILED, Status.UNKNOWN) and not task.ignored:
            return f"{task.task}: {visible_error(task) or 'failed'}"
    for task in host.tasks:
        if task.status == Status.WOULD_CHANGE:
            changes = visible_changes(task)
            return changes[0].summary if changes else task.task
    return ""


def summary(run: RunResult) -> str:
    """One paragraph, e.g. `3/4 in sync, 1 drifted (node2: start nvidia-fabricmanager)`."""
    total = len(run.hosts)
    unreachable = [h for h in run.hosts.values() if h.unreachable]
    failed = [h for h in run.hosts.values() if h.failed and not h.unreachable]
    drifted = [h for h in run.hosts.values() if h.drifted and not h.failed and not h.unreachable]
    changed = [h for h in run.hosts.values() if h.changed and not h.failed and not h.unreachable]
    good = total - len(unreachable) - len(failed) - len(drifted)
    parts = [f"{good}/{total} {'in sync' if run.verb == 'check' else 'converged'}"]
    if run.verb == "apply" and changed:
        parts[0] += f" ({len(changed)} changed)"

    def listed(hosts, with_reason=True, most=5) -> str:
        items = [f"{h.host}: {_first_reason(h)}" if with_reason else h.host for h in hosts[:most]]
        more = f", +{len(hosts) - most} more" if len(hosts) > most else ""
        return "; ".join(items) + more

    if drifted:
        parts.append(f"{len(drifted)} drifted ({listed(drifted)})")
    if failed:
        parts.append(f"{len(failed)} failed ({listed(failed)})")
    if unreachable:
        parts.append(f"{len(unreachable)} unreachable ({listed(unreachable, False)})")
    text = ", ".join(parts)
    if run.interrupted:
        text += "; interrupted"
    return text
