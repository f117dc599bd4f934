"""bench/report.py's apply table (issue 27, item 7): ratios to the apply floor of the same run, the
goal's verdicts, and the in-sync count read from a `gpuconf check --report` file."""
from __future__ import annotations

import json
import sys

from tests.paths import ROOT

BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

import report  # noqa: E402
from measure import Row  # noqa: E402


def row(tool: str, workload: str, hosts: int, wall: float, **counted) -> Row:
    return Row(tool=tool, workload=workload, hosts=hosts, rc=0, wall_s=wall, cpu_s=0.1, peak_rss_mb=50.0,
               processes=1, machine_busy=0.5, connections=2.0, round_trips=3.0, round_trips_max=3,
               kib_to_host=1.0, self_counted=dict(counted))


def rows() -> list[Row]:
    return [row("floor", "fresh apply", 1, 4.0, converged="1/1"), row("floor", "fresh apply", 1, 6.0, converged="1/1"),
            row("gpuconf", "fresh apply", 1, 6.0, round_trips=31.0, converged="1/1"),
            row("ansible", "fresh apply", 1, 40.0, converged="0/1"),
            row("floor", "fresh apply", 20, 10.0), row("gpuconf", "fresh apply", 20, 20.0),
            row("floor", "after apply", 1, 0.25), row("gpuconf", "no-op check", 1, 0.5)]


def test_apply_rows_are_ratios_to_the_apply_floor_of_the_same_host_count():
    by = {(g["hosts"], g["tool"], g["workload"]): g for g in report.grouped(rows())}
    assert by[(1, "floor", "fresh apply")]["wall"] == 5.0        # the median of the floor's runs
    assert by[(1, "gpuconf", "fresh apply")]["ratio"] == 6.0 / 5.0
    assert by[(1, "ansible", "fresh apply")]["ratio"] == 8.0
    assert by[(20, "gpuconf", "fresh apply")]["ratio"] == 2.0
    assert by[(1, "gpuconf", "no-op check")]["ratio"] == 2.0    # the check against the plain floor after apply
    assert by[(1, "floor", "fresh apply")]["converged"] == "1/1, 1/1"


def test_apply_table_has_one_line_per_host_count_tool_and_verb():
    table = report.apply_table(rows()).splitlines()
    assert table[0].startswith("| Hosts | Tool | Verb |")
    body = table[2:]
    assert len(body) == 6                                        # the plain floor after apply is not a row
    assert "| 1 | floor (one script) | apply (fresh nodes) | 5.00 (2: 4.00–6.00) | 1.00 |" in body[0]
    assert "| 1 | gpuconf | apply (fresh nodes) | 6.00 | 1.20 |" in body[1]
    assert "3.0; 31.0 | 1/1 | 0 |" in body[1]
    assert "| 1 | gpuconf | check (no-op) | 0.50 | 2.00 |" in body[3]


def test_apply_targets_judge_1_and_20_hosts_against_1_5():
    lines = report.apply_targets(rows()).splitlines()
    assert "1 hosts" in lines[0] and "= 1.20 (met)" in lines[0] and "ansible 8.00× the floor" in lines[0]
    assert "20 hosts" in lines[1] and "= 2.00 (**missed**: target ≤ 1.5, over by 1.33×)" in lines[1]


def test_converged_counts_hosts_with_nothing_to_change(tmp_path):
    report_file = tmp_path / "check.json"
    report_file.write_text(json.dumps({"hosts": [
        {"name": "a", "stats": {"ok": 41, "would_change": 0, "failed": 0}},
        {"name": "b", "stats": {"ok": 38, "would_change": 3, "failed": 0}},
        {"name": "c", "stats": {"ok": 0, "unreachable": 1}}]}))
    assert report.converged(report_file) == "1/3"
    assert report.converged(tmp_path / "missing.json") == "?"
