"""The human reporter: plain lines without a TTY, colour and live progress on one, the summary.

The TTY case runs the real CLI under a pseudo-terminal; the plain case under a pipe, the way
CI and cron run it.
"""
from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from rich.console import Console

from gpuconf.report.text import TextReporter, coloured, summary
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
    assert re.search(r"^h1 +: ok=1  would_change=1  unreachable=0  failed=1", out, re.M)
    *_, retry = out.rstrip().splitlines()
    summary = out[out.rindex("\n0/2 in sync") + 1:]  # a paragraph, folded at the log's width
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
    reporter.play_started("fleet", ["n1", "n2", "n3"])
    try:
        reporter.task_started("n1", "gathering facts")
        reporter.task_started("n2", "nvidia_driver : driver package")
        reporter.task_completed(TaskResult("n1", "fleet", "fabricmanager", Status.FAILED, error="not running"))
        reporter.host_completed("n1")
        reporter.task_completed(TaskResult("n3", "fleet", "connect", Status.UNREACHABLE, error="refused"))
        reporter.host_completed("n3")
        shown = reporter.progress.render().plain
    finally:
        reporter.progress.stop()
    assert "2/3 hosts done" in shown and "1 failed" in shown and "1 unreachable" in shown
    assert "n2: nvidia_driver : driver package (0s)" in shown
    assert "n1:" not in shown  # finished hosts are not listed as slow


def test_without_a_tty_there_is_no_live_display():
    assert TextReporter(stream=io.StringIO()).progress is None


ODD_TEXT = ["[bold]not markup[/bold]", "a\\[b", "ends in a backslash\\", ":smile: stays", "tab\tin\ta line",
            "wide 漢字\tthen a tab", "x" * 90 + "  ", "[link=http://x]y[/]", "ünïcode"]


def _feed(reporter: TextReporter) -> RunResult:
    """The same run, event by event, with names and messages rich markup would misread."""
    hosts = [f"n{index:02d}" for index in range(12)]
    run = RunResult("check", "p.yml", "inv", 0.0, 1.0)
    reporter.play_started("odd [names]", hosts)
    for index, host in enumerate(hosts):
        tasks = []
        for number, odd in enumerate(ODD_TEXT):
            status = [Status.OK, Status.WOULD_CHANGE, Status.FAILED][(index + number) % 3]
            tasks.append(TaskResult(
                host, "p", f"task {odd}", status, role="role" if number % 2 else None,
                changes=[ChangeReport(f"change {odd}", diff=f"--- a\n+++ b\n-{odd}\n+{odd}!")] * 2
                if status == Status.WOULD_CHANGE else [],
                error=f"error {odd}" if status == Status.FAILED else None, stdout=f"{odd}\nline two\n"))
            reporter.task_completed(tasks[-1])
        run.hosts[host] = _host(host, *tasks)
        reporter.host_completed(host)
    reporter.recap(run)
    return run


@pytest.mark.parametrize("verbose", [0, 1])
def test_plain_lines_are_rich_s_lines_without_a_terminal_and_text_is_never_read_as_markup(verbose, monkeypatch):
    """Without a terminal the reporter writes lines itself (rich is not imported); they are the
    lines that the reporter's rich console prints to a file that is not a terminal, character for character."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    plain, by_rich = io.StringIO(), io.StringIO()
    _feed(TextReporter(stream=plain, verbose=verbose, diff=True))
    assert isinstance(coloured(by_rich), Console) and not coloured(by_rich).is_terminal
    _feed(TextReporter(verbose=verbose, diff=True, console=coloured(by_rich)))
    assert plain.getvalue() == by_rich.getvalue()
    out = plain.getvalue()
    assert "task [bold]not markup[/bold]" in out and "a\\[b" in out and ":smile: stays" in out
    assert "ends in a backslash\\\n" in out or "ends in a backslash\\ " in out  # one backslash, as written
    if verbose:  # a command's stdout; tab stops every 8 cells, and a wide character takes two
        assert "\n      tab       in      a line\n" in out and "\n      wide 漢字 then a tab\n" in out


CHECK_MODULES = textwrap.dedent("""
    import json, sys
    from gpuconf.cli.main import main
    code = main(["check", "pb.yml", "-i", "h1,h2,", "-c", "local"])
    print(json.dumps({"code": code, "rich": sorted(m for m in sys.modules if m.split(".")[0] == "rich")}))
""")


def test_a_check_into_a_pipe_does_not_import_rich(tmp_path):
    (tmp_path / "pb.yml").write_text("- hosts: all\n  tasks:\n    - name: a file\n"
                                     f"      file: {{path: {tmp_path}/x, content: x}}\n")
    done = subprocess.run([sys.executable, "-c", CHECK_MODULES], cwd=tmp_path, capture_output=True, text=True,
                          env=plain_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    *lines, last = done.stdout.strip().splitlines()
    result = json.loads(last)
    assert result["code"] == 2  # the file is missing: drift, so the reporter did print lines
    assert any("would change: [h1] a file" in line for line in lines), lines
    assert result["rich"] == []


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
