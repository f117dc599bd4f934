"""`check --slurm` as a step after the run, end to end on this machine (`-c local`): the real CLI,
the real remote runner, the real `Slurm` scheduler, with a stand-in `scontrol` on PATH that keeps
one node's state in a file. The lab's real Slurm runs the same path in tests/slurm/.

What a user sees: the node drained with the first failure as its reason, the recap's `slurm:` lines,
the JSON report's `slurm` field (docs/report-schema.json), and exit bit 4 when the scheduler
refuses, even after a run whose tasks were all fine.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from gpuconf.cli.main import main
from gpuconf.engine.options import RunOptions
from gpuconf.results import RunResult
from tests.paths import ROOT

SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())
NODE = "gpu017"

# the machine's python3: a shebang cannot hold a checkout path with a space in it (CI's is one)
SCONTROL = """#!/usr/bin/python3
import json, os, sys
path = os.path.join(os.environ["FAKE_SLURM"], "node.json")
node = json.load(open(path))
node["calls"].append(sys.argv[1:])
args = sys.argv[1:]
code = 0
if args[:2] == ["show", "node"]:
    if args[2] != node["name"]:
        sys.stderr.write("Node %s not found\\n" % args[2])
        code = 1
    else:
        why = "\\n   Reason=%s [root@2026-12-04T08:00:%02d]" % (node["reason"], node["clock"]) if node["reason"] else ""
        print("NodeName=%s Arch=x86_64 CoresPerSocket=1\\n   State=%s ThreadsPerCore=1%s" % (
            node["name"], node["state"], why))
elif args[:1] == ["update"] and node["refuse"]:
    sys.stderr.write("slurm_update error: Access/permission denied\\n")
    code = 1
elif args[:1] == ["update"] and "State=DRAIN" in args:
    node["state"], node["reason"] = "IDLE+DRAIN", args[-1][len("Reason="):]
    node["clock"] += 1
elif args[:1] == ["update"]:
    node["state"], node["reason"] = "IDLE", None
json.dump(node, open(path, "w"))
sys.exit(code)
"""


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """One Slurm node as the stand-in scontrol keeps it, and the project: an inventory of this machine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM", str(tmp_path))
    (tmp_path / "node.json").write_text(json.dumps({"name": NODE, "state": "IDLE", "reason": None, "clock": 0,
                                                    "refuse": False, "calls": []}))
    (tmp_path / "hosts.yml").write_text(f"all:\n  hosts:\n    h1: {{python: {sys.executable}, "
                                        f"slurm_node_name: {NODE}}}\n")
    return tmp_path


def node(cluster: Path) -> dict:
    return json.loads((cluster / "node.json").read_text())


def check(capsys, cluster: Path, healthy: bool, *extra: str) -> tuple[int, str, dict]:
    playbook = cluster / "health.yml"
    playbook.write_text(textwrap.dedent(f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - name: gpu healthy
              assert: {{that: '{str(healthy).lower()}', fail_msg: Xid 79 on GPU 0}}
        """))
    code = main(["check", str(playbook), "-i", str(cluster / "hosts.yml"), "-c", "local", "--slurm",
                 "--slurm-state", str(cluster / "state" / "healthcheck.json"), "--report", str(cluster / "r.json"),
                 "--no-retry-file", *extra])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    report = json.loads((cluster / "r.json").read_text())
    jsonschema.validate(report, SCHEMA)
    return code, out, report


def test_a_failure_drains_and_two_healthy_runs_resume_through_the_scheduler(cluster, capsys):
    code, out, report = check(capsys, cluster, healthy=False)
    reason = "gpuconf: failed: gpu healthy: Xid 79 on GPU 0"
    assert code == 4 and report["exit_code"] == 4
    assert (node(cluster)["state"], node(cluster)["reason"]) == ("IDLE+DRAIN", reason)
    assert report["slurm"] == [{"host": "h1", "node": NODE, "action": "drain", "reason": reason,
                                "previous_state": "IDLE", "previous_reason": None, "error": None, "healthy": None}]
    assert f"slurm: [{NODE}] drained: {reason}" in out
    remembered = json.loads((cluster / "state" / "healthcheck.json").read_text())
    assert (remembered["reason"], remembered["stamp"]) == (reason, "root@2026-12-04T08:00:01")

    code, out, report = check(capsys, cluster, healthy=True)
    assert code == 0 and report["slurm"][0]["action"] == "wait" and report["slurm"][0]["healthy"] == 1
    assert f"slurm: [{NODE}] stays drained ({reason}): healthy 1 run(s) in a row, resumed after 2" in out
    code, out, report = check(capsys, cluster, healthy=True)
    assert code == 0 and report["slurm"][0]["action"] == "resume"
    assert (node(cluster)["state"], node(cluster)["reason"]) == ("IDLE", None)
    # each read asks for this one node, never for the whole cluster
    assert all(call[:3] == ["show", "node", NODE] for call in node(cluster)["calls"] if call[0] == "show")


def test_a_scheduler_that_refuses_fails_the_run_and_keeps_the_count(cluster, capsys):
    check(capsys, cluster, healthy=False)
    check(capsys, cluster, healthy=True)
    state = node(cluster)
    (cluster / "node.json").write_text(json.dumps(state | {"refuse": True}))
    code, out, report = check(capsys, cluster, healthy=True)
    assert code == 4 and report["exit_code"] == 4  # the tasks were fine: the failed resume says someone must look
    assert report["slurm"][0]["action"] == "error"
    assert "Access/permission denied" in report["slurm"][0]["error"]
    assert f"slurm: [{NODE}] FAILED: scontrol update NodeName={NODE} State=RESUME failed (exit 1)" in out
    assert node(cluster)["state"] == "IDLE+DRAIN"
    (cluster / "node.json").write_text(json.dumps(node(cluster) | {"refuse": False}))
    code, _, report = check(capsys, cluster, healthy=True)  # the healthy count was kept: resumed now
    assert code == 0 and report["slurm"][0]["action"] == "resume"


def test_a_node_the_scheduler_does_not_know_is_an_error_that_names_the_variable(cluster, capsys):
    (cluster / "hosts.yml").write_text(f"all:\n  hosts:\n    h1: {{python: {sys.executable}, "
                                       "slurm_node_name: gpu999}\n")
    code, out, report = check(capsys, cluster, healthy=True)
    assert code == 4 and report["slurm"][0]["action"] == "error"
    assert report["slurm"][0]["error"] == "slurm has no node 'gpu999' (the host variable slurm_node_name names it)"
    assert node(cluster)["state"] == "IDLE"


def test_without_slurm_the_report_has_no_scheduler_field_and_the_run_no_scheduler_option(cluster, capsys):
    playbook = cluster / "ok.yml"
    playbook.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n    - assert: {that: 'true'}\n")
    code = main(["check", str(playbook), "-i", str(cluster / "hosts.yml"), "-c", "local", "--no-retry-file",
                 "--report", str(cluster / "r.json")])
    capsys.readouterr()
    assert code == 0 and "slurm" not in json.loads((cluster / "r.json").read_text())
    assert node(cluster)["calls"] == []
    # the engine's options and results carry nothing of a scheduler: the step brings its own
    assert [f.name for f in dataclasses.fields(RunOptions) if "slurm" in f.name or "scheduler" in f.name] == []
    assert [f.name for f in dataclasses.fields(RunResult) if "slurm" in f.name] == []
