"""Human output: a progress line, a summary by task across hosts, a PLAY RECAP, a summary paragraph.

This is the one human reporter (its closing paragraph is `aggregate.summary`). By
default it prints per-host, per-task lines only for the tasks that are not in sync,
and only on plays of 10 hosts or fewer; beyond that, the task summary says the same once per group of hosts
(`aggregate.py`), and the PLAY RECAP folds hosts with the same counts beyond 20
hosts. `-v` prints every line of every host. On a TTY the lines are coloured (rich), a
live progress display (`live.py`) sits at the bottom, and `--diff` is
coloured. Elsewhere (CI logs, cron, a pipe) the same lines are plain text:
no colour, no cursor movement, and control characters that a command printed
are shown escaped (`\\x1b`), so a log never carries a terminal sequence.
"""
from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, TextIO

from gpuconf.report.aggregate import (
    group_recap,
    group_tasks,
    host_state,
    reboot_note,
    recap_counts,
    says_something,
    summary,
    told_by_changes,
)
from gpuconf.report.console import (
    FOLD_INDENT,
    PLAIN_WIDTH,
    Part,
    PlainConsole,
    coloured,
    fold,
    is_terminal,
    printable,
    stop_writing,
)
from gpuconf.report.hostlist import compress
from gpuconf.report.redact import (
    visible_changes,
    visible_error,
    visible_findings,
    visible_message,
    visible_output,
)
from gpuconf.results import ChangeReport, RunResult, Section, Status, TaskResult

if TYPE_CHECKING:
    from rich.console import Console

    from gpuconf.report.live import LiveProgress

STYLE = {
    Status.OK: "green", Status.WOULD_CHANGE: "yellow", Status.CHANGED: "yellow", Status.FAILED: "bold red",
    Status.SKIPPED: "cyan", Status.UNKNOWN: "magenta", Status.UNREACHABLE: "bold red",
    Status.REBOOT_PENDING: "bold yellow",
}
LABEL = {Status.WOULD_CHANGE: "would change", Status.FAILED: "FAILED", Status.UNREACHABLE: "UNREACHABLE",
         Status.UNKNOWN: "UNKNOWN", Status.REBOOT_PENDING: "reboot pending"}
PER_HOST_MOST = 10  # plays this small print each host's lines that are not in sync
RECAP_FOLD_AFTER = 20  # beyond this many hosts, the PLAY RECAP gives one line per distinct set of counts
GROUPS_SHOWN = 15  # task groups in the summary; the rest are counted (the reports carry everything)
ITEMS_SHOWN = 3  # changes or findings listed under one group
PROGRESS_STEPS = 4  # without a TTY, a progress line at each quarter of the hosts
TAIL_LINES = 20  # -v shows this many last lines of a command's stdout and stderr
__all__ = ["TextReporter", "coloured", "printable", "stop_writing", "summary"]  # what callers import from here


class TextReporter:
    """The terminal's view of a run: a processor of the run (gpuconf/engine/processors.py, the
    shape only: report/ imports nothing of the engine), then the recap."""

    def __init__(self, stream: TextIO | None = None, verbose: int = 0, diff: bool = False, verb: str = "check",
                 live: bool | None = None, console: Console | None = None, slow_after: float | None = None):
        stream = stream or sys.stdout
        terminal = console.is_terminal if console else is_terminal(stream)
        use_live = terminal if live is None else live
        self.console: Console | PlainConsole = PlainConsole(stream)
        self.progress: LiveProgress | None = None
        if console or terminal or use_live:  # colour, or the live display: rich (imported only here)
            self.console = console = console or coloured(stream)
            if use_live:
                from gpuconf.report.live import LiveProgress
                self.progress = LiveProgress(console, verb, slow_after)
        self.verbose, self.diff = verbose, diff
        self.reader_gone = False
        self.lock = threading.Lock()
        self.verb = verb
        self.play_name, self.play_hosts = "", 0
        self.largest_play = 0
        self.done: set[str] = set()
        self.drifted: set[str] = set()
        self.failed: set[str] = set()

    def _print(self, *parts: Part, verbatim: bool = False) -> None:
        """One line, folded to the console's width (a log's: PLAIN_WIDTH) unless `verbatim` (a diff
        line, a command's output: a break would change what they say). Once the reader has gone
        (`gpuconf check ... | head`), the rest of the run's lines go nowhere and the run goes on:
        its exit code still tells drift from failure."""
        if self.reader_gone:
            return
        # a terminal's own width; anywhere else (a log, a pipe, rich on a StringIO) the same PLAIN_WIDTH
        lines = [list(parts)] if verbatim else fold(list(parts), self._width(), words=self._terminal())
        try:
            for line in lines:
                if isinstance(self.console, PlainConsole):
                    self.console.print(*line)
                else:
                    from rich.text import Text
                    self.console.print(Text.assemble(*line))
        except BrokenPipeError:
            self.reader_gone = True
            stop_writing(self.console.file)

    def _terminal(self) -> bool:
        return not isinstance(self.console, PlainConsole) and self.console.is_terminal

    def _width(self) -> int:
        """A terminal's own width; anywhere else (a log, a pipe, rich on a StringIO) PLAIN_WIDTH."""
        if not isinstance(self.console, PlainConsole) and self.console.is_terminal:
            return self.console.width
        return PLAIN_WIDTH

    # -- run events (from the runner's threads) -----------------------------
    def play_started(self, name: str, hosts: list[str] | None = None) -> None:
        with self.lock:
            self._print("\n", (printable(f"PLAY [{name}]"), "bold"))
            self.play_name, self.play_hosts = name, len(hosts or [])
            self.largest_play = max(self.largest_play, self.play_hosts)
            self.done = set()
        if self.progress:
            self.progress.play(name, hosts or [])

    def task_started(self, host: str, task: str) -> None:
        if self.progress:
            self.progress.task_started(host, task)

    def host_completed(self, host: str) -> None:
        if self.progress:
            self.progress.host_done(host)
            return
        with self.lock:
            if host in self.done:
                return
            self.done.add(host)
            total = self.play_hosts
            if total <= PER_HOST_MOST:
                return  # a small play shows its hosts' lines: no progress lines needed
            step = max(1, -(-total // PROGRESS_STEPS))
            if len(self.done) % step == 0 or len(self.done) == total:
                line = f"{self.verb} [{self.play_name}]: {len(self.done)}/{total} hosts done"
                if self.verb == "check":
                    line += f", {len(self.drifted)} drifted"
                self._print((line + f", {len(self.failed)} failed", "dim"))

    def remote(self, host: str, text: str) -> None:
        if self.verbose >= 3:
            with self.lock:
                self._print((printable(f"<{host}> {text}"), "dim"))

    def run_completed(self, run: RunResult, hosts: object) -> Section | None:
        return None  # the recap comes once the run's own steps are done too (recap())

    # -- task lines ---------------------------------------------------------
    def task_completed(self, result: TaskResult) -> None:
        if self.progress:
            self.progress.task_finished(result)
        with self.lock:
            if result.failed or result.status == Status.UNREACHABLE:
                self.failed.add(result.host)
            elif result.status == Status.WOULD_CHANGE:
                self.drifted.add(result.host)
        if not self.verbose and not self._per_host_line(result):
            return  # the recap and the task summary say it once for every host
        label = LABEL.get(result.status, result.status.value)
        style = STYLE[result.status]
        if result.ignored:  # ignore_errors: Ansible's "...ignoring"; not a failure of the run
            label, style = ("unreachable" if result.status == Status.UNREACHABLE else "failed") + ", ignored", "dim"
        name = f"{result.role} : {result.task}" if result.role else result.task
        changes = visible_changes(result)
        listed = len(changes) > 1 or (changes and self.verbose)
        # a message that only joins the change summaries is said by the lines below it
        detail = visible_error(result) or ("" if listed and told_by_changes(result) else visible_message(result))
        if result.handler:
            name = f"handler {name}"
        head: list[Part] = [(label, style), f": [{result.host}] {printable(name)}"]
        below = ""  # the detail, on a line of its own when the task's line would be too wide with it
        if detail and len(f"{label}: [{result.host}] {name} - {detail}") > self._width():
            below = detail
        elif detail:
            head += [" ", ("-", "dim"), f" {printable(detail)}"]
        with self.lock:
            self._print(*head)
            if below:
                self._print(f"{FOLD_INDENT}{printable(below)}")
            if listed:
                for change in changes:
                    self._print(f"    - {printable(change.summary)}")
                    if self.verbose:
                        for op in change.ops:
                            self._print((f"        {printable(op)}", "dim"))
            for finding in visible_findings(result):
                if finding.severity != "ok":
                    where = "" if finding.gpu is None else f" gpu {finding.gpu}"
                    style = "red" if finding.severity == "failure" else "yellow"
                    self._print("    ", (finding.severity, style),
                                printable(f": {finding.probe}{where}: {finding.message}"))
            if self.diff and not result.secret:
                for change in changes:
                    self._diff(change)
            if self.verbose:  # -v: what the command printed, its last lines (none for no_log)
                for label, text in zip(("stdout", "stderr"), visible_output(result)):
                    lines = text.rstrip("\n").splitlines()
                    if lines:
                        more = f" (last {TAIL_LINES} of {len(lines)} lines)" if len(lines) > TAIL_LINES else ""
                        self._print((f"    {label}{more}:", "dim"))
                        for line in lines[-TAIL_LINES:]:
                            self._print((f"      {printable(line)}", "dim"), verbatim=True)
            if self.verbose >= 3 and result.traceback and not result.secret:
                self._print((printable(result.traceback.rstrip()), "dim"), verbatim=True)

    def _per_host_line(self, result: TaskResult) -> bool:
        """Without -v: a small play prints what is not in sync or has a health warning, and what
        `debug` says (its output is its point, as in Ansible); a play beyond PER_HOST_MOST prints none."""
        if self.play_hosts > PER_HOST_MOST:
            return False
        return says_something(result) or (result.type == "debug" and result.status == Status.OK)

    def _diff(self, change: ChangeReport) -> None:
        if change.diff:
            for line in change.diff.splitlines():
                style = ("bold" if line.startswith(("---", "+++")) else "green" if line.startswith("+")
                         else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else "dim")
                self._print((f"    {printable(line)}", style), verbatim=True)
        elif change.before is not None or change.after is not None:
            self._print((f"    before: {printable(str(change.before))}", "red"))
            self._print((f"    after:  {printable(str(change.after))}", "green"))

    # -- the end ------------------------------------------------------------
    def recap(self, run: RunResult) -> None:
        if self.progress:
            self.progress.stop()
        with self.lock:
            if not self.verbose and self.largest_play > PER_HOST_MOST:
                self._task_summary(run)
            self._print("\n", ("PLAY RECAP", "bold"))
            if len(run.hosts) > RECAP_FOLD_AFTER:
                self._folded_recap(run)
            else:
                width = max((len(h) for h in run.hosts), default=4)
                for name, host in run.hosts.items():
                    reboot = reboot_note(host)
                    style = "bold yellow" if host.reboot_pending else "yellow"
                    note: list[Part] = ["  ", (reboot, style)] if reboot else []
                    self._print((printable(name.ljust(width)), host_state(host)), " : ",
                                *_cells(recap_counts(run, host)), *note)
            for section in run.sections:  # what the steps after the tasks did (the scheduler's drains, resumes)
                for line in section.recap():
                    self._print((line.label, line.style), printable(f": {line.text}"))
            self._print("\n" + printable(summary(run)))

    def _task_summary(self, run: RunResult) -> None:
        groups = group_tasks(run)
        self._print("\n", ("TASK SUMMARY", "bold"))
        if not groups:
            self._print((f"{len(run.hosts)} hosts: every task in sync", "green"))
        for group in groups[:GROUPS_SHOWN]:
            label = LABEL.get(group.status, group.status.value)
            count = f"{len(group.hosts)} host{'s' if len(group.hosts) > 1 else ''}"
            line: list[Part] = [(label, STYLE[group.status]),
                                printable(f": {group.task} ({count}: {_cut(group.host_list)})")]
            if group.detail:
                line += [" ", ("-", "dim"), f" {printable(group.detail)}"]
            self._print(*line)
            items = list(group.changes) if len(group.changes) > 1 else []
            items += list(group.findings)
            for item in items[:ITEMS_SHOWN]:
                self._print(f"    - {printable(item)}")
            if len(items) > ITEMS_SHOWN:
                self._print((f"    +{len(items) - ITEMS_SHOWN} more", "dim"))
            if self.diff and group.first is not None and not group.first.secret:
                changes = visible_changes(group.first)
                if any(change.diff or change.before is not None or change.after is not None for change in changes):
                    self._print((f"    diff on {printable(group.first.host)}:", "dim"))
                for change in changes:
                    self._diff(change)
        if len(groups) > GROUPS_SHOWN:
            self._print((f"+{len(groups) - GROUPS_SHOWN} more groups (-v, --report or --html show every host)",
                         "dim"))

    def _folded_recap(self, run: RunResult) -> None:
        for line in group_recap(run):
            note: list[Part] = ["  ", (line.reboot, "yellow")] if line.reboot else []
            hosts = f"{_cut(compress(line.hosts))} ({len(line.hosts)} hosts)"
            self._print((printable(hosts), line.state), " : ", *_cells(line.counts), *note)


def _cut(text: str, most: int = 200) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _cells(counts: list[tuple[str, int]]) -> list[Part]:
    style = {"ok": "green", "would_change": "yellow", "changed": "yellow", "unreachable": "bold red",
             "failed": "bold red", "skipped": "cyan", "unknown": "magenta", "rescued": "green", "ignored": "dim",
             "reboot_pending": "bold yellow"}
    parts: list[Part] = []
    for key, value in counts:
        if parts:
            parts.append("  ")
        parts.append((f"{key}={value}", style[key]) if value else f"{key}={value}")
    return parts
