"""The live progress line on a TTY: hosts done out of the total, failures so far,
and what the slow hosts are doing right now.

On a fleet the task lines scroll by too fast to tell whether the run is stuck;
this display stays at the bottom of the terminal (rich's Live, transient, so
the final screen holds only the task lines and the recap). It is never used
when the output is not a terminal.
"""
from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from gpuconf.results import Status, TaskResult

SLOW_AFTER = 5.0  # seconds on one task before a host is listed as slow
SLOW_SHOWN = 5


class LiveProgress:
    def __init__(self, console: Console, verb: str, slow_after: float | None = None):
        self.console, self.verb = console, verb
        self.slow_after = SLOW_AFTER if slow_after is None else slow_after
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.play_name = ""
        self.hosts: list[str] = []
        self.done: set[str] = set()
        self.failed: set[str] = set()
        self.unreachable: set[str] = set()
        self.drifted: set[str] = set()
        self.current: dict[str, tuple[str, float]] = {}  # host -> (task, since)
        self.live = Live(get_renderable=self.render, console=console, refresh_per_second=4, transient=True,
                         redirect_stdout=False, redirect_stderr=False)
        self.running = False

    def play(self, name: str, hosts: list[str]) -> None:
        with self.lock:
            self.play_name, self.hosts = name, list(hosts)
            self.done = set()
            self.current = {}
        if not self.running:
            self.live.start()
            self.running = True

    def task_started(self, host: str, task: str) -> None:
        with self.lock:
            self.current[host] = (task, time.monotonic())

    def task_finished(self, result: TaskResult) -> None:
        with self.lock:
            if result.status == Status.UNREACHABLE:
                self.unreachable.add(result.host)
            elif result.failed:
                self.failed.add(result.host)
            elif result.status == Status.WOULD_CHANGE:
                self.drifted.add(result.host)
            self.current.pop(result.host, None)

    def host_done(self, host: str) -> None:
        with self.lock:
            self.done.add(host)
            self.current.pop(host, None)

    def stop(self) -> None:
        if self.running:
            self.live.stop()
            self.running = False

    def render(self) -> Text:
        with self.lock:
            now = time.monotonic()
            text = Text()
            text.append(f"{self.verb} ", style="bold")
            text.append(f"[{self.play_name}] ", style="dim")
            text.append(f"{len(self.done)}/{len(self.hosts)} hosts done", style="bold")
            if self.verb == "check" and self.drifted:
                text.append(f"  {len(self.drifted)} drifted", style="yellow")
            text.append(f"  {len(self.failed)} failed", style="red" if self.failed else "green")
            if self.unreachable:
                text.append(f"  {len(self.unreachable)} unreachable", style="red")
            text.append(f"  {now - self.started:.0f}s", style="dim")
            slow = sorted(((now - since, host, task) for host, (task, since) in self.current.items()
                           if now - since >= self.slow_after), reverse=True)
            for seconds, host, task in slow[:SLOW_SHOWN]:
                text.append(f"\n  {host}: {task} ({seconds:.0f}s)", style="cyan")
            if len(slow) > SLOW_SHOWN:
                text.append(f"\n  +{len(slow) - SLOW_SHOWN} more slow hosts", style="dim")
            return text
