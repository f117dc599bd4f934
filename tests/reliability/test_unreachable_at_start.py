"""A host that is down when the run starts: bounded retries, then `unreachable`; the others finish."""
from __future__ import annotations

from tests.figures import inject_fault
from tests.reliability.helpers import check_run, no_traceback, write_inventory, write_playbook

PLAYBOOK = """\
- hosts: all
  tasks:
    - name: hostname answers
      probe: {command: hostname, matches: "^(a100|t4)-0"}
"""


def test_a_node_whose_sshd_does_not_answer_is_unreachable_after_its_retries(lab, tmp_path):
    inventory = write_inventory(lab, tmp_path / "hosts.yml", ["a100-01", "t4-01"], connect_timeout=1,
                                connect_retries=2)
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    inject_fault(lab, "t4-01", "sshd-down")  # TCP is accepted, no SSH banner ever comes
    try:
        run = check_run(lab, ["a100-01"], playbook, inventory)
    finally:
        inject_fault(lab, "t4-01", "sshd-up")
    no_traceback(run)
    assert run.code == 8, run.stdout + run.stderr
    down = run.host("t4-01")
    assert down["unreachable"] is True and down["stats"]["unreachable"] == 1
    assert "3 attempts" in down["error"], down["error"]        # 1 try + connect_retries: 2, then it gives up
    assert [t["status"] for t in down["tasks"]] == ["unreachable"]
    assert run.statuses("a100-01") == {"hostname answers": "ok"}
    assert run.host("a100-01")["in_sync"] is True
    assert "t4-01" in run.stdout and "unreachable" in run.stdout
