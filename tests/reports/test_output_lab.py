"""Issue 29, finding 11: the default output of a drift check of two fresh a100 lab nodes, over
real SSH, with the product's own playbook (playbooks/a100-node.yml).

Before the fix, its 124 lines said most multi-change tasks twice (the joined message, then the
same changes as a list), a reboot chain named every earlier task on each deferred line (471
characters), and the closing summary named only one change of 37. A line is measured as a
log shows it (stdout is a pipe here: PLAIN_WIDTH, lines folded between clauses only).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuconf.report.console import PLAIN_WIDTH
from tests.lab_fixtures import LAB_NAME, start_lab

GPUCONF = str(Path(sys.executable).with_name("gpuconf"))
PLAYBOOK = Path(__file__).resolve().parents[2] / "playbooks" / "a100-node.yml"


@pytest.fixture(scope="module")
def drift_check():
    """The stdout of `gpuconf check playbooks/a100-node.yml` on two fresh a100 nodes."""
    lab = start_lab(f"{LAB_NAME[:20]}-out2", {"a100": 2})
    try:
        check = subprocess.run([GPUCONF, "check", str(PLAYBOOK), "-i", str(lab.inventory_path), "--no-retry-file"],
                               capture_output=True, text=True, timeout=300)
        assert check.returncode == 2, check.stdout + check.stderr
        yield check.stdout
    finally:
        lab.down()


def test_each_change_is_said_once(drift_check):
    lines = drift_check.splitlines()
    repeated = [(above, line) for above, line in zip(lines, lines[1:]) if line.strip() and line == above]
    assert repeated == []
    # a change listed under its task is not also in the task's own line
    said_twice = [(above, line) for above, line in zip(lines, lines[1:])
                  if line.startswith("    - ") and line[6:] in above]
    assert said_twice == [], said_twice
    assert "    - enable nvidia-fabricmanager (is not installed)" in lines  # listed: the check has lines to judge


def test_no_line_is_wider_than_a_log_shows(drift_check):
    widest = max(drift_check.splitlines(), key=len)
    assert len(widest) <= PLAIN_WIDTH, widest


def test_a_reboot_chain_names_its_first_cause_once(drift_check):
    deferred = [line for line in drift_check.splitlines() if "deferred to the pending reboot" in line]
    assert len(deferred) >= 3 * 2, drift_check  # persistenced, fabricmanager and dcgm on each node
    assert all(line.endswith("deferred to the pending reboot (Initramfs carries the blacklist)") for line in deferred)


def test_the_summary_counts_changes_per_role(drift_check):
    text = drift_check.rstrip()
    paragraph = " ".join(line.strip() for line in text[text.rindex("\n0/2 in sync") + 1:].splitlines())
    recap = dict(re.findall(r"^(a100-0\d) +: ok=\d+  would_change=(\d+)", drift_check, re.M))
    for host in ("a100-01", "a100-02"):
        counted = re.search(rf"{host}: (\d+) changes \(([^)]*)\)", paragraph)
        assert counted, paragraph
        assert counted.group(1) == recap[host]
        roles = dict(item.rsplit(" ", 1) for item in counted.group(2).split(", "))
        assert sum(int(n) for n in roles.values()) == int(recap[host])
        assert roles["nouveau"] == "3" and roles["nvidia_driver"] == "4" and roles["fabricmanager"] == "4"
