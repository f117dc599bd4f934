"""The history database (schema version, migrations, a newer schema refused, the run lock),
`gpuconf history`, and the Slurm implementation of the scheduler interface."""
from __future__ import annotations

import json
import sqlite3
import time

import pytest

from gpuconf.cli.main import main
from gpuconf.remediate.history import SCHEMA_VERSION, History, HistoryError, RunLock
from gpuconf.scheduler.interface import SchedulerError
from gpuconf.scheduler.slurm import Slurm, parse_nodes

SHOW = """NodeName=a100-01 Arch=x86_64 CoresPerSocket=1
   CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=0.01
   NodeAddr=a100-01 NodeHostName=a100-01 Version=22.05.8
   State=MIXED+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=gpu
   CurrentWatts=0 AveWatts=0
   Reason=gpuconf: drift: /etc/gpu.conf content [root@2026-12-04T07:10:00]

NodeName=a100-02 Arch=x86_64 CoresPerSocket=1
   State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A

NodeName=t4-01 Arch=x86_64 CoresPerSocket=1
   State=DOWN*+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Reason=Kill task failed [slurm@2026-12-03T10:00:00]
"""


def test_a_new_history_has_the_current_schema_version(tmp_path):
    with History(tmp_path) as history:
        assert history.version == SCHEMA_VERSION
        rid = history.begin("h", "h", "gpuconf: drift: x", "run1")
        history.step(rid, "wait")
        assert history.open_records()["h"].step == "wait"
        history.finish(rid, "resumed")
        assert not history.open_records()
        assert [s[1] for s in history.steps(rid)] == ["begin", "wait", "done"]
    with History(tmp_path) as again:  # reopened: nothing migrated twice, the data kept
        assert [r.outcome for r in again.records("h")] == ["resumed"]


def test_a_history_from_a_newer_gpuconf_is_refused(tmp_path):
    History(tmp_path).close()
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    with pytest.raises(HistoryError, match=f"schema is version {SCHEMA_VERSION + 1}, newer than this gpuconf"):
        History(tmp_path)


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    (tmp_path / "history.sqlite3").write_text("not sqlite " * 100)
    with pytest.raises(HistoryError, match="not a gpuconf history database"):
        History(tmp_path)


def test_one_remediation_at_a_time_per_state_directory(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(HistoryError, match="another gpuconf remediate is running"):
            with RunLock(tmp_path):
                pass
    with RunLock(tmp_path):  # released
        pass


def test_gpuconf_history_shows_a_table_and_json(tmp_path, capsys):
    with History(tmp_path) as history:
        history.add("a100-01", "a100-01", "failed", "gpuconf: failed: Xid 79", "verify: Xid 79",
                    started=time.time() - 3600)
        history.begin("a100-01", "a100-01", "gpuconf: drift: x", "run2", step="apply")
    assert main(["history", "a100-01", "--state-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split()[:4] == ["STARTED", "(UTC)", "OUTCOME", "STEP"]
    assert "failed" in text[1] and "Xid 79" in text[1] and "open" in text[2] and "apply" in text[2]
    assert "LEMON RULE" in text[0] and "counts: the remediation failed (verify: Xid 79)" in text[1]
    assert "open: a run stopped in it" in text[2]
    assert main(["history", "a100-01", "--state-dir", str(tmp_path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["outcome"] for r in data["remediations"]] == ["failed", None]
    assert [r["lemon"]["counted"] for r in data["remediations"]] == [True, False]
    assert [r["cause"] for r in data["remediations"]] == ["fault", "drift"]
    assert data["remediations"][1]["steps"][0]["step"] == "apply"
    assert main(["history", "nobody", "--state-dir", str(tmp_path / "empty")]) == 0
    assert "no remediation recorded" in capsys.readouterr().out


def test_scontrol_show_node_is_parsed_per_node():
    nodes = {n.name: n for n in parse_nodes(SHOW)}
    assert nodes["a100-01"].reason == "gpuconf: drift: /etc/gpu.conf content"
    assert nodes["a100-01"].busy and nodes["a100-01"].ours
    assert nodes["a100-02"].in_service and nodes["a100-02"].reason is None
    assert nodes["t4-01"].foreign and "NOT_RESPONDING" in nodes["t4-01"].flags


class Recorder:
    def __init__(self, rc=0, out=SHOW, err=""):
        self.argv: list[list[str]] = []
        self.reply = (rc, out, err)

    def __call__(self, argv, timeout):
        assert timeout > 0
        self.argv.append(argv)
        return self.reply


def test_the_slurm_commands_remediation_runs():
    run = Recorder()
    slurm = Slurm(run)
    assert set(slurm.nodes(["a100-01", "t4-01", "unknown"])) == {"a100-01", "t4-01"}
    slurm.drain("a100-01", "gpuconf: drift: x\ny")
    slurm.resume("a100-01")
    slurm.reboot("a100-01")
    assert run.argv == [
        ["scontrol", "show", "node"],
        ["scontrol", "update", "NodeName=a100-01", "State=DRAIN", "Reason=gpuconf: drift: x y"],
        ["scontrol", "update", "NodeName=a100-01", "State=RESUME"],
        # no reason=: Slurm would set it over whatever reason the node has; without, it keeps it
        ["scontrol", "reboot", "a100-01"]]


def test_a_failing_scontrol_is_an_error_that_names_the_command():
    slurm = Slurm(Recorder(1, "", "slurm_update error: Invalid node name specified"))
    with pytest.raises(SchedulerError, match="scontrol update NodeName=x State=RESUME failed .exit 1.: "
                                             "slurm_update error: Invalid node name"):
        slurm.resume("x")
