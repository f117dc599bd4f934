"""Point releases (issue 30, item 2): the catalog's newest point release per branch, the
`driver_point_release_behind` warning a node on an older one gets, naming the security bulletin
it misses, and that warning in every report, failing only with --strict."""
from __future__ import annotations

import datetime as dt
import io
import json
import time
import xml.etree.ElementTree as ET

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuconf.driver import catalog
from gpuconf.report import jsonreport, junit, prometheus
from gpuconf.report.text import TextReporter
from gpuconf.results import EXIT_FAILED, HostResult, RunResult, Status, TaskResult
from tests.unit.tasks.test_driver_stack import STACK_580_OPEN, check, converged, offering, policy, replies

BEHIND = "driver_point_release_behind"


def test_point_releases_compare_by_their_numbers():
    assert catalog.version_key("580.95.05") < catalog.version_key("580.105.08") < catalog.version_key("580.178.04")
    assert catalog.version_key("595.58.03") < catalog.version_key("595.91.07")


def test_every_supported_branch_knows_its_newest_point_release_with_a_date_and_a_source():
    for row in catalog.catalog().supported(dt.date(2026, 12, 7)):
        assert row.newest is not None, row.branch
        assert row.newest.version.startswith(f"{row.branch}.") and row.newest.source
    assert catalog.catalog().get(620).newest.version == "620.70.10"          # type: ignore[union-attr]


def test_a_node_on_an_older_point_release_is_warned_naming_the_newest_and_the_bulletin():
    verdict = check({"branch": 580, "version": "580.95.05"},
                    replies(converged(STACK_580_OPEN, "580.95.05-1"), offering(580)))
    assert verdict.changes == []                                              # in sync with its pin, yet:
    [finding] = verdict.findings
    assert (finding.probe, finding.severity, finding.value) == (BEHIND, "warning", "580.95.05")
    assert "behind the newest point release of branch 580, 580.178.04" in finding.message
    assert "Security Bulletin: GPU Display Driver - September 2026 (bulletin 5861" in finding.message
    assert "fixes it in 580.178.04" in finding.message


def test_a_branch_no_bulletin_names_is_warned_without_one():
    names = ["nvidia-kernel-common", "nvidia-dkms-open", "libnvidia-compute", "nvidia-utils"]
    installed = converged(names, "620.70.06-1") + [("nvidia-driver-pinning-620", "620-1", "hi")]
    offered = policy({**{n: ["620.70.06-1"] for n in names}, "nvidia-driver-pinning-620": ["620-1"]})
    verdict = check({"branch": 620, "version": "620.70.06"}, replies(installed, offered, branch=620))
    [finding] = verdict.findings
    assert finding.probe == BEHIND and "branch 620, 620.70.10" in finding.message
    assert "security" not in finding.message


@pytest.mark.parametrize("version", ["580.178.04", "580.180.01"])   # the newest known, or one newer still
def test_the_newest_point_release_or_a_newer_one_is_not_behind(version):
    row = catalog.catalog().get(580)
    assert row is not None and catalog.point_release_behind(row, version) is None


def behind_run(strict: bool) -> RunResult:
    verdict = check({"branch": 580, "version": "580.95.05"},
                    replies(converged(STACK_580_OPEN, "580.95.05-1"), offering(580)))
    now = time.time()
    run = RunResult("check", "playbooks/a100-node.yml", "inventories/lab", now - 2, now, strict=strict)
    task = TaskResult("a100-01", "nvidia_driver", "One driver stack", Status.OK, type="nvidia_driver_stack",
                      message=verdict.message, findings=verdict.findings)
    run.hosts["a100-01"] = HostResult("a100-01", [task])
    return run


def test_the_warning_reaches_text_json_junit_and_prometheus_and_fails_only_with_strict():
    run = behind_run(strict=False)
    out = io.StringIO()
    TextReporter(out).task_completed(run.hosts["a100-01"].tasks[0])
    assert "behind the newest point release of branch 580" in out.getvalue()
    [finding] = json.loads(jsonreport.dumps(run))["hosts"]["a100-01"]["tasks"][0]["findings"]
    assert (finding["probe"], finding["severity"]) == (BEHIND, "warning")
    case = ET.fromstring(junit.render(run)).find("testsuite[@name='a100-01']/testcase")
    assert case.find("failure") is None and BEHIND in case.find("system-out").text
    health = {(s.labels["probe"], s.labels["severity"]): s.value for f in
              text_string_to_metric_families(prometheus.render(run)) if f.name == "gpuconf_health" for s in f.samples}
    assert health[(BEHIND, "warning")] == 1
    assert run.exit_code & EXIT_FAILED == 0
    strict = behind_run(strict=True)
    assert strict.exit_code & EXIT_FAILED
    assert BEHIND in ET.fromstring(junit.render(strict)).find("testsuite[@name='a100-01']/testcase/failure")\
        .get("message")
