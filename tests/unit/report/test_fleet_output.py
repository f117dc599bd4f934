"""The human output at fleet size: a summary by task across hosts, a folded recap, a line budget.

The reporter is driven with the events the runner sends (play_started, task_completed, host_completed, recap) for a
synthetic fleet, through a plain (non-TTY) stream, the way CI logs it.
"""
from __future__ import annotations

import io

from gpuconf.report.hostlist import compress
from gpuconf.report.text import TextReporter
from gpuconf.results import RunResult
from tests.unit.report.fleet import host_name, synthetic_run


def printed(run: RunResult, verbose: int = 0) -> list[str]:
    stream = io.StringIO()
    reporter = TextReporter(stream=stream, verbose=verbose, verb=run.verb)
    reporter.play_started("a100 nodes", list(run.hosts))
    for host in run.hosts.values():
        for task in host.tasks:
            reporter.task_completed(task)
        reporter.host_completed(host.host)
    run.seal()
    reporter.recap(run)
    return stream.getvalue().splitlines()


def test_host_lists_compress_into_ranges_the_way_slurm_writes_them():
    assert compress([host_name(i) for i in range(1, 98)] + [host_name(99)]) == "a100-[001-097,099]"
    assert compress(["n1", "n2", "n3", "n10", "login", "n5"]) == "n[1-3,5,10],login"
    assert compress(["gpu07"]) == "gpu07" and compress([]) == ""


def test_a_no_op_check_of_100_hosts_prints_at_most_30_lines():
    lines = printed(synthetic_run(100))
    assert len(lines) <= 30, "\n".join(lines)
    assert any("100/100 hosts done, 0 drifted, 0 failed" in line for line in lines)
    assert "100 hosts: every task in sync" in lines
    assert any(line.startswith("a100-[001-100] (100 hosts) : ok=30  would_change=0") for line in lines), lines
    assert lines[-1] == "100/100 in sync"


def test_drift_and_failures_are_grouped_by_task_failures_first_with_every_host_named():
    lines = printed(synthetic_run(100, drifted=(7, 8, 9, 50), failed=(3, 99)))
    text = "\n".join(lines)
    assert len(lines) <= 40, text
    summary = lines[lines.index("TASK SUMMARY") + 1:lines.index("PLAY RECAP")]
    assert summary[0] == ("FAILED: fabricmanager : fabricmanager step 0 (2 hosts: a100-[003,099]) - "
                          "nvidia-fabricmanager.service: failed to start")
    assert "FAILED: health : health step 0 (2 hosts: a100-[003,099]) - 1 failure" in summary
    assert "    - failure: xid gpu 3: Xid 79: fallen off the bus" in summary
    drift = summary.index("would change: cuda : cuda step 0 (4 hosts: a100-[007-009,050])")
    assert summary[drift + 1:drift + 3] == ["    - install cuda-toolkit-12-8 (12.8.1-1)",
                                            "    - write /etc/profile.d/cuda.sh"]
    assert "[a100-007]" not in text  # no per-host lines at this size
    paragraph = lines[max(i for i, line in enumerate(lines) if not line.startswith(" ")):]  # the summary paragraph may fold
    assert paragraph[0].startswith("94/100 in sync, 4 drifted (a100-007: install cuda-toolkit-12-8")


def test_the_recap_folds_hosts_with_the_same_counts_beyond_20_hosts_worst_first():
    lines = printed(synthetic_run(21, drifted=(2,), unreachable=(21,)))
    recap = lines[lines.index("PLAY RECAP") + 1:-2]
    assert recap == [
        "a100-021 (1 hosts) : ok=0  would_change=0  unreachable=1  failed=0  skipped=0  rescued=0  ignored=0  unknown=0",
        # as Ansible counts: ok includes the task that would change
        "a100-002 (1 hosts) : ok=30  would_change=1  unreachable=0  failed=0  skipped=0  rescued=0  ignored=0  unknown=0",
        "a100-[001,003-020] (19 hosts) : ok=30  would_change=0  unreachable=0  failed=0  skipped=0  rescued=0  "
        "ignored=0  unknown=0"]
    assert len(printed(synthetic_run(20))) > len(printed(synthetic_run(21)))  # 20 hosts: one recap line each


def test_ten_hosts_or_fewer_show_the_lines_of_what_is_not_in_sync_and_v_shows_every_line():
    run = synthetic_run(10, drifted=(2,), failed=(5,))
    lines = printed(run)
    per_host = [line for line in lines if "[a100-" in line]
    assert len(per_host) == 3, per_host
    assert per_host[0] == "would change: [a100-002] cuda : cuda step 0"
    assert per_host[1].startswith("FAILED: [a100-005] fabricmanager : fabricmanager step 0 - nvidia-fabricmanager")
    assert per_host[2] == "FAILED: [a100-005] health : health step 0 - 1 failure"
    assert "TASK SUMMARY" not in lines  # the lines above already say it
    verbose = printed(synthetic_run(10, drifted=(2,), failed=(5,)), verbose=1)
    assert sum("ok: [a100-" in line for line in verbose) == 10 * 30 - 3


def test_a_health_warning_on_a_task_in_sync_is_shown_at_any_fleet_size():
    from gpuconf.results import Finding, Status, TaskResult

    def with_warning(hosts: int) -> RunResult:
        run = synthetic_run(hosts)
        run.hosts[host_name(2)].tasks.append(TaskResult(
            host_name(2), "a100 nodes", "driver branch", Status.OK, role="nvidia_driver",
            findings=[Finding("driver_eol", "warning", "535 reached its end of life")]))
        return run

    small = printed(with_warning(3))
    assert "ok: [a100-002] nvidia_driver : driver branch" in small
    assert "    warning: driver_eol: 535 reached its end of life" in small
    large = printed(with_warning(50))
    assert "ok: nvidia_driver : driver branch (1 host: a100-002)" in large
    assert "    - warning: driver_eol: 535 reached its end of life" in large
