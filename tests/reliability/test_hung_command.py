"""A command that never returns: the task's `timeout:` kills its whole process group on the node,
and the task says it timed out; the other hosts finish."""
from __future__ import annotations

import pytest

from tests.figures import inject_fault
from tests.reliability.helpers import check_run, gpuconf, no_traceback, write_inventory, write_playbook

CHECK = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: driver answers
      probe: {command: "if command -v nvidia-smi >/dev/null; then nvidia-smi -L; else echo no driver; fi", timeout: 20}
      timeout: 2
"""

APPLY = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: a hung pipeline
      shell: {cmd: "sleep 4242 & nvidia-smi -q | cat; wait"}
      timeout: 2
    - name: never reached
      command: {cmd: "true"}
"""


def leftovers(lab, node: str) -> list[str]:
    """Processes on the node left by the task (its shell, the hung nvidia-smi, the background sleep)."""
    _, out, _ = lab.exec(node, ["ps", "-eo", "pid,args"])
    return [line for line in out.splitlines() if "sleep 4242" in line or "nvidia-smi" in line]


@pytest.fixture
def hung_t4(lab):
    """t4-01 with nvidia-smi installed and hung; a fresh node again afterwards."""
    rc, out, err = lab.exec("t4-01", "DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-utils-535")
    assert rc == 0, out + err
    inject_fault(lab, "t4-01", "nvidia-smi-hang")
    yield "t4-01"
    lab.reset("t4-01")


def test_a_hung_nvidia_smi_is_killed_by_the_task_timeout_in_check_and_apply(lab, tmp_path, hung_t4):
    inventory = write_inventory(lab, tmp_path / "hosts.yml", ["t4-01", "a100-01"])
    check = check_run(lab, ["t4-01", "a100-01"], write_playbook(tmp_path / "check.yml", CHECK), inventory)
    no_traceback(check)
    probe = check.tasks("t4-01")["driver answers"]
    assert probe["status"] == "unknown" and "timed out after 2 s" in probe["error"], probe
    assert check.statuses("a100-01") == {"driver answers": "ok"}   # no nvidia-smi there: it answers at once
    assert check.code == 4
    assert leftovers(lab, "t4-01") == []

    apply = gpuconf("apply", write_playbook(tmp_path / "apply.yml", APPLY), inventory, "--limit", "t4-01")
    no_traceback(apply)
    task = apply.tasks("t4-01")["a hung pipeline"]
    assert task["status"] == "failed", task
    assert "timed out after 2 s" in task["error"] and "process group was killed" in task["error"], task["error"]
    assert "never reached" not in apply.statuses("t4-01")   # a failed task stops that host's play
    assert apply.code == 4
    assert leftovers(lab, "t4-01") == [], "the process group outlived the timeout"
