"""The Grafana dashboard in docs/grafana/ queries only what the exporter writes, and its queries
give the right numbers on a real textfile; the textfile passes `promtool check metrics`.

promtool (Debian's `prometheus` package, scripts/system-deps.sh) parses every query
(`check rules`) and evaluates the main ones over the exporter's own samples (`test rules`).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from gpuconf.report import prometheus
from tests.paths import ROOT
from tests.unit.report.fleet import synthetic_run

DASHBOARD = ROOT / "docs" / "grafana" / "gpuconf-fleet.json"
# labels Prometheus adds when it scrapes node_exporter, and PromQL words that look like names
SCRAPE_LABELS = {"instance", "job"}
PROMQL_WORDS = {"sum", "count", "max", "min", "by", "or", "and", "time", "vector", "unless", "on", "avg"}


def promtool() -> str:
    path = shutil.which("promtool")
    if not path:
        pytest.fail("promtool is missing: run scripts/system-deps.sh (Debian package prometheus)")
    return path


def queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(exprs) >= 9
    return exprs


def exported(tmp_path: Path) -> tuple[Path, dict[str, set[str]]]:
    """The textfile of a fleet run with drift, failures, a health finding and an unreachable host;
    with each metric's label names."""
    path = tmp_path / "gpuconf.prom"
    prometheus.write(synthetic_run(12, drifted=(2, 4, 5, 6), failed=(3, 9), unreachable=(12,)), path)
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(path.read_text()):
        labels[family.name] = {name for sample in family.samples for name in sample.labels}
    return path, labels


def test_every_metric_and_label_the_dashboard_queries_is_one_the_exporter_writes(tmp_path):
    _, labels = exported(tmp_path)
    used_metrics = set()
    for expr in queries():
        metrics = set(re.findall(r"\bgpuconf_[a-z_]+\b", expr))
        assert metrics, f"{expr}: queries no gpuconf metric"
        unknown = metrics - set(labels)
        assert not unknown, f"{expr}: {sorted(unknown)} is not written by gpuconf/report/prometheus.py"
        known_labels = set().union(*(labels[m] for m in metrics)) | SCRAPE_LABELS
        grouped = {name for group in re.findall(r"by \(([^)]*)\)", expr) for name in re.split(r"\s*,\s*", group)}
        matched = set(re.findall(r"[{,]\s*([a-z_]+)\s*=~?", expr))
        assert grouped | matched <= known_labels, f"{expr}: labels {sorted((grouped | matched) - known_labels)}"
        used_metrics |= metrics
    # the panels: drift by role, health by probe, unreachable, last-run age, run duration
    assert {"gpuconf_drift", "gpuconf_health", "gpuconf_unreachable", "gpuconf_last_run_timestamp_seconds",
            "gpuconf_run_duration_seconds"} <= used_metrics


def test_the_textfile_passes_promtool_check_metrics(tmp_path):
    path, _ = exported(tmp_path)
    proc = subprocess.run([promtool(), "check", "metrics"], input=path.read_text(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpuconf_health" in path.read_text()  # the check covered the labelled metrics too


def test_promtool_parses_every_query_and_the_panels_count_the_right_hosts(tmp_path):
    path, _ = exported(tmp_path)
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query{i}", "expr": expr}
                                                        for i, expr in enumerate(queries())]}]}
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    proc = subprocess.run([promtool(), "check", "rules", str(tmp_path / "rules.yml")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    series = []  # the exporter's samples as a scrape of one node_exporter would store them
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            labels = dict(sample.labels, instance="ctl:9100", job="node")
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            series.append({"series": f"{sample.name}{{{text}}}", "values": f"{sample.value:g}x10"})
    by_title = {panel["title"]: panel["targets"][0]["expr"]
                for panel in json.loads(DASHBOARD.read_text())["panels"]}
    tests = [{"interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": by_title["Fleet drift by role"], "eval_time": "5m", "exp_samples": [{"labels": '{role="cuda"}',
                                                                                     "value": 4}]},
        {"expr": by_title["Hosts failing health, by probe"], "eval_time": "5m",
         "exp_samples": [{"labels": '{probe="xid"}', "value": 2}]},
        {"expr": by_title["Unreachable hosts"], "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": 1}]},
        {"expr": by_title["Hosts in sync"], "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": 5}]},
        {"expr": by_title["Longest run"], "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": 42}]},
    ]}]
    (tmp_path / "empty.yml").write_text("groups: []\n")
    (tmp_path / "test.yml").write_text(yaml.safe_dump({"rule_files": ["empty.yml"], "tests": tests}))
    proc = subprocess.run([promtool(), "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
