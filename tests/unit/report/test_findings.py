"""Health findings and awkward text through every reporter.

The health probes are built elsewhere, so these runs are built from the typed results
directly: the reporters consume results only, which is exactly what is under test here.
"""
from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET

import jsonschema
from prometheus_client.parser import text_string_to_metric_families

from gpuconf.report import jsonreport, junit, prometheus
from gpuconf.results import Finding, HostResult, RunResult, Status, TaskResult
from tests.paths import ROOT

SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())


def health_run(strict: bool = False, secret: bool = False) -> RunResult:
    now = time.time()
    run = RunResult("check", "playbooks/health.yml", "inventories/prod", now - 3, now, strict=strict)
    task = TaskResult("node07", "health", "GPU temperatures", Status.OK, type="gpu_health", role="gpu_health",
                      message="8 GPUs read", secret=secret, findings=[
                          Finding("temperature", "ok", "41 C", gpu=0, value=41),
                          Finding("temperature", "warning", "83 C, slowdown at 87 C", gpu=3, value=83),
                          Finding("xid", "failure", "Xid 79: GPU has fallen off the bus", gpu=5, bus_id="0000:9A:00.0"),
                          Finding("nvlink", "ok", "all links up"),
                      ])
    run.hosts["node07"] = HostResult("node07", [task])
    run.hosts["node33"] = HostResult("node33", [TaskResult("node33", "health", "connect", Status.UNREACHABLE,
                                                           error="connection refused")], unreachable=True)
    return run


def test_junit_failure_findings_fail_and_warnings_go_to_system_out():
    root = ET.fromstring(junit.render(health_run()))
    case = root.find("testsuite[@name='node07']/testcase")
    failure = case.find("failure")
    assert failure.get("type") == "health" and "xid gpu 5: Xid 79" in failure.get("message")
    assert "warning: temperature gpu 3: 83 C" in case.find("system-out").text
    unreachable = root.find("testsuite[@name='node33']/testcase")
    assert unreachable.find("failure").get("type") == "unreachable"
    assert root.get("failures") == "2"


def test_strict_makes_a_warning_a_failure_in_junit():
    run = health_run(strict=True)
    run.hosts["node07"].tasks[0].findings = [f for f in run.hosts["node07"].tasks[0].findings if f.probe != "xid"]
    case = ET.fromstring(junit.render(run)).find("testsuite[@name='node07']/testcase")
    assert "temperature gpu 3" in case.find("failure").get("message")
    relaxed = health_run()
    relaxed.hosts["node07"].tasks[0].findings = run.hosts["node07"].tasks[0].findings
    assert ET.fromstring(junit.render(relaxed)).find("testsuite[@name='node07']/testcase/failure") is None


def test_health_gauges_carry_probe_gpu_and_severity():
    text = prometheus.render(health_run())
    health = {(s.labels["probe"], s.labels["gpu"], s.labels["severity"]): s.value
              for f in text_string_to_metric_families(text) if f.name == "gpuconf_health" for s in f.samples}
    assert health == {("temperature", "0", "ok"): 0, ("temperature", "3", "warning"): 1,
                      ("xid", "5", "failure"): 2, ("nvlink", "", "ok"): 0}
    unreachable = {s.labels["host"]: s.value for f in text_string_to_metric_families(text)
                   if f.name == "gpuconf_unreachable" for s in f.samples}
    assert unreachable == {"node07": 0, "node33": 1}


def test_findings_in_the_json_report_fit_the_schema_and_secret_text_is_hidden():
    document = jsonreport.to_dict(health_run(secret=True))
    jsonschema.validate(document, SCHEMA)
    findings = document["hosts"]["node07"]["tasks"][0]["findings"]
    assert [(f["probe"], f["severity"], f["gpu"]) for f in findings][2] == ("xid", "failure", 5)
    assert {f["message"] for f in findings} == {"(hidden: no_log)"}
    assert "Xid 79" not in junit.render(health_run(secret=True))


def test_control_characters_in_output_still_make_well_formed_xml():
    run = health_run()
    task = run.hosts["node07"].tasks[0]
    task.status, task.error, task.stdout = Status.FAILED, "bad \x1b[31mcolour\x1b[0m \x00", "tail \x07 bell"
    root = ET.fromstring(junit.render(run))  # raises on an invalid character
    assert "colour" in root.find(".//failure").get("message")


def test_duplicate_task_names_give_one_sample_with_the_worse_value():
    now = time.time()
    run = RunResult("check", "p.yml", "i", now, now)
    run.hosts["h"] = HostResult("h", [TaskResult("h", "p", "same name", Status.OK),
                                      TaskResult("h", "p", "same name", Status.WOULD_CHANGE)])
    drift = [s for f in text_string_to_metric_families(prometheus.render(run)) if f.name == "gpuconf_drift"
             for s in f.samples]
    assert [(s.labels["task"], s.value) for s in drift] == [("same name", 1)]
