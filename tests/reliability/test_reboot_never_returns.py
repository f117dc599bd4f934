"""A reboot that never comes back: the host fails at its reboot timeout, the rolling budget
(`serial`, `max_fail_percentage`) counts it, and the later batches never start."""
from __future__ import annotations

import pytest

from tests.figures import inject_fault
from tests.reliability.helpers import gpuconf, no_traceback, node_file, write_inventory, write_playbook

MARKER = "/var/tmp/gpuconf-rel/rolling-marker"
PLAYBOOK = f"""\
- name: rolling reboot
  hosts: all
  serial: 1
  max_fail_percentage: 0
  gather_facts: false
  tasks:
    - name: reboot
      reboot: {{timeout: 8}}
      when: inventory_hostname == 't4-01'
    - name: marker
      file: {{path: {MARKER}, content: "rolled\\n"}}
"""


@pytest.fixture
def hanging_t4(lab):
    inject_fault(lab, "t4-01", "reboot-hang")
    yield "t4-01"
    lab.fault("t4-01", "clear")   # boots it, and waits for its sshd
    lab.exec("t4-01", ["rm", "-f", MARKER])


def test_a_reboot_that_hangs_fails_the_host_and_stops_the_rolling_run(lab, tmp_path, hanging_t4):
    inventory = write_inventory(lab, tmp_path / "hosts.yml", ["t4-01", "a100-01", "a100-02"], connect_timeout=1,
                                connect_retries=0)
    run = gpuconf("apply", write_playbook(tmp_path / "site.yml", PLAYBOOK), inventory)
    no_traceback(run)
    assert run.code == 4, run.stdout + run.stderr
    reboot = run.tasks("t4-01")["reboot"]
    assert reboot["status"] == "failed" and "did not come back within 8 s" in reboot["error"], reboot
    assert "marker" not in run.statuses("t4-01")
    # the budget (0 %) was spent by the first batch: the other batches never started
    for node in ("a100-01", "a100-02"):
        assert node_file(lab, node, MARKER) is None, f"{node} ran after the budget was spent"
        tasks = run.tasks(node)
        assert {t["not_run"] for t in tasks.values()} == {"max_fail_percentage"}, tasks
        assert "max_fail_percentage" in tasks["marker"]["error"] and "t4-01" in tasks["marker"]["error"]
        assert run.host(node)["in_sync"] is False
    assert "not started" in run.stdout
