"""Report formats on real local runs (`-c local`, two inventory hosts on this machine).

JUnit is read back with an XML parser, the textfile with prometheus_client's own parser,
and the JSON with the schema in docs/. The goldens in golden/ are the normalised files
(temp paths, times and durations replaced), so a change in any format shows up as a diff.
"""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.paths import ROOT
from tests.unit.report.helpers import SECRET, load_json, normalise, run_cli, write_playbook

GOLDEN = Path(__file__).with_name("golden")
SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())


@pytest.fixture
def check_run(tmp_path, capsys):
    playbook = write_playbook(tmp_path)
    code, out, err = run_cli(["check", str(playbook), "-i", "hostA,hostB,", "-c", "local", "--diff", "-v",
                              "--junit", str(tmp_path / "out.xml"), "--prometheus", str(tmp_path / "out.prom"),
                              "--report", str(tmp_path / "out.json")], capsys)
    return tmp_path, code, out, err


def samples(text: str) -> dict[str, list]:
    found: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        found.setdefault(family.name, []).extend(family.samples)
    return found


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("GPUCONF_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from its golden (GPUCONF_UPDATE_GOLDEN=1 rewrites it)"


def test_check_junit_counts_drift_and_failure_and_matches_golden(check_run):
    tmp, code, _, _ = check_run
    assert code == 2 | 4
    root = ET.parse(tmp / "out.xml").getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["hostA", "hostB"]
    for suite in suites:
        cases = {c.get("name"): c for c in suite.findall("testcase")}
        assert list(cases) == ["file in sync", "file drifted", "secret token", "never on this host",
                               "probe that fails"]
        assert cases["file in sync"].find("failure") is None
        assert cases["file drifted"].find("failure").get("type") == "drift"
        assert cases["secret token"].find("failure").get("type") == "drift"
        assert cases["never on this host"].find("skipped") is not None
        assert cases["probe that fails"].find("failure").get("type") == "failed"
        assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "3", "1")
    assert (root.get("tests"), root.get("failures")) == ("10", "6")
    golden("check.junit.xml", normalise((tmp / "out.xml").read_text(), tmp))


def test_apply_junit_fails_only_failed_tasks_not_changes(tmp_path, capsys):
    playbook = write_playbook(tmp_path)
    code, out, _ = run_cli(["apply", str(playbook), "-i", "hostA,", "-c", "local", "--format", "junit"], capsys)
    assert code == 4
    root = ET.fromstring(out)  # stdout is exactly the XML document
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["file drifted"].find("failure") is None
    assert "changed:" in cases["file drifted"].find("system-out").text
    assert cases["secret token"].find("failure") is None
    assert cases["probe that fails"].find("failure").get("type") == "failed"
    assert root.get("failures") == "1"
    assert (tmp_path / "hostA-new.txt").exists()


def test_prometheus_textfile_parses_has_no_timestamps_and_matches_golden(check_run):
    tmp, _, _, _ = check_run
    text = (tmp / "out.prom").read_text()
    found = samples(text)
    assert all(s.timestamp is None for family in found.values() for s in family)
    drift = {(s.labels["host"], s.labels["task"]): s.value for s in found["gpuconf_drift"]}
    assert drift[("hostA", "file drifted")] == 1 and drift[("hostA", "file in sync")] == 0
    assert drift[("hostB", "secret token")] == 1
    failed = {(s.labels["host"], s.labels["task"]): s.value for s in found["gpuconf_task_failed"]}
    assert failed[("hostA", "probe that fails")] == 1 and failed[("hostA", "file drifted")] == 0
    assert {s.labels["host"]: s.value for s in found["gpuconf_check_ok"]} == {"hostA": 0, "hostB": 0}
    assert {s.labels["host"]: s.value for s in found["gpuconf_unreachable"]} == {"hostA": 0, "hostB": 0}
    assert found["gpuconf_exit_code"][0].value == 6
    stamp = found["gpuconf_last_run_timestamp_seconds"][0].value
    report = load_json(tmp / "out.json")
    assert abs(stamp - __import__("datetime").datetime.fromisoformat(report["ended"]).timestamp()) < 0.01
    assert 0 <= found["gpuconf_run_duration_seconds"][0].value < 60
    golden("check.prom", normalise(text, tmp))


def test_prometheus_is_replaced_atomically_leaving_no_temp_files(tmp_path, capsys):
    playbook = write_playbook(tmp_path)
    collector = tmp_path / "textfile_collector"
    collector.mkdir()
    target = collector / "gpuconf.prom"
    target.write_text("# an older run\n")
    before = target.stat().st_ino
    run_cli(["check", str(playbook), "-i", "hostA,", "-c", "local", "--prometheus", str(target)], capsys)
    assert target.stat().st_ino != before  # a rename, not a rewrite in place
    assert sorted(p.name for p in collector.iterdir()) == ["gpuconf.prom"]
    assert samples(target.read_text())["gpuconf_check_ok"][0].value == 0


def test_json_on_stdout_is_the_report_document_and_fits_the_schema(tmp_path, capsys):
    playbook = write_playbook(tmp_path)
    code, out, err = run_cli(["check", str(playbook), "-i", "hostA,hostB,", "-c", "local", "--format", "json",
                              "--report", str(tmp_path / "r.json")], capsys)
    document = json.loads(out)
    jsonschema.validate(document, SCHEMA)
    assert document == load_json(tmp_path / "r.json")
    assert document["exit_code"] == code == 6
    assert "PLAY RECAP" in err and "PLAY RECAP" not in out  # the human lines moved to stderr
    tasks = document["hosts"]["hostA"]["tasks"]
    assert [t["status"] for t in tasks] == ["ok", "would_change", "would_change", "skipped", "failed"]
    assert tasks[4]["error"].startswith("`echo broken")
    assert document["hosts"]["hostA"]["in_sync"] is False
    # the layout: a line for each of the run's fields and one for each host, so `grep HOST` finds its record
    host_lines = [line for line in out.splitlines() if line.startswith('    "host')]
    assert [json.loads("{" + line.rstrip(",") + "}") for line in host_lines] == [
        {"hostA": document["hosts"]["hostA"]}, {"hostB": document["hosts"]["hostB"]}]
    assert out.count("\n") == len(document) + len(document["hosts"]) + 3


def test_the_json_of_a_run_with_no_host_is_still_the_document(tmp_path):
    from gpuconf.report import jsonreport
    from gpuconf.results import RunResult

    run = RunResult("check", "pb.yml", "inv", started=0.0)
    assert json.loads(jsonreport.dumps(run)) == jsonreport.to_dict(run)
    run.host("h1")
    assert json.loads(jsonreport.dumps(run)) == jsonreport.to_dict(run)


@pytest.mark.parametrize("verb", ["check", "apply"])
def test_a_no_log_value_appears_in_no_format(tmp_path, capsys, verb):
    playbook = write_playbook(tmp_path)
    files = {name: tmp_path / name for name in ("r.json", "j.xml", "m.prom")}
    outs = []
    for fmt in ("text", "json", "junit"):
        _, out, err = run_cli([verb, str(playbook), "-i", "hostA,", "-c", "local", "--diff", "-vv",
                               "--format", fmt, "--report", str(files["r.json"]), "--junit", str(files["j.xml"]),
                               "--prometheus", str(files["m.prom"])], capsys)
        outs += [out, err] + [path.read_text() for path in files.values()]
    assert all(SECRET not in text for text in outs)
    assert any("(hidden: no_log)" in text for text in outs)
    if verb == "apply":
        assert (tmp_path / "hostA-token").read_text() == SECRET + "\n"  # it did write it


def test_an_unwritable_report_path_is_refused_before_anything_runs(tmp_path, capsys):
    playbook = write_playbook(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for option in ("--report", "--junit", "--prometheus"):
        code, out, err = run_cli(["apply", str(playbook), "-i", "hostA,", "-c", "local", option,
                                  str(blocker / "x.out")], capsys)
        assert code == 1
        assert err.startswith(f"gpuconf: error: {option} ") and "not a directory" in err
        assert "Traceback" not in err and out == ""
    assert not (tmp_path / "hostA-new.txt").exists()
