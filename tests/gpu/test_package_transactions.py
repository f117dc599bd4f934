"""Consecutive package tasks go to the package manager as one transaction (issue 27, item 7), on
the converged lab: the a100 playbook's fresh apply ran the DKMS package with the driver stack,
fabric manager with NSCQ, and Docker with the container toolkit as one apt transaction each
(/var/log/apt/history.log), and still reported each task on its own: changed, with its own
changes, re-checked as its own."""
from __future__ import annotations

from tests.gpu.conftest import gpuconf
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


def test_a_task_applied_with_the_one_before_it_costs_no_round_trip_of_its_own(converged):
    """test_converge's bound (the first read, one round trip per changed task, the reboot's), less
    one for each task that went with the one before it: a fresh a100 node took 34 round trips
    for 31 changed tasks before, 31 with the three runs above joined."""
    apply = converged.runs["a100"]["apply"]
    for host in converged.hosts("a100"):
        changed = sum(t["status"] == "changed" for t in apply.host_tasks(host))
        assert apply.report["hosts"][host]["round_trips"] <= 1 + changed - len(TOGETHER) + 2 + 2, changed


FAILING = """\
- hosts: a100-02
  gather_facts: false
  tasks:
    - name: ibverbs-utils installed
      package: {name: ibverbs-utils}
    - name: a toolkit version no repository has
      package: {name: nvidia-container-toolkit, version: "9.9.9-1"}
"""


def test_a_joint_transaction_that_fails_runs_each_task_alone_each_with_its_own_result(converged, tmp_path):
    playbook = tmp_path / "failing.yml"
    playbook.write_text(FAILING)
    try:
        run = gpuconf("apply", str(playbook), report=tmp_path / "failing.json")
        tasks = {t["task"]: t for t in run.host_tasks("a100-02")}
        assert run.rc != 0
        assert tasks["ibverbs-utils installed"]["status"] == "changed", tasks["ibverbs-utils installed"]
        failed = tasks["a toolkit version no repository has"]
        assert failed["status"] == "failed" and "nvidia-container-toolkit=9.9.9-1" in failed["error"], failed
        assert "ibverbs-utils" not in failed["error"]   # its own transaction's error, not the joint one's
        assert "ok installed" in sh(converged, "a100-02", "dpkg-query -W -f '${Status}' ibverbs-utils; echo")
    finally:
        converged.lab.exec("a100-02", "apt-get purge -y -q ibverbs-utils", timeout=300)
