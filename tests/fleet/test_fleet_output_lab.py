"""The default output of a check on 20 lab nodes, over real SSH: two drifted nodes, each named
with its change, in under 40 lines; the HTML report of the same run holds all 20 hosts.

20 light nodes (t4) start in a few seconds, and a two-task playbook keeps the run short; the
100-host line budget is a unit test (tests/unit/report/test_fleet_output.py).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.lab_fixtures import LAB_NAME, start_lab

GPUCONF = str(Path(sys.executable).with_name("gpuconf"))
NODES = 20
PLAYBOOK = textwrap.dedent("""\
    - name: fleet output
      hosts: all
      gather_facts: false
      tasks:
        - name: memlock limit
          file: {path: /etc/security/limits.d/90-gpu.conf, content: "* soft memlock unlimited\\n"}
        - name: motd
          file: {path: /etc/motd, content: "GPU node\\n"}
    """)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """20 t4 nodes, converged by one apply of the playbook."""
    lab = start_lab(f"{LAB_NAME[:20]}-fleet20", {"t4": NODES})
    playbook = tmp_path_factory.mktemp("fleet20") / "site.yml"
    playbook.write_text(PLAYBOOK)
    try:
        converge = gpuconf("apply", str(playbook), "-i", str(lab.inventory_path))
        assert converge.returncode == 0, converge.stdout + converge.stderr
        yield lab, playbook
    finally:
        lab.down()


def gpuconf(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([GPUCONF, *args, "--no-retry-file"], capture_output=True, text=True, timeout=300)


def test_a_check_of_20_nodes_names_both_drifted_hosts_and_their_changes_in_under_40_lines(fleet, tmp_path):
    lab, playbook = fleet
    for node, path in (("t4-03", "/etc/motd"), ("t4-17", "/etc/security/limits.d/90-gpu.conf")):
        rc, _, err = lab.exec(node, ["sh", "-c", f"echo tampered > {path}"])
        assert rc == 0, err
    check = gpuconf("check", str(playbook), "-i", str(lab.inventory_path), "--html", str(tmp_path / "fleet.html"))
    assert check.returncode == 2, check.stdout + check.stderr
    lines = check.stdout.splitlines()
    assert len(lines) < 40, check.stdout
    assert "would change: motd (1 host: t4-03) - update content of /etc/motd" in lines, check.stdout
    assert ("would change: memlock limit (1 host: t4-17) - update content of "
            "/etc/security/limits.d/90-gpu.conf") in lines, check.stdout
    assert "check [fleet output]: 20/20 hosts done, 2 drifted, 0 failed" in lines
    assert not [line for line in lines if re.match(r"(ok|would change): \[", line)]  # no per-host task lines
    assert lines[-1].startswith("18/20 in sync, 2 drifted (t4-03: update content of /etc/motd; t4-17: ")

    page = (tmp_path / "fleet.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
                      .group(1))
    assert len(data["hosts"]) == NODES
    drifted = sorted(host for host, states, _ in data["hosts"] if states != [0])
    assert drifted == ["t4-03", "t4-17"]
