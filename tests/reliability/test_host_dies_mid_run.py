"""A host that stops answering during an apply is unreachable; the others finish their play."""
from __future__ import annotations

from tests.figures import inject_fault
from tests.reliability.helpers import finish, no_traceback, node_file, start, wait_for, write_inventory, write_playbook

DIR = "/var/tmp/gpuconf-rel/mid-run"
PLAYBOOK = f"""\
- hosts: all
  gather_facts: false
  tasks:
    - name: first file
      file: {{path: {DIR}/first, content: "one\\n"}}
    - name: slow command
      shell: {{cmd: "touch {DIR}/started && sleep 4", timeout: 30}}
    - name: last file
      file: {{path: {DIR}/last, content: "three\\n"}}
"""


def test_sshd_down_during_apply_makes_that_host_unreachable_and_the_others_go_on(lab, tmp_path):
    nodes = ["a100-01", "t4-01"]
    for node in nodes:
        lab.exec(node, ["mkdir", "-p", DIR])
    inventory = write_inventory(lab, tmp_path / "hosts.yml", nodes, connect_timeout=2)
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    proc, report = start("apply", playbook, inventory)
    try:
        assert wait_for(lambda: node_file(lab, "t4-01", f"{DIR}/started") is not None, 60), "never started"
        inject_fault(lab, "t4-01", "sshd-down")
        run = finish(proc, report)
    finally:
        proc.kill()
        inject_fault(lab, "t4-01", "sshd-up")
    no_traceback(run)
    assert run.code == 8, run.stdout + run.stderr
    assert run.statuses("a100-01") == {"first file": "changed", "slow command": "changed", "last file": "changed"}
    down = run.host("t4-01")
    assert down["unreachable"] is True
    statuses = run.statuses("t4-01")
    assert statuses["first file"] == "changed" and statuses["slow command"] == "unreachable", statuses
    assert "last file" not in statuses or run.tasks("t4-01")["last file"]["not_run"], statuses
    error = run.tasks("t4-01")["slow command"]["error"]
    assert "connection to t4-01 lost" in error and "sleep 4" in error, error
    # nothing half-written: the last file was never started, no temp file is left anywhere
    assert node_file(lab, "t4-01", f"{DIR}/last") is None
    assert node_file(lab, "a100-01", f"{DIR}/last") == "three\n"
    assert sorted(lab.exec("a100-01", ["ls", "-A", DIR])[1].split()) == ["first", "last", "started"]
    assert sorted(lab.exec("t4-01", ["ls", "-A", DIR])[1].split()) == ["first", "started"]
    for node in nodes:
        lab.exec(node, ["rm", "-rf", "/var/tmp/gpuconf-rel"])
