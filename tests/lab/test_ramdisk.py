"""The dataset_ramdisk role on a lab node: check 2, apply, check 0, and the RAM disk is mounted again
after a reboot (from /etc/fstab); a node whose memory would leave the jobs too little is refused.
The lab's kernel mounts nothing for real (lab/gpuconf_lab/sim/mounts.py)."""
from __future__ import annotations

import json
import subprocess
import sys

from gpuconf.facts.mounts import parse_findmnt_list
from tests.lab_fixtures import ssh_client, ssh_run
from tests.paths import ROOT

PLAYBOOK = "playbooks/dataset-ramdisk.yml"
NODE = "a100-02"   # the session lab's node for reboots: 1 TiB, a 64G RAM disk fits


def gpuconf(lab, verb: str, host: str, *args: str, report=None) -> subprocess.CompletedProcess:
    extra = ["--report", str(report)] if report else []
    return subprocess.run([sys.executable, "-m", "gpuconf", verb, PLAYBOOK, "-i", str(lab.inventory_path),
                           "--limit", host, "--no-retry-file", *extra, *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def ramdisk(lab) -> list:
    client = ssh_client(lab, NODE)
    try:
        rc, out, err = ssh_run(client, "findmnt -l -o TARGET,SOURCE,FSTYPE,OPTIONS")
    finally:
        client.close()
    assert rc == 0, err
    return [m for m in parse_findmnt_list(out) if m.target == "/mnt/ramdisk"]


def test_the_ramdisk_role_converges_and_survives_a_reboot(lab):
    try:
        check = gpuconf(lab, "check", NODE)
        assert check.returncode == 2, check.stdout + check.stderr
        assert "mount tmpfs at /mnt/ramdisk (tmpfs, size=64G)" in check.stdout
        apply = gpuconf(lab, "apply", NODE)
        assert apply.returncode == 0, apply.stdout + apply.stderr
        assert gpuconf(lab, "check", NODE).returncode == 0
        [mounted] = ramdisk(lab)
        assert (mounted.source, mounted.fstype) == ("tmpfs", "tmpfs") and "size=67108864k" in mounted.options
        boots = lab.node_state(NODE)["boots"]
        lab.reboot(NODE)
        lab.wait_ssh(NODE, timeout=60)
        assert lab.node_state(NODE)["boots"] == boots + 1
        assert len(ramdisk(lab)) == 1                      # mounted again at boot, from /etc/fstab
        again = gpuconf(lab, "check", NODE)
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        gone = gpuconf(lab, "apply", NODE, "-e", "dataset_ramdisk_state=absent")
        assert gone.returncode == 0, gone.stdout + gone.stderr
    assert ramdisk(lab) == []


def test_a_ramdisk_that_would_leave_the_jobs_too_little_is_refused(lab, tmp_path):
    report = tmp_path / "report.json"
    check = gpuconf(lab, "check", "t4-01", report=report)     # a T4 server: 64 GiB, half kept for the jobs
    assert check.returncode & 4, check.stdout + check.stderr
    [task] = json.loads(report.read_text())["hosts"]["t4-01"]["tasks"]
    assert task["status"] == "failed"
    assert "a 64.0 GiB RAM disk at /mnt/ramdisk would leave the jobs 0.0 GiB of the node's 64.0 GiB; " \
           "they need 32.0 GiB (keep_for_jobs: 50%)" in task["error"]
