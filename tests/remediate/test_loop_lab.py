"""`gpuconf remediate` over the lab's real Slurm cluster (issue 16, acceptance 1-4).

The CLI runs as a user runs it, its `scontrol` the machine's, reaching the lab's slurmctld
through a wrapper on PATH (what SLURM_CONF and munge are on a real login node). The drift is a
GSP override file (tests/remediate/site.yml): removing it needs a reboot, which goes
through `scontrol reboot`. The health gate is the Xid probe (tests/remediate/health.yml):
`lab fault xid 63` (made a failure there, naming no action: nothing gpuconf does clears it) fails it until the
next boot; Xid 79 asks for a reboot (tests/remediate/test_hold_lab.py). Every test puts its nodes back: idle, no job,
no drain, no drift.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from gpuconf.remediate.history import History
from tests.lab_fixtures import wait_until
from tests.remediate.helpers import DRIFT_FILE, HEALTH, RELEASE, ROOT, SITE, drift, nodes, put_back

IN_SERVICE = ("idle", "mixed", "allocated", "completing")


def remediate(cluster, state: Path, *args: str, popen: bool = False):
    lab, path = cluster
    argv = [sys.executable, "-m", "gpuconf", "remediate", SITE, "-i", lab.name, "--health", HEALTH,
            "--state-dir", str(state), *args]
    env = dict(os.environ, PATH=path, GPUCONF_REMEDIATE_POLL="0.3")
    if popen:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)


class Sampler(threading.Thread):
    """`sinfo` every 0.5 s: the most nodes out of service at once, and every state seen."""

    def __init__(self, lab):
        super().__init__(daemon=True)
        self.lab, self.most, self.seen, self.done = lab, 0, [], threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            listed = self.lab.slurm(["sinfo", "--noheader", "-N", "-o", "%N %T"], timeout=20)
            if listed.returncode == 0:
                states = dict(line.split(None, 1) for line in listed.stdout.splitlines() if " " in line)
                self.seen.append(states)
                self.most = max(self.most, sum(1 for s in states.values() if s.rstrip("*") not in IN_SERVICE))


def test_two_drifted_nodes_under_jobs_are_remediated_one_at_a_time(cluster, tmp_path):
    lab, _ = cluster
    drifted = ["t4-02", "t4-05"]
    jobs = {}
    try:
        for info in lab.nodes:  # each job runs until the test releases it, then ends normally
            submitted = lab.slurm(["sbatch", "--parsable", "--chdir=/tmp", "-w", info.name, "--wrap",
                                   f"while [ ! -e {RELEASE} ]; do sleep 0.3; done; "
                                   "echo finished > /var/tmp/remediate-job-$SLURM_JOB_ID"])
            assert submitted.returncode == 0, submitted.stderr
            jobs[info.name] = submitted.stdout.strip()
        assert wait_until(lambda: all(n.busy for n in nodes(lab).values()), 30, 0.3)
        for node in drifted:
            drift(lab, node)
        sampler = Sampler(lab)
        sampler.start()
        controller = remediate(cluster, tmp_path / "state", "--max-unavailable", "1", "--drain-timeout", "3m",
                               "--report", str(tmp_path / "report.json"), popen=True)
        seen = []
        for line in controller.stdout:
            seen.append(line)
            if line.startswith(f"{drifted[0]}: wait: jobs still running"):
                break
        time.sleep(2)
        draining = nodes(lab)[drifted[0]]
        assert (draining.state, draining.reason.startswith("gpuconf: drift: ")) == ("MIXED+DRAIN", True), "".join(seen)
        for info in lab.nodes:
            lab.exec(info.name, ["touch", RELEASE])
        output = "".join(seen) + controller.stdout.read()
        assert controller.wait(300) == 0, output
        sampler.done.set()
        sampler.join()
        assert sampler.most == 1, sampler.seen  # sampled out of service: one node, never two
        report = json.loads((tmp_path / "report.json").read_text())
        assert sorted(h for h, n in report["nodes"].items() if n["outcome"] == "resumed") == drifted
        for node in drifted:
            # the job ran to its end (its last line wrote the file): never killed by a reboot
            rc, out, _ = lab.exec(node, ["cat", f"/var/tmp/remediate-job-{jobs[node]}"])
            assert (rc, out) == (0, "finished\n"), output
            assert f"{node}: drain: gpuconf: drift: remove the GSP override" in output
            # still drained after its reboot, until verified: gpuconf resumed it, not Slurm
            assert f"{node}: resume" in output, output
        after = nodes(lab)
        assert all(after[n].state == "IDLE" and after[n].reason is None for n in drifted), after
        assert all(n.in_service for n in after.values()), after
        assert all(lab.exec(n, ["test", "-e", DRIFT_FILE])[0] == 1 for n in drifted)
        again = remediate(cluster, tmp_path / "state", "--max-unavailable", "1")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "drain" not in again.stdout and "in sync, in service: 6" in again.stdout
    finally:
        for node in lab.nodes:
            put_back(lab, node.name)


def test_a_node_drained_by_hand_stays_drained_and_is_reported(cluster, tmp_path):
    lab, _ = cluster
    node = "t4-03"
    try:
        drift(lab, node)
        done = lab.slurm(["scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=bob: fan replacement"])
        assert done.returncode == 0, done.stderr
        run = remediate(cluster, tmp_path / "state", "--max-unavailable", "2")
        assert run.returncode == 2, run.stdout + run.stderr
        assert "drained by someone else (left as they set it) (1):" in run.stdout and "bob: fan replacement" in run.stdout
        after = nodes(lab)[node]
        assert (after.state, after.reason) == ("IDLE+DRAIN", "bob: fan replacement")
        assert lab.exec(node, ["test", "-e", DRIFT_FILE])[0] == 0  # not applied either
    finally:
        put_back(lab, node)


def test_a_fault_that_survives_is_remediation_failed_and_the_fourth_a_lemon(cluster, tmp_path):
    lab, _ = cluster
    node, state = "t4-04", tmp_path / "state"
    try:
        rc, out, err = lab.fault(node, "xid", "63")  # a failure naming no action: nothing gpuconf does clears it
        assert rc == 0, out + err
        run = remediate(cluster, state, "--max-unavailable", "1")
        assert run.returncode == 6, run.stdout + run.stderr
        failed = nodes(lab)[node]
        assert failed.reason.startswith("gpuconf: remediation failed: failed: Xid errors since this boot"), failed
        assert not failed.in_service
        with History(state) as history:  # two more failures this week, seeded: three in all
            for days in (2, 3):
                history.add(node, node, "failed", "gpuconf: failed: Xid 63", "seeded",
                            started=time.time() - days * 86400)
        run = remediate(cluster, state, "--max-unavailable", "1")
        assert run.returncode == 6, run.stdout + run.stderr
        lemon = nodes(lab)[node]
        assert lemon.reason.startswith("gpuconf: lemon (3 remediations in 7d: "), lemon
        assert "lemons (left drained) (1):" in run.stdout
        shown = subprocess.run([sys.executable, "-m", "gpuconf", "history", node, "--state-dir", str(state),
                                "--format", "json"], capture_output=True, text=True, cwd=ROOT, timeout=60)
        outcomes = [r["outcome"] for r in json.loads(shown.stdout)["remediations"]]
        assert sorted(outcomes) == ["failed", "failed", "failed", "lemon"]
    finally:
        lab.reboot(node)  # the Xid is this boot's only
        lab.wait_ssh(node)
        put_back(lab, node)


def test_a_controller_killed_mid_wave_is_carried_on_by_the_next_run(cluster, tmp_path):
    lab, _ = cluster
    drifted, state = ["t4-01", "t4-06"], tmp_path / "state"
    try:
        for node in drifted:
            drift(lab, node)
        controller = remediate(cluster, state, "--max-unavailable", "1", popen=True)
        seen = []
        for line in controller.stdout:
            seen.append(line)
            if line.rstrip().endswith(": apply"):
                time.sleep(1.5)  # the reboot is under way
                break
        controller.send_signal(signal.SIGKILL)
        controller.wait(30)
        assert any(line.rstrip().endswith(": apply") for line in seen), "".join(seen)
        for name, node in nodes(lab).items():  # resumed, or drained with a gpuconf reason
            assert node.in_service or node.ours, (name, node)
        with History(state) as history:
            (left,) = history.open_records().values()
        assert left.step == "apply"
        run = remediate(cluster, state, "--max-unavailable", "1")
        assert run.returncode == 0, run.stdout + run.stderr
        assert f"{left.host}: journal: the last run stopped at 'apply'; carrying it on" in run.stdout
        assert all(n.state == "IDLE" and n.reason is None for n in nodes(lab).values()), nodes(lab)
        with History(state) as history:
            assert {h: [r.outcome for r in history.records(h)] for h in drifted} == \
                {h: ["resumed"] for h in drifted}  # the killed one counted once
            assert not history.open_records()
    finally:
        for node in drifted:
            put_back(lab, node)
