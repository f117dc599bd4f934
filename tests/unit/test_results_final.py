"""Results are final once their run ends: the reporters read them and nothing changes them."""
from __future__ import annotations

import copy as copy_module
import dataclasses
import json

import pytest

from gpuconf.results import ChangeReport, Finding, RunResult, Status, TaskResult


def a_run() -> RunResult:
    run = RunResult("check", "pb.yml", "inv", started=1.0)
    task = TaskResult("a100-01", "play", "driver", Status.WOULD_CHANGE, message="580.95.05 wanted")
    task.changes.append(ChangeReport("install nvidia-driver-580-open"))
    task.findings.append(Finding("xid", "failure", "Xid 79 on GPU 0", gpu=0))
    run.host("a100-01").tasks.append(task)
    return run


def test_a_run_is_built_by_assignment_and_refuses_every_assignment_once_sealed():
    run = a_run()
    host = run.hosts["a100-01"]
    host.round_trips = 1                     # while the run goes on, results are plain objects
    run.seal()
    task = host.tasks[0]
    for obj, name in ((run, "interrupted"), (host, "unreachable"), (task, "status"),
                      (task.changes[0], "summary"), (task.findings[0], "severity")):
        with pytest.raises(AttributeError, match=f"{type(obj).__name__}.{name}: results are final"):
            setattr(obj, name, None)
        with pytest.raises(AttributeError, match="results are final"):
            delattr(obj, name)
    with pytest.raises(TypeError):
        run.hosts["b"] = host                # type: ignore[index]
    with pytest.raises(AttributeError):
        host.tasks.append(task)              # type: ignore[attr-defined]
    assert host.round_trips == 1 and run.exit_code == 2


def test_a_sealed_result_still_reads_compares_and_copies_as_its_own_type():
    sealed, plain = a_run(), a_run()
    sealed.seal()
    task, plain_task = sealed.hosts["a100-01"].tasks[0], plain.hosts["a100-01"].tasks[0]
    assert isinstance(task, TaskResult) and type(task).__name__ == "TaskResult"
    assert repr(task).startswith("TaskResult(host='a100-01'")
    assert json.loads(json.dumps(dataclasses.asdict(task), default=str))["message"] == "580.95.05 wanted"
    assert task.findings[0] == Finding("xid", "failure", "Xid 79 on GPU 0", gpu=0) == task.findings[0]
    assert task.findings[0] != Finding("xid", "failure", "Xid 79 on GPU 1", gpu=1)
    assert task.changes[0] == plain_task.changes[0] and plain_task.changes[0] == task.changes[0]
    assert task.changes[0] != task.findings[0]
    copy = dataclasses.replace(task.changes[0], summary="other")   # a copy is a new result, not sealed
    copy.diff = "--- a\n+++ b\n"
    assert copy.summary == "other" and task.changes[0].summary == "install nvidia-driver-580-open"
    twin = copy_module.copy(task)
    twin.message = "copied"
    assert twin == dataclasses.replace(task, message="copied") and task.message == "580.95.05 wanted"
    finding = Finding("xid", "failure", "Xid 79 on GPU 0", gpu=0)
    finding._seal()
    kind = type(finding)
    finding._seal()                           # sealing twice is sealing once
    assert type(finding) is kind and kind.__mro__[1] is Finding
    with pytest.raises(AttributeError):
        finding.message = "fixed"
