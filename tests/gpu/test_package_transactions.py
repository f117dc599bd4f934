"""Consecutive package tasks go to the package manager as one transaction (issue 27, item 7), on
the converged lab: the a100 playbook's fresh apply ran the DKMS package with the driver stack,
fabric manager with NSCQ, and Docker with the container toolkit as one apt transaction each
(/var/log/apt/history.log), and still reported each task on its own: changed, with its own
changes, re-checked as its own."""
from __future__ import annotations

from tests.gpu.test_drift import sh

HOST = "a100-01"
TOGETHER = [
    ("DKMS installed", "One driver stack at the pinned version and flavour, held"),
    ("Fabric manager at the driver's version, held",
     "NSCQ (the NVSwitch query library DCGM uses) at the driver's version, held"),
    ("Docker engine installed", "NVIDIA container toolkit at the pinned version, held"),
]
ALONE = "Toolkit at the pinned version, held"  # the CUDA toolkit: a file task before it, a probe after


def transactions(converged, host: str) -> list[str]:
    """The node's apt history, one entry per transaction (blank-line separated), oldest first."""
    return [entry for entry in sh(converged, host, "cat /var/log/apt/history.log").split("\n\n") if entry.strip()]


def commandline(entry: str) -> str:
    return next((line for line in entry.splitlines() if line.startswith("Commandline:")), "")


def installed_by(task: dict) -> list[str]:
    """The packages the task's own changes install (the apt-get its report lists for it)."""
    return sorted(word.split("=")[0] for change in task["changes"] for op in change["ops"]
                  if "apt-get install" in op for word in op.split(" -- ", 1)[1].split())


def test_consecutive_package_tasks_were_one_apt_transaction_and_each_task_is_reported(converged):
    apply = converged.runs["a100"]["apply"]
    tasks = {t["task"]: t for t in apply.host_tasks(HOST)}
    history = [commandline(e) for e in transactions(converged, HOST)]
    installs = [line for line in history if " install " in line]
    for first, second in TOGETHER:
        assert tasks[first]["status"] == tasks[second]["status"] == "changed", (tasks[first], tasks[second])
        mine, theirs = installed_by(tasks[first]), installed_by(tasks[second])
        assert mine and theirs and not set(mine) & set(theirs), (mine, theirs)  # each its own changes
        # the first transaction that installed the first task's packages installed the second's too
        joint = next(line for line in installs if all(f" {name}" in line for name in mine))
        assert all(f" {name}" in joint for name in theirs), (joint, theirs)
    toolkit = installed_by(tasks[ALONE])
    alone = next(line for line in installs if all(f" {name}" in line for name in toolkit))
    assert not any(f" {name}" in alone for first, second in TOGETHER for name in installed_by(tasks[second]))


def test_the_joined_tasks_changed_nothing_on_the_second_apply(converged):
    again = converged.runs["a100"]["apply2"]
    statuses = again.statuses(HOST)
    assert all(statuses[name] == "ok" for pair in TOGETHER for name in pair), statuses
