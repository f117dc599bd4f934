"""`gpuconf remediate` never overrules a person, and drift the fleet's own playbook change made
is no lemon (issue 31, defects 1 and 5), over the lab's real Slurm cluster.

An operator drains a node (`admin: hold for RMA`) while remediate works on it: during the wait
for its jobs, and between its apply and its reboot. The operator's drain must survive to the
end, untouched: no apply after it, no `scontrol reboot reason=` over it, no resume. Then the
lemon rule: new versions of the playbook's desired state, each fixed and resumed, do not make a
lemon; three failed verifications do.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.lab_fixtures import wait_until
from tests.remediate.helpers import DRIFT_FILE, HEALTH, RELEASE, ROOT, SITE, drift, nodes, put_back

GATED = "tests/remediate/gated.yml"
FLEET = "tests/remediate/fleet.yml"
GATE = ("/var/tmp/remediate-gate-open", "/var/tmp/remediate-gate-go", "/var/tmp/remediate-gate-done")
VERSION_FILE = "/etc/gpuconf-fleet-version"
OPERATOR = "admin: hold for RMA"


def gpuconf(cluster, state: Path, verb: str, *args: str, popen: bool = False):
    lab, path = cluster
    argv = [sys.executable, "-m", "gpuconf", verb, *args, "--state-dir", str(state)]
    env = dict(os.environ, PATH=path, GPUCONF_REMEDIATE_POLL="0.3")
    if popen:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)


def remediate(cluster, state: Path, playbook: str, node: str, *args: str, popen: bool = False):
    lab, _ = cluster
    return gpuconf(cluster, state, "remediate", playbook, "-i", lab.name, "--health", HEALTH, "-l", node,
                   "--max-unavailable", "1", *args, popen=popen)


def history(cluster, state: Path, node: str) -> list[dict]:
    shown = gpuconf(cluster, state, "history", node, "--format", "json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return json.loads(shown.stdout)["remediations"]


def operator_drain(lab, node: str) -> None:
    done = lab.slurm(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={OPERATOR}"])
    assert done.returncode == 0, done.stderr


def boot_id(lab, node: str) -> str:
    rc, out, err = lab.exec(node, ["cat", "/proc/sys/kernel/random/boot_id"])
    assert rc == 0, err
    return out.strip()


def test_an_operator_drain_during_the_wait_stops_remediate_before_its_apply(cluster, tmp_path):
    lab, _ = cluster
    node, state = "t4-02", tmp_path / "state"
    try:
        submitted = lab.slurm(["sbatch", "--parsable", "--chdir=/tmp", "-w", node, "--wrap",
                               f"while [ ! -e {RELEASE} ]; do sleep 0.3; done"])
        assert submitted.returncode == 0, submitted.stderr
        assert wait_until(lambda: nodes(lab)[node].busy, 30, 0.3)
        drift(lab, node)  # its fix needs a reboot
        controller = remediate(cluster, state, SITE, node, "--drain-timeout", "3m", popen=True)
        seen = []
        for line in controller.stdout:
            seen.append(line)
            if line.startswith(f"{node}: wait: jobs still running"):
                break
        draining = nodes(lab)[node]
        assert draining.reason.startswith("gpuconf: drift: "), "".join(seen)
        operator_drain(lab, node)
        lab.exec(node, ["touch", RELEASE])  # the job ends: under the old code, apply and reboot followed
        output = "".join(seen) + controller.stdout.read()
        assert controller.wait(300) == 2, output  # drift left on a node someone else holds
        after = nodes(lab)[node]
        assert (after.reason, "DRAIN" in after.state) == (OPERATOR, True), (after, output)
        assert lab.exec(node, ["test", "-e", DRIFT_FILE])[0] == 0, output  # no apply ran after the drain
        assert f"{node}: apply" not in output and f"{node}: resume" not in output, output
        assert "drained by someone else" in output and OPERATOR in output.split("remediate: ")[-1], output
        (record,) = history(cluster, state, node)
        assert record["outcome"] == "foreign" and OPERATOR in record["detail"], record
        assert [s["step"] for s in record["steps"]] == ["drain", "wait", "done"], record
        assert record["lemon"]["counted"] is False, record
    finally:
        put_back(lab, node)


def test_an_operator_drain_between_apply_and_reboot_is_neither_rebooted_over_nor_resumed(cluster, tmp_path):
    lab, _ = cluster
    node, state = "t4-06", tmp_path / "state"
    try:
        lab.exec(node, ["rm", "-f", *GATE])
        drift(lab, node)
        booted = boot_id(lab, node)
        controller = remediate(cluster, state, GATED, node, popen=True)
        opened = wait_until(lambda: lab.exec(node, ["test", "-e", GATE[0]])[0] == 0, 240, 0.3)
        if not opened:
            controller.kill()
        assert opened, controller.communicate(timeout=30)[0]
        assert nodes(lab)[node].reason.startswith("gpuconf: drift: ")  # gpuconf's drain, its apply running
        operator_drain(lab, node)
        lab.exec(node, ["touch", GATE[1]])  # the apply goes on to its reboot task
        output = controller.communicate(timeout=300)[0]
        assert controller.returncode == 2, output
        after = nodes(lab)[node]
        # exactly the operator's reason: a reboot, even without reason=, would have appended " : reboot issued"
        assert (after.reason, after.state) == (OPERATOR, "IDLE+DRAIN"), (after, output)
        assert boot_id(lab, node) == booted, output  # not rebooted
        assert f"{node}: resume" not in output and "drained by someone else" in output, output
        (record,) = history(cluster, state, node)
        steps = [s["step"] for s in record["steps"]]
        assert record["outcome"] == "foreign" and OPERATOR in record["detail"], record
        assert "apply" in steps and "resume" not in steps and "fail" not in steps, record
        # the refused reboot had been announced on the host (connection/lock.py): the announcement
        # is withdrawn, so the run lock is free at once, not held until the reboot task's timeout
        assert lab.exec(node, ["test", "-e", "/run/gpuconf.lock.reboot"])[0] == 1
        # (the holder ends when the controller's connection closes; the timeout is far below the 120 s hold)
        assert wait_until(lambda: lab.exec(node, ["flock", "-n", "/run/gpuconf.lock", "true"])[0] == 0, 30, 0.3)
    finally:
        lab.exec(node, ["rm", "-f", *GATE])
        put_back(lab, node)


def test_drift_from_new_playbook_versions_is_no_lemon_but_three_failed_verifications_are(cluster, tmp_path):
    lab, _ = cluster
    node, state = "t4-05", tmp_path / "state"
    try:
        for version in ("1", "2", "3"):  # three changes of the fleet's desired state in a week
            run = remediate(cluster, state, FLEET, node, "-e", f"fleet_version={version}", "--lemon-after", "2")
            assert run.returncode == 0, run.stdout + run.stderr
            assert "resumed (1):" in run.stdout and "lemon" not in run.stdout, run.stdout
            assert lab.exec(node, ["cat", VERSION_FILE])[1] == f"{version}\n"
        assert nodes(lab)[node].in_service
        records = history(cluster, state, node)
        assert [(r["outcome"], r["lemon"]["counted"]) for r in records] == [("resumed", False)] * 3, records
        assert all("drift" in r["lemon"]["why"] for r in records), records
        shown = gpuconf(cluster, state, "history", node)
        assert shown.returncode == 0 and "LEMON RULE" in shown.stdout, shown.stdout + shown.stderr

        other = tmp_path / "faulty"  # a fault that survives every remediation
        rc, out, err = lab.fault(node, "xid", "63")  # no action named, a failure in HEALTH: no node action clears it
        assert rc == 0, out + err
        for _ in range(3):
            run = remediate(cluster, other, SITE, node)
            assert run.returncode == 6 and "remediation failed (left drained) (1):" in run.stdout, run.stdout
        run = remediate(cluster, other, SITE, node)
        assert run.returncode == 6 and "lemons (left drained) (1):" in run.stdout, run.stdout + run.stderr
        assert nodes(lab)[node].reason.startswith("gpuconf: lemon (3 remediations in 7d: "), nodes(lab)[node]
        records = history(cluster, other, node)
        assert [(r["outcome"], r["lemon"]["counted"]) for r in records] == \
            [("failed", True)] * 3 + [("lemon", False)], records
    finally:
        lab.exec(node, ["rm", "-f", VERSION_FILE])
        lab.reboot(node)  # the Xid is this boot's only
        lab.wait_ssh(node)
        put_back(lab, node)

