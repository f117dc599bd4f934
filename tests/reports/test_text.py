"""The human reporter: plain lines without a TTY, colour and live progress on one, the summary.

The TTY case runs the real CLI under a pseudo-terminal; the plain case under a pipe, the way
CI and cron run it.
"""
from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from rich.console import Console

from gpuconf.report.text import TextReporter, summary
from gpuconf.results import ChangeReport, HostResult, RunResult, Status, TaskResult

GPUCONF = str(Path(sys.executable).with_name("gpuconf"))
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # everything but \t and \n


def noisy_playbook(tmp: Path) -> Path:
    (tmp / "conf").write_text("old line\n")
    path = tmp / "noisy.yml"
    path.write_text(textwrap.dedent(f"""\
        - name: noisy play
          hosts: all
          tasks:
            - name: change a file
              file: {{path: "{tmp}/conf", content: "new line\\n"}}
            - name: a probe that prints escapes
              probe: {{command: "printf 'red \\\\033[31mtext\\\\033[0m\\\\r\\\\a\\\\n' >&2; exit 1",
                      pending_in_check: false}}
        """))
    return path


def plain_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    env["TERM"] = "xterm-256color"  # a colour terminal type, but stdout is a pipe: still plain
    return env


def test_without_a_tty_the_output_is_plain_lines_with_no_control_characters(tmp_path):
    proc = subprocess.run([GPUCONF, "check", str(noisy_playbook(tmp_path)), "-i", "h1,h2,", "-c", "local",
                           "--diff", "-v"], capture_output=True, text=True, env=plain_env(), timeout=60)
    assert proc.returncode == 2 | 4
    out = proc.stdout
    assert not CONTROL.search(out), repr(CONTROL.search(out))
    assert "-old line" in out and "+new line" in out
    assert "red \\x1b[31mtext\\x1b[0m\\x0d\\x07" in out  # the command's escapes, shown escaped
    assert re.search(r"^h1 +: ok=0  would_change=1  unreachable=0  failed=1", out, re.M)
    *_, summary, retry = out.rstrip().splitlines()
    assert summary.startswith("0/2 in sync, 2 failed (h1: a probe that prints escapes:")
    assert retry == f"retry with: --limit @{tmp_path / 'noisy.retry'}"


def run_on_a_tty(argv: list[str], timeout: float = 60) -> tuple[int, str]:
    primary, secondary = pty.openpty()
    env = dict(plain_env(), COLUMNS="120", LINES="40")
    proc = subprocess.Popen(argv, stdin=secondary, stdout=secondary, stderr=secondary, env=env)
    os.close(secondary)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.2)
        if ready:
            try:
                data = os.read(primary, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(primary)
    return proc.wait(timeout=10), b"".join(chunks).decode("utf-8", "replace")


def test_on_a_tty_lines_diff_and_recap_are_coloured_and_progress_is_shown(tmp_path):
    code, out = run_on_a_tty([GPUCONF, "check", str(noisy_playbook(tmp_path)), "-i", "h1,h2,", "-c", "local",
                              "--diff"])
    assert code == 6
    assert "\x1b[32m    +new line" in out and "\x1b[31m    -old line" in out  # green and red diff
    assert re.search(r"\x1b\[33mwould_change=1\x1b\[0m", out)  # recap counts in colour
    assert re.search(r"\x1b\[1;31mfailed=1\x1b\[0m", out)
    assert "hosts done" in out  # the live progress line was drawn
    assert "\x1b[31mtext" not in out  # the command's own escape still arrives escaped


def test_live_progress_counts_hosts_and_failures_and_names_the_slow_hosts_task():
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    reporter = TextReporter(verb="check", console=console, slow_after=0.0)
    reporter.play("fleet", ["n1", "n2", "n3"])
    try:
        reporter.task_started("n1", "gathering facts")
        reporter.task_started("n2", "nvidia_driver : driver package")
        reporter.task(TaskResult("n1", "fleet", "fabricmanager", Status.FAILED, error="not running"))
        reporter.host_done("n1")
        reporter.task(TaskResult("n3", "fleet", "connect", Status.UNREACHABLE, error="refused"))
        reporter.host_done("n3")
        shown = reporter.progress.render().plain
    finally:
        reporter.progress.stop()
    assert "2/3 hosts done" in shown and "1 failed" in shown and "1 unreachable" in shown
    assert "n2: nvidia_driver : driver package (0s)" in shown
    assert "n1:" not in shown  # finished hosts are not listed as slow


def test_without_a_tty_there_is_no_live_display():
    assert TextReporter(stream=io.StringIO()).progress is None


def _host(name: str, *tasks: TaskResult, unreachable: bool = False) -> HostResult:
    return HostResult(name, list(tasks), unreachable=unreachable)


def test_summary_has_the_issues_shape():
    run = RunResult("check", "playbooks/a100-node.yml", "prod", 0.0, 1.0)
    for index in range(1, 41):
        name = f"node{index:02d}"
        run.hosts[name] = _host(name, TaskResult(name, "p", "t", Status.OK))
    run.hosts["node07"] = _host("node07", TaskResult("node07", "p", "fabric manager", Status.WOULD_CHANGE,
                                                     changes=[ChangeReport("fabricmanager stopped")]))
    run.hosts["node12"] = _host("node12", TaskResult("node12", "p", "dkms", Status.WOULD_CHANGE,
                                                     changes=[ChangeReport("DKMS not built for 6.1.0-99")]))
    run.hosts["node33"] = _host("node33", TaskResult("node33", "p", "connect", Status.UNREACHABLE), unreachable=True)
    assert summary(run) == ("37/40 in sync, 2 drifted (node07: fabricmanager stopped; node12: DKMS not built for "
                            "6.1.0-99), 1 unreachable (node33)")


def test_summary_counts_each_host_once_under_its_worst_state_and_names_the_deadline():
    run = RunResult("check", "p.yml", "i", 0.0, 1.0, deadline=45, deadline_reached=True)
    run.hosts["a"] = _host("a", TaskResult("a", "p", "drift", Status.WOULD_CHANGE),
                           TaskResult("a", "p", "probe", Status.FAILED, error="exit 1\nmore lines"))
    run.hosts["b"] = _host("b", TaskResult("b", "p", "gpu", Status.UNKNOWN, error="not run: deadline",
                                           not_run="deadline"))
    run.hosts["c"] = _host("c", TaskResult("c", "p", "t", Status.OK))
    assert summary(run) == ("1/3 in sync, 1 failed (a: probe: exit 1), 1 unknown (b: gpu: not run: deadline); "
                            "deadline of 45 s reached (1 tasks not run)")
