"""Human output: one line per task and host, a PLAY RECAP, a summary paragraph.

This is the one human reporter. On a TTY the lines are coloured (rich), a
live progress display (`live.py`) sits at the bottom, and `--diff` is
coloured. Elsewhere (CI logs, cron, a pipe) the same lines are plain text:
no colour, no cursor movement, and control characters that a command printed
are shown escaped (`\\x1b`), so a log never carries a terminal sequence.
"""
from __future__ import annotations

import io
import os
import re
import sys
import threading
from typing import IO, TextIO

from rich.console import Console
from rich.markup import escape

from gpuconf.report.live import SLOW_AFTER, LiveProgress
from gpuconf.report.redact import (
    visible_changes,
    visible_error,
    visible_findings,
    visible_message,
    visible_output,
)
from gpuconf.results import HostResult, RunEvents, RunResult, Status, TaskResult

STYLE = {
    Status.OK: "green", Status.WOULD_CHANGE: "yellow", Status.CHANGED: "yellow", Status.FAILED: "bold red",
    Status.SKIPPED: "cyan", Status.UNKNOWN: "magenta", Status.UNREACHABLE: "bold red",
    Status.REBOOT_PENDING: "bold yellow",
}
LABEL = {Status.WOULD_CHANGE: "would change", Status.FAILED: "FAILED", Status.UNREACHABLE: "UNREACHABLE",
         Status.UNKNOWN: "UNKNOWN", Status.REBOOT_PENDING: "reboot pending"}
TAIL_LINES = 20  # -v shows this many last lines of a command's stdout and stderr
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def stop_writing(stream: IO[str]) -> None:
    """Point a stream whose reader closed the pipe at /dev/null, so that no later write or the
    interpreter's final flush fails again (Python's own advice for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):  # not a file descriptor (a StringIO): nothing to redirect
        pass


def printable(text: str) -> str:
    """Text safe for a terminal or a log: control characters (but newline and tab) escaped."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _show(text: str) -> str:
    return escape(printable(text))


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich exits the program (status 1) when the reader closes the pipe; the run goes on instead."""
        self.quiet = True
        raise BrokenPipeError


class TextReporter(RunEvents):
    def __init__(self, stream: TextIO | None = None, verbose: int = 0, diff: bool = False, verb: str = "check",
                 live: bool | None = None, console: Console | None = None, slow_after: float = SLOW_AFTER):
        # emoji=False: a task name or command output with ":name:" in it is printed as written
        # (and each line costs a fifth less: rich looks for emoji codes in every line otherwise)
        self.console = console or _Console(file=stream or sys.stdout, highlight=False, soft_wrap=True, emoji=False)
        self.verbose, self.diff = verbose, diff
        self.reader_gone = False
        self.lock = threading.Lock()
        use_live = self.console.is_terminal if live is None else live
        self.progress = LiveProgress(self.console, verb, slow_after) if use_live else None

    def _print(self, text: str) -> None:
        """One line; once the reader has gone (`gpuconf check ... | head`), the rest of the run's
        lines go nowhere and the run goes on: its exit code still tells drift from failure."""
        if self.reader_gone:
            return
        try:
            self.console.print(text)
        except BrokenPipeError:
            self.reader_gone = True
            stop_writing(self.console.file)

    # -- run events (from the runner's threads) -----------------------------
    def play(self, name: str, hosts: list[str] | None = None) -> None:
        with self.lock:
            self._print(f"\n[bold]{_show(f'PLAY [{name}]')}[/bold]")
        if self.progress:
            self.progress.play(name, hosts or [])

    def task_started(self, host: str, task: str) -> None:
        if self.progress:
            self.progress.task_started(host, task)

    def host_done(self, host: str) -> None:
        if self.progress:
            self.progress.host_done(host)

    def remote(self, host: str, text: str) -> None:
        if self.verbose >= 3:
            with self.lock:
                self._print(f"[dim]{_show(f'<{host}> {text}')}[/dim]")

    # -- task lines ---------------------------------------------------------
    def task(self, result: TaskResult) -> None:
        if self.progress:
            self.progress.task_finished(result)
        if result.status == Status.SKIPPED and not self.verbose:
            return
        label = LABEL.get(result.status, result.status.value)
        style = STYLE[result.status]
        if result.ignored:  # ignore_errors: Ansible's "...ignoring"; not a failure of the run
            label, style = "failed, ignored", "dim"
        name = f"{result.role} : {result.task}" if result.role else result.task
        detail = visible_error(result) or visible_message(result)
        if result.handler:
            name = f"handler {name}"
        line = f"[{style}]{label}[/]: {_show(f'[{result.host}]')} {_show(name)}"
        if detail:
            line += f" [dim]-[/dim] {_show(detail)}"
        with self.lock:
            self._print(line)
            changes = visible_changes(result)
            if len(changes) > 1 or (changes and self.verbose):
                for change in changes:
                    self._print(f"    - {_show(change.summary)}")
                    if self.verbose:
                        for op in change.ops:
                            self._print(f"[dim]        {_show(op)}[/dim]")
            for finding in visible_findings(result):
                if finding.severity != "ok":
                    where = "" if finding.gpu is None else f" gpu {finding.gpu}"
                    style = "red" if finding.severity == "failure" else "yellow"
                    self._print(f"    [{style}]{finding.severity}[/]: "
                                       f"{_show(f'{finding.probe}{where}: {finding.message}')}")
            if self.diff and not result.secret:
                for change in changes:
                    self._diff(change)
            if self.verbose:  # -v: what the command printed, its last lines (none for no_log)
                for label, text in zip(("stdout", "stderr"), visible_output(result)):
                    lines = text.rstrip("\n").splitlines()
                    if lines:
                        more = f" (last {TAIL_LINES} of {len(lines)} lines)" if len(lines) > TAIL_LINES else ""
                        self._print(f"[dim]    {label}{more}:[/dim]")
                        for line in lines[-TAIL_LINES:]:
                            self._print(f"[dim]      {_show(line)}[/dim]")
            if self.verbose >= 3 and result.traceback and not result.secret:
                self._print(f"[dim]{_show(result.traceback.rstrip())}[/dim]")

    def _diff(self, change) -> None:
        if change.diff:
            for line in change.diff.splitlines():
                style = ("bold" if line.startswith(("---", "+++")) else "green" if line.startswith("+")
                         else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else "dim")
                self._print(f"[{style}]    {_show(line)}[/]")
        elif change.before is not None or change.after is not None:
            self._print(f"[red]    before: {_show(str(change.before))}[/]")
            self._print(f"[green]    after:  {_show(str(change.after))}[/]")

    # -- the end ------------------------------------------------------------
    def recap(self, run: RunResult) -> None:
        if self.progress:
            self.progress.stop()
        with self.lock:
            self._print("\n[bold]PLAY RECAP[/bold]")
            width = max((len(h) for h in run.hosts), default=4)
            for name, host in run.hosts.items():
                cells = "  ".join(f"[{style}]{key}={value}[/]" if value else f"{key}={value}"
                                  for key, value, style in _counts(run, host))
                reboot = ""
                if host.reboot_pending:
                    reboot = "  [bold yellow]reboot pending[/]"
                elif host.reboot_required:
                    reboot = "  [yellow]reboot required[/]"
                self._print(f"[{_host_style(host)}]{_show(name.ljust(width))}[/] : {cells}{reboot}")
            for action in run.slurm or []:
                self._print(_slurm_line(action))
            self._print("\n" + _show(summary(run)))


def _slurm_line(action) -> str:
    what = {"drain": f"drained: {action.reason}", "resume": f"resumed (was: {action.previous_reason})",
            "kept": f"left as it is: drained by someone else ({action.previous_reason})",
            "none": f"nothing to do ({action.previous_state})", "error": f"FAILED: {action.error}"}[action.action]
    style = "red" if action.action == "error" else "yellow" if action.action in ("drain", "kept") else "green"
    return f"[{style}]slurm[/]: {_show(f'[{action.node}] {what}')}"


def _counts(run: RunResult, host: HostResult) -> list[tuple[str, int, str]]:
    ignored = sum(1 for t in host.tasks if t.ignored)
    changed = ("would_change", Status.WOULD_CHANGE) if run.verb == "check" else ("changed", Status.CHANGED)
    counts = [("ok", host.count(Status.OK), "green"), (changed[0], host.count(changed[1]), "yellow"),
              ("unreachable", int(host.unreachable), "bold red"),
              ("failed", host.count(Status.FAILED) - ignored, "bold red"),
              ("skipped", host.count(Status.SKIPPED), "cyan"), ("unknown", host.count(Status.UNKNOWN), "magenta"),
              ("ignored", ignored, "dim")]
    if run.verb == "apply":
        counts.append(("reboot_pending", host.count(Status.REBOOT_PENDING), "bold yellow"))
    return counts


def _host_style(host: HostResult) -> str:
    if host.unreachable or host.failed:
        return "red"
    return "yellow" if host.changed or host.drifted or host.reboot_pending else "green"


def _short(text: str, most: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= most else line[: most - 1] + "…"


def _first_reason(host: HostResult) -> str:
    for wanted in (Status.FAILED, Status.UNKNOWN):  # the first failure names the host's problem, not a later unknown
        for task in host.tasks:
            if task.status == wanted and not task.ignored:
                return _short(f"{task.task}: {visible_error(task) or task.status.value}")
    for task in host.tasks:
        if task.status == Status.WOULD_CHANGE:
            changes = visible_changes(task)
            return _short(changes[0].summary if changes else task.task)
    for task in host.tasks:
        if task.status == Status.REBOOT_PENDING:
            return _short(visible_message(task) or task.task)
    return ""


def summary(run: RunResult) -> str:
    """One paragraph, e.g. `37/40 in sync, 2 drifted (node07: start nvidia-fabricmanager; node12: ...),
    1 unreachable (node33)`. Each host is counted once, under its worst state."""
    hosts = list(run.hosts.values())
    unreachable = [h for h in hosts if h.unreachable]
    failed = [h for h in hosts if not h.unreachable and any(t.status == Status.FAILED and not t.ignored
                                                            for t in h.tasks)]
    unknown = [h for h in hosts if not h.unreachable and h not in failed and h.failed]
    bad = unreachable + failed + unknown
    drifted = [h for h in hosts if h not in bad and h.drifted]
    pending = [h for h in hosts if h not in bad and h.reboot_pending]
    changed = [h for h in hosts if h not in bad and h.changed]
    good = len(hosts) - len(bad) - len(drifted) - len(pending)
    parts = [f"{good}/{len(hosts)} {'in sync' if run.verb == 'check' else 'converged'}"]
    if run.verb == "apply" and changed:
        parts[0] += f" ({len(changed)} changed)"

    def listed(group: list[HostResult], with_reason: bool = True, most: int = 5) -> str:
        items = [f"{h.host}: {_first_reason(h)}" if with_reason else h.host for h in group[:most]]
        more = f", +{len(group) - most} more" if len(group) > most else ""
        return "; ".join(items) + more

    for group, word in ((drifted, "drifted"), (pending, "reboot pending"), (failed, "failed"),
                        (unknown, "unknown")):
        if group:
            parts.append(f"{len(group)} {word} ({listed(group)})")
    if unreachable:
        parts.append(f"{len(unreachable)} unreachable ({listed(unreachable, False)})")
    text = ", ".join(parts)
    if run.deadline_reached:
        not_run = sum(1 for h in hosts for t in h.tasks if t.not_run)
        text += f"; deadline of {run.deadline:g} s reached ({not_run} tasks not run)"
    if run.budget_spent:
        left = sorted({h.host for h in hosts for t in h.tasks if t.not_run in ("max_fail_percentage", "batch_failed")})
        what = "max_fail_percentage exceeded" if "max_fail_percentage" in run.budget_spent else \
            "every host of a serial batch failed"
        text += f"; {what}: {len(left)} hosts not started"
    if run.interrupted:
        text += "; interrupted"
    return text
