"""The retry file over real SSH: a host that is down is listed next to the playbook, and the
next run, limited to `@site.retry`, reaches only that host; once it is fine the file goes."""
from __future__ import annotations

from tests.figures import inject_fault
from tests.reliability.helpers import check_run, no_traceback, write_inventory, write_playbook

PLAYBOOK = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: hostname answers
      probe: {command: hostname, matches: "^(a100|t4)-0"}
"""


def test_an_unreachable_host_is_written_to_the_retry_file_and_the_next_run_targets_only_it(lab, tmp_path):
    inventory = write_inventory(lab, tmp_path / "hosts.yml", ["a100-01", "t4-01", "a100-02"], connect_timeout=1,
                                connect_retries=0)
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    retry_file = tmp_path / "site.retry"
    inject_fault(lab, "t4-01", "sshd-down")
    try:
        first = check_run(lab, ["a100-01", "a100-02"], playbook, inventory)
    finally:
        inject_fault(lab, "t4-01", "sshd-up")
    no_traceback(first)
    assert first.code == 8, first.stdout + first.stderr
    assert first.host("t4-01")["unreachable"] is True
    assert retry_file.read_text() == "t4-01\n"
    assert f"retry with: --limit @{retry_file}" in first.stdout

    again = check_run(lab, ["t4-01"], playbook, inventory, "--limit", f"@{retry_file}")
    no_traceback(again)
    assert again.code == 0, again.stdout + again.stderr
    assert list(again.report["hosts"]) == ["t4-01"]   # the hosts that were fine are not run again
    assert again.statuses("t4-01") == {"hostname answers": "ok"}
    assert not retry_file.exists(), "a run with nothing to retry removes the stale retry file"
    assert "retry with" not in again.stdout
