"""--deadline: a drift check never hangs. Real local runs with a probe that sleeps.

On the deadline the run reports what it has, marks every task that did not run
`unknown` (not_run: deadline) on every host, including hosts that never started and
plays that never began, and exits with the failure bit. Each probe keeps its own timeout.
"""
from __future__ import annotations

import json
import textwrap
import time

from prometheus_client.parser import text_string_to_metric_families

from gpuconf.cli.main import main


def playbook(tmp, probe_timeout: float = 120) -> str:
    path = tmp / "deadline.yml"
    path.write_text(textwrap.dedent(f"""\
        - name: first play
          hosts: all
          tasks:
            - name: quick file
              file: {{path: "{tmp}/a.txt", content: "a\\n"}}
            - name: hanging probe
              probe: {{command: "sleep 60", timeout: {probe_timeout}}}
            - name: after the probe
              file: {{path: "{tmp}/b.txt", content: "b\\n"}}
        - name: second play
          hosts: all
          tasks:
            - name: never reached
              file: {{path: "{tmp}/c.txt", content: "c\\n"}}
        """))
    return str(path)


def run(tmp, capsys, *args: str) -> tuple[int, float, dict]:
    started = time.monotonic()
    code = main([*args, "--report", str(tmp / "r.json"), "--prometheus", str(tmp / "m.prom")])
    elapsed = time.monotonic() - started
    capsys.readouterr()
    return code, elapsed, json.loads((tmp / "r.json").read_text())


def statuses(report: dict, host: str) -> dict[str, tuple[str, str | None]]:
    return {t["task"]: (t["status"], t["not_run"]) for t in report["hosts"][host]["tasks"]}


def test_check_stops_at_the_deadline_reports_what_ran_and_marks_the_rest_unknown(tmp_path, capsys):
    # 8 s: time for the first task on a loaded machine (at 2 s, a full suite run in parallel on 2 shared
    # cores sometimes had not finished it), well short of the probe's 60
    code, elapsed, report = run(tmp_path, capsys, "check", playbook(tmp_path), "-i", "h1,h2,", "-c", "local",
                                "--forks", "1", "--deadline", "8")
    assert elapsed < 30  # the probe sleeps 60 s and may take 120: the deadline ended the run
    assert code & 4 and not code & 8
    assert report["deadline"] == 8 and report["deadline_reached"] is True
    first = statuses(report, "h1")
    assert first["quick file"] == ("would_change", None)  # it ran: its result is reported
    assert first["hanging probe"][0] == "unknown"
    assert first["never reached"] == ("unknown", "deadline")
    # h2 waited behind --forks 1 and never started: every task is there, unknown
    assert statuses(report, "h2") == {"quick file": ("unknown", "deadline"), "hanging probe": ("unknown", "deadline"),
                                      "after the probe": ("unknown", "deadline"),
                                      "never reached": ("unknown", "deadline")}
    assert "deadline (8 s)" in report["hosts"]["h2"]["tasks"][0]["error"]
    metrics = {f.name: f.samples for f in text_string_to_metric_families((tmp_path / "m.prom").read_text())}
    assert metrics["gpuconf_deadline_reached"][0].value == 1
    unknown = {(s.labels["host"], s.labels["task"]): s.value for s in metrics["gpuconf_task_unknown"]}
    assert unknown[("h2", "quick file")] == 1 and unknown[("h1", "quick file")] == 0


def test_apply_starts_no_task_after_the_deadline(tmp_path, capsys):
    """The play's facts are read in one batch, the probe's with them, so the hung probe holds
    that batch until the deadline; after it apply writes nothing, and says so."""
    code, elapsed, report = run(tmp_path, capsys, "apply", playbook(tmp_path), "-i", "h1,", "-c", "local",
                                "--deadline", "2")
    assert elapsed < 30 and code & 4
    assert not any((tmp_path / name).exists() for name in ("a.txt", "b.txt", "c.txt"))
    assert statuses(report, "h1")["quick file"] == ("unknown", "deadline")
    assert statuses(report, "h1")["after the probe"] == ("unknown", "deadline")
    assert statuses(report, "h1")["never reached"] == ("unknown", "deadline")


def test_each_probe_keeps_its_own_timeout_under_a_longer_deadline(tmp_path, capsys):
    code, elapsed, report = run(tmp_path, capsys, "check", playbook(tmp_path, probe_timeout=1), "-i", "h1,",
                                "-c", "local", "--deadline", "40")
    assert elapsed < 30
    tasks = {t["task"]: t for t in report["hosts"]["h1"]["tasks"]}
    assert tasks["hanging probe"]["status"] == "unknown" and "timed out after 1 s" in tasks["hanging probe"]["error"]
    assert tasks["after the probe"]["status"] == "would_change"  # the run went on
    assert tasks["never reached"]["status"] == "would_change"
    assert report["deadline_reached"] is False and code == 2 | 4


def test_a_bad_deadline_is_a_usage_error(tmp_path, capsys):
    code = main(["check", playbook(tmp_path), "-i", "h1,", "-c", "local", "--deadline", "0"])
    assert code == 1
    assert capsys.readouterr().err.startswith("gpuconf: error: --deadline")
