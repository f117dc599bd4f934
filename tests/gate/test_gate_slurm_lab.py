"""Acceptance (issue 28, item 5): with `gpuconf gate` as the lab's Prolog, an injected Xid makes the
next job's prolog fail. Slurm drains the node with gpuconf's reason (the gate drains it first, and
slurmctld keeps a reason a drained node has: 22.05 node_mgr.c, validate_node_specs) and requeues the
job, which then runs on another node (`SchedulerParameters=nohold_on_prolog_fail`; a requeued job
waits out the credential lifetime, `cred_expire`: 120 s by default, 20 s in the lab, docs/lab-slurm.md).

Two nodes get the driver (tests/gate/gate-driver.yml) and are reset to the image at the end; slurmd
runs scripts/gpuconf-gate as it would on a real node, which runs this checkout's gpuconf."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from gpuconf.scheduler.interface import Node
from gpuconf.scheduler.slurm import parse_show_node
from tests.lab_fixtures import slurm_idle, wait_until

ROOT = Path(__file__).resolve().parents[2]
FAULTY, OTHER = "t4-04", "t4-05"
TEST_REASON = "gate test: keep the first run on the faulty node"
REPORT = "/var/lib/gpuconf/gate-report.json"
SETTINGS = f"GPUCONF={shlex.quote(str(Path(sys.executable).with_name('gpuconf')))}\n" \
           "GPUCONF_GATE_ARGS=\"--driver-version 580.95.05\"\n"


def show(lab, node: str):
    done = lab.slurm(["scontrol", "show", "node", node])
    assert done.returncode == 0, done.stderr
    return parse_show_node(done.stdout)


def job(lab, job_id: str) -> dict[str, str]:
    done = lab.slurm(["scontrol", "show", "job", "-o", job_id])
    return dict(re.findall(r"(\w+)=(\S*)", done.stdout)) if done.returncode == 0 else {}


def gate_report(lab, node: str) -> dict:
    rc, out, _ = lab.exec(node, ["cat", REPORT])
    return json.loads(out) if rc == 0 and out.strip() else {}


def converge(lab, tmp_path: Path) -> None:
    report = tmp_path / "converge.json"
    done = subprocess.run([sys.executable, "-m", "gpuconf", "apply", str(ROOT / "tests/gate/gate-driver.yml"),
                           "-i", str(lab.inventory_path), "--limit", f"{FAULTY},{OTHER}", "--report", str(report)],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_an_xid_fails_the_next_prolog_drains_with_gpuconfs_reason_and_the_job_runs_elsewhere(slurm_lab, tmp_path):
    lab = slurm_lab
    others = [info.name for info in lab.nodes if info.name not in (FAULTY, OTHER)]
    try:
        converge(lab, tmp_path)
        for node in (FAULTY, OTHER):
            assert wait_until(lambda n=node: show(lab, n).state.split("+")[0] == "IDLE", 120, 1), show(lab, node)
            lab.exec(node, f"rm -f /var/lib/gpuconf/gate.json {REPORT}")
            rc, _, err = lab.exec(node, ["sh", "-c", "cat > /etc/default/gpuconf-gate"], input=SETTINGS)
            assert rc == 0, err
        lab.slurm_config(Prolog=str(ROOT / "scripts" / "gpuconf-gate"), SchedulerParameters="nohold_on_prolog_fail")

        # a healthy node passes its gate: the job runs
        first = lab.slurm(["sbatch", "--parsable", "--chdir=/tmp", "-w", FAULTY, "--wrap", "true"]).stdout.strip()
        assert wait_until(lambda: job(lab, first).get("JobState") == "COMPLETED", 60, 0.5), job(lab, first)
        # persistence mode is off on these nodes: a warning, which lets the job run
        assert gate_report(lab, FAULTY)["verdict"] == "WARNING", gate_report(lab, FAULTY)

        rc, out, err = lab.fault(FAULTY, "xid", "79")
        assert rc == 0, out + err
        # the other node is out of service for a moment, so that the job starts on the faulty one
        assert lab.slurm(["scontrol", "update", f"NodeName={OTHER}", "State=DRAIN",
                          f"Reason={TEST_REASON}"]).returncode == 0
        submitted = lab.slurm(["sbatch", "--parsable", "--chdir=/tmp", "--requeue", "--exclude", ",".join(others),
                               "--wrap", "hostname"])
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.strip()
        assert wait_until(lambda: show(lab, FAULTY).drained, 60, 0.5), (show(lab, FAULTY), job(lab, job_id))
        drained = show(lab, FAULTY)
        assert drained.reason.startswith("gpuconf: gate: GPU 0 (0000:3b:00.0): Xid 79"), drained
        assert Node(drained.name, drained.state, drained.reason).ours  # remediate takes it up as its own
        report = gate_report(lab, FAULTY)
        assert report["verdict"] == "CRITICAL" and report["slurm"]["action"] == "drain", report
        assert [f["action"] for f in report["findings"] if f["check"] == "xid"] == ["reboot_node"]
        assert wait_until(lambda: job(lab, job_id).get("Restarts") == "1", 30, 0.5), job(lab, job_id)
        assert job(lab, job_id)["JobState"] == "PENDING", job(lab, job_id)

        assert lab.slurm(["scontrol", "update", f"NodeName={OTHER}", "State=RESUME"]).returncode == 0
        # the requeued job starts once its credential's lifetime is over (the lab's cred_expire, 20 s), on the
        # other node
        assert wait_until(lambda: job(lab, job_id).get("JobState") == "COMPLETED", 200, 1), job(lab, job_id)
        assert job(lab, job_id)["NodeList"] == OTHER
        assert gate_report(lab, OTHER)["verdict"] == "WARNING"
        assert show(lab, FAULTY).reason == drained.reason  # Slurm's own "Prolog error" did not replace it
    finally:
        lab.slurm_config(Prolog=None, SchedulerParameters=None)
        lab.slurm(["scancel", "--full", "-w", f"{FAULTY},{OTHER}"])
        for node in (FAULTY, OTHER):
            lab.reset(node)
        for node in (FAULTY, OTHER):
            slurm_idle(lab, node, timeout=120)
