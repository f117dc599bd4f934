"""The one event interface of a run, in the manner of Nornir's processors: whatever wants to hear
a run (the text reporter's live lines, -vvv, `check --slurm`'s step after the tasks) is a
`Processor` handed to the Runner, and the Runner tells every processor every event, in order.

A processor only listens: it never changes what a task does. The one event that hands something
back is `run_completed`: while the hosts' connections are still open (and their run locks held), a
processor may act on the run's result through them (engine/after.py) and return a section of the
report, or None. The reporters implement this shape without importing it (report/ sits below
engine/); `NoEvents` gives a processor that wants few events the rest as no-ops.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gpuconf.engine.after import OpenHosts
from gpuconf.results import RunResult, Section, TaskResult


class Processor(Protocol):
    """What a run tells the ones who listen to it, from the runner's threads (one per host): a
    processor that keeps state guards it itself."""

    def play_started(self, play: str, hosts: list[str]) -> None:
        """A play starts on these hosts (or is listed as not started, after a stop)."""

    def task_started(self, host: str, task: str) -> None:
        """A task (or "gathering facts", or a handler) starts on a host."""

    def task_completed(self, result: TaskResult) -> None:
        """A task's result, final and redacted, once it is in the host's results."""

    def host_completed(self, host: str) -> None:
        """The host's part of the current play ended (done, failed, unreachable or not started)."""

    def remote(self, host: str, text: str) -> None:
        """A connection opened, or a request sent to a host (-vvv: RunOptions.trace)."""

    def run_completed(self, run: RunResult, hosts: OpenHosts) -> Section | None:
        """Every play ended; the hosts' connections are still open. A section of the report, or None."""


class NoEvents:
    """A processor that hears nothing: subclass it and define the events you want."""

    def play_started(self, play: str, hosts: list[str]) -> None:
        return None

    def task_started(self, host: str, task: str) -> None:
        return None

    def task_completed(self, result: TaskResult) -> None:
        return None

    def host_completed(self, host: str) -> None:
        return None

    def remote(self, host: str, text: str) -> None:
        return None

    def run_completed(self, run: RunResult, hosts: OpenHosts) -> Section | None:
        return None


class Processors:
    """A run's processors as one: each event goes to each, in the order they were given."""

    def __init__(self, processors: Sequence[Processor] = ()):
        self.processors = tuple(processors)

    def play_started(self, play: str, hosts: list[str]) -> None:
        for processor in self.processors:
            processor.play_started(play, hosts)

    def task_started(self, host: str, task: str) -> None:
        for processor in self.processors:
            processor.task_started(host, task)

    def task_completed(self, result: TaskResult) -> None:
        for processor in self.processors:
            processor.task_completed(result)

    def host_completed(self, host: str) -> None:
        for processor in self.processors:
            processor.host_completed(host)

    def remote(self, host: str, text: str) -> None:
        for processor in self.processors:
            processor.remote(host, text)

    def run_completed(self, run: RunResult, hosts: OpenHosts) -> list[Section]:
        """The sections the processors handed back, in their order."""
        sections = (processor.run_completed(run, hosts) for processor in self.processors)
        return [section for section in sections if section is not None]
