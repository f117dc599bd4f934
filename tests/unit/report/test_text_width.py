"""Issue 29, finding 11, without a lab: a task line that would repeat its changes, a line wider
than the terminal or a log, and the closing summary of a host with many changes.

The two-a100-node drift check these come from is tests/reports/test_output_lab.py.
"""
from __future__ import annotations

import io
import re

from rich.console import Console

from gpuconf.report.console import PLAIN_WIDTH
from gpuconf.report.text import TextReporter, summary
from gpuconf.results import ChangeReport, HostResult, RunResult, Status, TaskResult

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PACKAGES = [f"nvidia-package-number-{n}-580 580.178.04-1" for n in range(8)]


def drifted(host: str, task: str, role: str, *summaries: str) -> TaskResult:
    changes = [ChangeReport(s) for s in summaries]
    return TaskResult(host, "p", task, Status.WOULD_CHANGE, role=role, changes=changes,
                      message="; ".join(summaries))  # what drift() makes of a task that says nothing more


def printed(reporter_stream: io.StringIO, reporter: TextReporter, *results: TaskResult) -> list[str]:
    reporter.play_started("p", ["h1"])
    for result in results:
        reporter.task_completed(result)
    return [ANSI.sub("", line) for line in reporter_stream.getvalue().splitlines()]


def test_a_task_with_several_changes_lists_them_once_under_a_line_of_its_own():
    stream = io.StringIO()
    lines = printed(stream, TextReporter(stream, live=False),
                    drifted("h1", "toolkit held", "cuda", "install cuda-toolkit-13-0 13.0.2-1", "hold cuda-toolkit-13-0"),
                    drifted("h1", "blacklist", "nouveau", "create /etc/modprobe.d/blacklist-nouveau.conf"))
    assert lines[2:] == ["would change: [h1] cuda : toolkit held",
                         "    - install cuda-toolkit-13-0 13.0.2-1",
                         "    - hold cuda-toolkit-13-0",
                         "would change: [h1] nouveau : blacklist - create /etc/modprobe.d/blacklist-nouveau.conf"]


def test_a_message_of_its_own_is_kept_above_the_changes():
    stream = io.StringIO()
    result = drifted("h1", "fabric", "fabricmanager", "enable nvidia-fabricmanager", "start nvidia-fabricmanager")
    result.message = "the fabric manager is down"
    lines = printed(stream, TextReporter(stream, live=False), result)
    assert lines[2] == "would change: [h1] fabricmanager : fabric - the fabric manager is down"


def test_a_long_line_folds_at_the_terminal_width_and_at_the_log_width():
    long = drifted("h1", "driver stack", "nvidia_driver", "; ".join(f"install {p}" for p in PACKAGES))
    stream = io.StringIO()
    terminal = Console(file=stream, width=100, force_terminal=True, color_system="standard", soft_wrap=True,
                       highlight=False, markup=False, emoji=False)
    lines = printed(stream, TextReporter(stream, console=terminal, live=False), long)
    assert max(len(line) for line in lines) <= 100 and len(lines) > 3, lines
    assert " ".join(line.strip() for line in lines[2:]).endswith(f"install {PACKAGES[-1]}")  # folded, nothing cut
    stream = io.StringIO()
    lines = printed(stream, TextReporter(stream, live=False), long)
    assert 100 < max(len(line) for line in lines) <= PLAIN_WIDTH, lines
    assert all(line.startswith("      ") for line in lines[3:])  # a continuation is indented under its line


def test_the_summary_counts_a_drifted_host_s_changes_per_role():
    run = RunResult("check", "playbooks/a100-node.yml", "lab", 0.0, 1.0)
    many = [drifted("a100-01", f"step {n}", role, f"change {n}")
            for n, role in enumerate(["nouveau"] * 3 + ["nvidia_driver"] * 4 + ["cuda"] * 2)]
    run.hosts["a100-01"] = HostResult("a100-01", many)
    run.hosts["a100-02"] = HostResult("a100-02", [drifted("a100-02", "blacklist", "nouveau", "create blacklist")])
    run.hosts["a100-03"] = HostResult("a100-03", [TaskResult("a100-03", "p", "t", Status.OK)])
    assert summary(run) == ("1/3 in sync, 2 drifted (a100-01: 9 changes (nouveau 3, nvidia_driver 4, cuda 2); "
                            "a100-02: create blacklist)")


def test_the_summary_counts_a_loop_once_as_the_recap_does():
    run = RunResult("check", "playbooks/a100-node.yml", "lab", 0.0, 1.0)
    items = [drifted("a100-01", "packages", "cuda", f"install {n}") for n in range(3)]
    for item in items[:-1]:
        item.counts_as = ""   # the engine counts a loop once, on its last item
    items[-1].counts_as = "changed"
    host = HostResult("a100-01", [drifted("a100-01", "blacklist", "nouveau", "create blacklist"), *items])
    run.hosts["a100-01"] = host
    assert host.recap()["changed"] == 2
    assert summary(run) == "0/1 in sync, 1 drifted (a100-01: 2 changes (nouveau 1, cuda 1))"
