"""Two gpuconf runs on one host (a scheduled check during an apply): the apply holds the host's
run lock, and the check either waits for it (`--lock-wait`) and then reads the converged state,
or reports the host busy, naming the apply. It never reads a half-applied host."""
from __future__ import annotations

import pytest

from tests.figures import record_fault
from tests.reliability.helpers import (
    check_run,
    finish,
    no_traceback,
    node_file,
    start,
    wait_for,
    write_inventory,
    write_playbook,
)

DIR = "/var/tmp/gpuconf-rel/two-runs"
APPLY = f"""\
- hosts: all
  gather_facts: false
  tasks:
    - name: first file
      file: {{path: {DIR}/first, content: "one\\n"}}
    - name: held here
      shell: {{cmd: "touch {DIR}/started; while [ ! -e {DIR}/release ]; do sleep 0.1; done", timeout: 120}}
    - name: last file
      file: {{path: {DIR}/last, content: "three\\n"}}
"""
CHECK = f"""\
- hosts: all
  gather_facts: false
  tasks:
    - name: first file
      file: {{path: {DIR}/first, content: "one\\n"}}
    - name: last file
      file: {{path: {DIR}/last, content: "three\\n"}}
"""


def remote_runners(lab, node: str) -> int:
    """gpuconf's request runners alive on the node (the lock holder is another program)."""
    _, out, _ = lab.exec(node, ["ps", "-eo", "comm=,args="])
    return sum(1 for line in out.splitlines() if line.startswith("python3") and "gpuconf-remote" in line)


@pytest.fixture
def held_apply(lab, tmp_path):
    """An apply on t4-01 that holds its run lock, stopped inside its second task until released."""
    for node in ("t4-01", "a100-01"):
        lab.exec(node, ["mkdir", "-p", DIR])
    inventory = write_inventory(lab, tmp_path / "hosts.yml", ["t4-01", "a100-01"])
    proc, report = start("apply", write_playbook(tmp_path / "apply.yml", APPLY), inventory, "--limit", "t4-01")
    try:
        assert wait_for(lambda: node_file(lab, "t4-01", f"{DIR}/started") is not None, 60), "the apply never started"
        record_fault("concurrent-run")

        def release():
            lab.exec("t4-01", ["touch", f"{DIR}/release"])
            return finish(proc, report)

        yield inventory, release
    finally:
        lab.exec("t4-01", ["touch", f"{DIR}/release"])
        proc.kill()
        proc.wait()
        for node in ("t4-01", "a100-01"):
            lab.exec(node, ["rm", "-rf", "/var/tmp/gpuconf-rel"])


def test_a_check_during_an_apply_reports_the_host_busy_when_it_cannot_wait(lab, tmp_path, held_apply):
    inventory, release = held_apply
    check = check_run(lab, ["t4-01", "a100-01"], write_playbook(tmp_path / "check.yml", CHECK), inventory,
                      "--lock-wait", "0")
    no_traceback(check)
    assert check.code & 4, check.stdout + check.stderr
    busy = check.host("t4-01")["tasks"]
    assert [t["status"] for t in busy] == ["failed"], busy
    assert "busy: another gpuconf run holds" in busy[0]["error"] and "gpuconf apply apply.yml" in busy[0]["error"], \
        busy[0]["error"]
    assert "first file" not in check.statuses("t4-01")   # nothing was read: no half-applied state reported
    # the host without an apply is checked as usual (its files are missing: drift)
    assert check.statuses("a100-01") == {"first file": "would_change", "last file": "would_change"}
    assert "busy" in check.stdout
    applied = release()
    assert applied.code == 0, applied.stdout + applied.stderr
    assert node_file(lab, "t4-01", f"{DIR}/last") == "three\n"


def test_a_check_during_an_apply_waits_for_it_and_reads_the_converged_host(lab, tmp_path, held_apply):
    inventory, release = held_apply
    assert remote_runners(lab, "t4-01") == 1   # the apply's request, running its command
    proc, report = start("check", write_playbook(tmp_path / "check.yml", CHECK), inventory, "--limit", "t4-01",
                         "--lock-wait", "120")
    try:
        # the check's request is on the node, waiting on the lock, while the apply is half-way
        assert wait_for(lambda: remote_runners(lab, "t4-01") >= 2, 60), "the check never reached t4-01"
        assert node_file(lab, "t4-01", f"{DIR}/last") is None
        applied = release()
        check = finish(proc, report)
    finally:
        proc.kill()
        proc.wait()
    no_traceback(check)
    assert applied.code == 0, applied.stdout + applied.stderr
    # had the check read the host before the apply ended, the last file would be drift (exit 2)
    assert check.code == 0, check.stdout + check.stderr
    assert check.statuses("t4-01") == {"first file": "ok", "last file": "ok"}
