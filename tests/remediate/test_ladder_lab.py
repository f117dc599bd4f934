"""Issue 28's ladder on the lab's real Slurm cluster (acceptance 1-4 and 8), on two T4 nodes given
the driver first (tests/gate/gate-driver.yml: nvidia-smi answers, a reset can be tried, serials
can be read) and reset to the image at the end.

* Xid 119 under a running job: drain, the job ends normally, the evidence bundle, `nvidia-smi -r`
  (no reboot: the boot id is the same), verified, resumed; the history has reset_gpu and the bundle.
* A GPU off the bus (Xid 79): straight to `scontrol reboot`, no reset tried.
* A process holding the GPU: the reset is refused with nvidia-smi's words, then the reboot.
* A sticky Xid 119 (failed hardware): reset, still there, reboot, still there: a hardware hold that
  a second remediate and `check --slurm` leave drained, and `gpuconf hardware` lists with its serial.
* The controller SIGKILLed during the reset, then run again: the node ends resumed, under one
  history record.
* Xid 94 (restart_app): reported, the node left in service; again within the hour: a GPU reset.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.lab_fixtures import slurm_idle, wait_until
from tests.remediate.chaos.found import kept
from tests.remediate.chaos.invariants import violations
from tests.remediate.chaos.runner import gate_prolog, run_scenario
from tests.remediate.chaos.scenario import Scenario
from tests.remediate.helpers import DRIFT_FILE, HEALTH, RELEASE, ROOT, nodes

SITE = "tests/gate/gate-driver.yml"
A, B = "t4-04", "t4-05"
BUS = "00000000:3B:00.0"


def gpuconf(cluster, state: Path, *args: str, popen: bool = False):
    lab, path = cluster
    argv = [sys.executable, "-m", "gpuconf", *args, "--state-dir", str(state)]
    env = dict(os.environ, PATH=path, GPUCONF_REMEDIATE_POLL="0.3")
    if popen:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def remediate(cluster, state: Path, *args: str, popen: bool = False):
    lab, _ = cluster
    return gpuconf(cluster, state, "remediate", SITE, "-i", lab.name, "--health", HEALTH, "--max-unavailable", "2",
                   *args, popen=popen)


def boot_id(lab, node: str) -> str:
    rc, out, err = lab.exec(node, ["cat", "/proc/sys/kernel/random/boot_id"])
    assert rc == 0, err
    return out.strip()


def fault(lab, node: str, *args: str) -> None:
    rc, out, err = lab.fault(node, *args)
    assert rc == 0, out + err


def history(cluster, state: Path, node: str) -> list[dict]:
    shown = gpuconf(cluster, state, "history", node, "--format", "json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return json.loads(shown.stdout)["remediations"]


def put_back(lab, node: str) -> None:
    lab.fault(node, "clear")
    lab.exec(node, ["rm", "-f", RELEASE])
    if not nodes(lab)[node].in_service:
        lab.slurm(["scontrol", "update", f"NodeName={node}", "State=RESUME"])
    slurm_idle(lab, node, timeout=120)


@pytest.fixture(scope="module")
def driver_nodes(cluster, tmp_path_factory):
    lab, _ = cluster
    report = tmp_path_factory.mktemp("converge") / "converge.json"
    done = subprocess.run([sys.executable, "-m", "gpuconf", "apply", str(ROOT / SITE), "-i", str(lab.inventory_path),
                           "--limit", f"{A},{B}", "--report", str(report)],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    for node in (A, B):
        slurm_idle(lab, node, timeout=120)
    yield lab
    for node in (A, B):
        lab.reset(node)
    for node in (A, B):
        slurm_idle(lab, node, timeout=120)


def test_a_reset_under_a_job_and_a_gpu_off_the_bus(cluster, driver_nodes, tmp_path):
    lab, state = driver_nodes, tmp_path / "state"
    try:
        job = lab.slurm(["sbatch", "--parsable", "--chdir=/tmp", "-w", A, "--wrap",
                         f"while [ ! -e {RELEASE} ]; do sleep 0.3; done"])
        assert job.returncode == 0, job.stderr
        job_id = job.stdout.strip()
        assert wait_until(lambda: nodes(lab)[A].busy, 30, 0.3)
        boots = {n: boot_id(lab, n) for n in (A, B)}
        fault(lab, A, "xid", "119")
        fault(lab, B, "fallen-off-bus")
        controller = remediate(cluster, state, "-l", f"{A},{B}", "--drain-timeout", "3m", popen=True)
        seen = []
        for line in controller.stdout:
            seen.append(line)
            if line.startswith(f"{A}: wait: jobs still running"):
                break
        assert nodes(lab)[A].reason.startswith("gpuconf: "), "".join(seen)
        lab.exec(A, ["touch", RELEASE])  # the job ends normally
        output = "".join(seen) + controller.stdout.read()
        assert controller.wait(400) == 0, output
        shown = lab.slurm(["scontrol", "show", "job", job_id])
        assert "JobState=COMPLETED" in shown.stdout, shown.stdout + shown.stderr

        lines = output.splitlines()
        assert f"{A}: reset: GPU {BUS} was successfully reset." in lines, output
        assert not any(line.startswith((f"{A}: reboot", f"{A}: recovery: reboot")) for line in lines), output
        assert boot_id(lab, A) == boots[A] and nodes(lab)[A].in_service
        (record,) = history(cluster, state, A)
        assert record["outcome"] == "resumed" and Path(record["bundle"]).is_file(), record
        resets = [s["detail"] for s in record["steps"] if s["step"] == "reset"]
        assert resets[0].startswith("reset_gpu (reset) from xid_catalog.csv: 119"), record["steps"]
        with tarfile.open(record["bundle"]) as bundle:
            assert "bundle/nvidia-smi-q.txt" in bundle.getnames()

        assert not any(line.startswith((f"{B}: recovery: reset", f"{B}: reset")) for line in lines), output
        assert f"{B}: reboot" in lines and boot_id(lab, B) != boots[B] and nodes(lab)[B].in_service, output
    finally:
        lab.slurm(["scancel", "--full", "-w", A])
        for node in (A, B):
            put_back(lab, node)


def test_a_refused_reset_reboots_and_a_sticky_fault_ends_held(cluster, driver_nodes, tmp_path):
    lab, state = driver_nodes, tmp_path / "state"
    try:
        boots = {n: boot_id(lab, n) for n in (A, B)}
        fault(lab, A, "gpu-process")
        fault(lab, A, "xid", "119")
        fault(lab, B, "xid", "119", "--sticky")
        run = remediate(cluster, state, "-l", f"{A},{B}")
        output = run.stdout + run.stderr
        assert run.returncode == 6, output
        lines = run.stdout.splitlines()
        assert any(line.startswith(f"{A}: reset: refused: The following GPUs could not be reset:") for line in lines), \
            output
        assert f"{A}: reboot" in lines and boot_id(lab, A) != boots[A] and nodes(lab)[A].in_service, output

        assert f"{B}: reset: GPU {BUS} was successfully reset." in lines, output
        assert f"{B}: reboot" in lines and boot_id(lab, B) != boots[B], output
        rc, out, err = lab.exec(B, ["nvidia-smi", "--query-gpu=pci.bus_id,serial", "--format=csv,noheader"])
        serial = next(line.split(",")[1].strip() for line in out.splitlines() if line.startswith(BUS))
        reason = f"gpuconf: hardware: Xid 119 GPU {serial} 0000:3b:00.0"
        assert nodes(lab)[B].reason == reason and not nodes(lab)[B].in_service, output

        again = remediate(cluster, state, "-l", B)
        assert again.returncode == 6 and "still hardware holds (left drained) (1):" in again.stdout, again.stdout
        check = subprocess.run([sys.executable, "-m", "gpuconf", "check", HEALTH, "-i", lab.name, "-l", B, "--slurm",
                                "--no-retry-file"], cwd=ROOT, env=dict(os.environ, PATH=cluster[1]),
                               capture_output=True, text=True, timeout=300)
        assert "Traceback" not in check.stderr, check.stderr
        assert nodes(lab)[B].reason == reason, check.stdout + check.stderr
        listed = gpuconf(cluster, state, "hardware", "--format", "json")
        (entry,) = json.loads(listed.stdout)["holds"]
        assert (entry["host"], entry["serial"], entry["code"]) == (B, serial, "Xid 119") and entry["bundle"], entry
    finally:
        for node in (A, B):
            put_back(lab, node)
            lab.reboot(node)  # this boot's Xids go with it
            lab.wait_ssh(node)
            slurm_idle(lab, node, timeout=120)


def test_a_controller_killed_during_the_reset_is_carried_on_by_the_next_run(cluster, driver_nodes, tmp_path):
    lab, state = driver_nodes, tmp_path / "state"
    try:
        units = lab.exec(A, ["systemctl", "is-active", "nvidia-persistenced"])[1].strip()
        fault(lab, A, "xid", "119")
        controller = remediate(cluster, state, "-l", A, popen=True)
        seen = []
        for line in controller.stdout:
            seen.append(line)
            if line.startswith(f"{A}: recovery: reset"):
                controller.send_signal(signal.SIGKILL)
                break
        controller.wait(30)
        assert any(line.startswith(f"{A}: recovery: reset") for line in seen), "".join(seen)
        assert nodes(lab)[A].reason.startswith("gpuconf: "), "".join(seen)

        rerun = remediate(cluster, state, "-l", A)
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        assert f"{A}: journal: the last run stopped at 'reset'; carrying it on" in rerun.stdout, rerun.stdout
        assert nodes(lab)[A].in_service, rerun.stdout
        (record,) = history(cluster, state, A)  # one record for the one remediation
        assert record["outcome"] in ("resumed", "verified"), record
        assert lab.exec(A, ["systemctl", "is-active", "nvidia-persistenced"])[1].strip() == units
    finally:
        put_back(lab, A)


def test_restart_app_stays_in_service_and_a_repeat_is_escalated_to_a_reset(cluster, driver_nodes, tmp_path):
    lab, state = driver_nodes, tmp_path / "state"
    try:
        boot = boot_id(lab, A)
        fault(lab, A, "xid", "94")
        first = remediate(cluster, state, "-l", A)
        assert first.returncode == 2, first.stdout + first.stderr
        assert "restart_app reported (the application's fault: left in service) (1):" in first.stdout, first.stdout
        assert nodes(lab)[A].in_service and f"{A}: drain" not in first.stdout
        fault(lab, A, "xid", "94")  # the application failed on it again, within the hour
        second = remediate(cluster, state, "-l", A)
        assert second.returncode == 0, second.stdout + second.stderr
        assert f"{A}: restart_app again within 1h: escalated to reset_gpu" in second.stdout
        assert f"{A}: reset: GPU {BUS} was successfully reset." in second.stdout.splitlines(), second.stdout
        assert nodes(lab)[A].in_service and boot_id(lab, A) == boot
        assert [r["outcome"] for r in history(cluster, state, A)] == ["reported", "resumed"]
    finally:
        put_back(lab, A)


def wait_rebooted(lab, node: str, before: str) -> None:
    def back() -> bool:
        rc, out, _ = lab.exec(node, ["cat", "/proc/sys/kernel/random/boot_id"])
        return rc == 0 and out.strip() != before and not nodes(lab)[node].rebooting
    assert wait_until(back, 240, 1), nodes(lab)[node]


def test_a_fault_that_survives_two_slurm_reboots_is_held_whatever_slurm_wrote(cluster, driver_nodes, tmp_path):
    """Issue 35, HIGH 1, on the real Slurm 22.05.8. Two plain `scontrol reboot`s of a drained node leave
    it the bare reason "reboot issued" (set_node_reboot_reason, src/slurmctld/node_mgr.c). The ladder's
    reboot for a sticky Xid 79 and the apply's own (site.yml's GSP drift asks for one) are two such
    reboots: the node ends held by gpuconf all the same, listed by `gpuconf hardware`."""
    lab, state = driver_nodes, tmp_path / "state"
    try:
        assert lab.slurm(["scontrol", "update", f"NodeName={B}", "State=DRAIN", "Reason=gpuconf: test"]).returncode == 0
        reasons = []
        for _ in range(2):
            before = boot_id(lab, B)
            assert lab.slurm(["scontrol", "reboot", B]).returncode == 0
            wait_rebooted(lab, B, before)
            reasons.append(nodes(lab)[B].reason)
        assert reasons == ["gpuconf: test : reboot issued", "reboot issued"], reasons

        fault(lab, A, "xid", "79", "--sticky")
        rc, _, err = lab.exec(A, ["sh", "-c", f"echo 'options nvidia NVreg_EnableGpuFirmware=0' > {DRIFT_FILE}"])
        assert rc == 0, err
        run = gpuconf(cluster, state, "remediate", "tests/remediate/site.yml", "-i", lab.name, "--health", HEALTH,
                      "-l", A)
        assert run.returncode == 6, run.stdout + run.stderr
        assert run.stdout.count(f"{A}: reboot") == 2, run.stdout
        held = nodes(lab)[A]
        assert held.reason.startswith("gpuconf: hardware: Xid 79 GPU ") and not held.in_service, (held, run.stdout)
        listed = gpuconf(cluster, state, "hardware", "--format", "json")
        assert [h["host"] for h in json.loads(listed.stdout)["holds"]] == [A], listed.stdout
    finally:
        lab.exec(A, ["rm", "-f", DRIFT_FILE])
        for node in (A, B):
            put_back(lab, node)
        before = boot_id(lab, A)
        lab.reboot(A)  # the sticky Xid's lines are this boot's
        lab.wait_ssh(A)
        wait_rebooted(lab, A, before)
        slurm_idle(lab, A, timeout=120)


# Issue 35's generated scenarios (tests/remediate/chaos/, `make chaos` runs many): a fixed few here,
# and every minimised scenario that once broke an invariant, replayed.
FIXED = [
    Scenario(101, fault="79", sticky=True, drift=True, signal="KILL@reboot"),  # killed mid-reboot, then the hold
    Scenario(102, fault="48", job="short", operator="reset", gates=2, late_job=True, concurrent=True),
]


@pytest.mark.parametrize("scenario", FIXED + kept(), ids=lambda s: f"seed-{s.seed}")
def test_a_chaos_scenario_keeps_the_invariants(cluster, driver_nodes, tmp_path, scenario):
    lab = driver_nodes
    gate_prolog(lab, [A, B], True)
    try:
        observation, lines = run_scenario(lab, scenario, A, B, tmp_path)
        assert violations(observation) == [], "\n".join(f"{line.run}: {line.text}" for line in lines)
    finally:
        gate_prolog(lab, [A, B], False)
        for node in (A, B):
            put_back(lab, node)
