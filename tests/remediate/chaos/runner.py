"""One chaos scenario on a lab with real Slurm: the node `faulty` gets the scenario's fault, jobs,
operator, signal, gates and concurrent run while `gpuconf remediate` works on it and on `peer`; then
what is left is read back (`Observation`) for the invariants. The nodes need the driver
(tests/gate/gate-driver.yml): a sticky fault comes back only once nvidia has loaded, and a reset
needs nvidia-smi. Slurm's Prolog is the gate (scripts/gpuconf-gate), as on a cluster that runs it."""
from __future__ import annotations

import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from gpuconf.remediate.breaker import counted
from gpuconf.remediate.history import FAILED, HARDWARE, History
from gpuconf.remediate.ladder import NODE_ACTIONS
from gpuconf.scheduler.slurm import parse_nodes
from tests.lab_fixtures import slurm_idle, wait_until
from tests.paths import ROOT
from tests.remediate.chaos.invariants import Job, Line, Observation
from tests.remediate.chaos.scenario import Scenario
from tests.remediate.helpers import DRIFT_FILE, HEALTH, RELEASE, SITE

GPUCONF = [sys.executable, "-m", "gpuconf"]
DRAIN_TIMEOUT = "20s"
OPERATOR = "admin: chaos {seed}: hold for RMA"
GATE_SETTINGS = f"GPUCONF={shlex.quote(str(Path(sys.executable).with_name('gpuconf')))}\n"


def shim(lab, directory: Path) -> str:
    """A PATH whose scontrol is the lab cluster's (what SLURM_CONF and munge are on a login node)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scontrol").write_text(f"#!/bin/sh\nexec {shlex.join(lab.slurm_client_argv(['scontrol']))} \"$@\"\n")
    (directory / "scontrol").chmod(0o755)
    return f"{directory}:{os.environ['PATH']}"


def gate_prolog(lab, nodes: list[str], on: bool) -> None:
    """slurmd runs the gate before every job (tests/gate/test_gate_slurm_lab.py does the same)."""
    if on:
        for node in nodes:
            rc, _, err = lab.exec(node, ["sh", "-c", "cat > /etc/default/gpuconf-gate"], input=GATE_SETTINGS)
            assert rc == 0, err
        lab.slurm_config(Prolog=str(ROOT / "scripts" / "gpuconf-gate"), SchedulerParameters="nohold_on_prolog_fail")
    else:
        lab.slurm_config(Prolog=None, SchedulerParameters=None)


def node_state(lab, name: str):
    shown = lab.slurm(["scontrol", "show", "node"])
    return {n.name: n for n in parse_nodes(shown.stdout)}.get(name)


def boot_id(lab, node: str) -> str:
    rc, out, _ = lab.exec(node, ["cat", "/proc/sys/kernel/random/boot_id"])
    return out.strip() if rc == 0 else ""


def prepare(lab, nodes: list[str]) -> None:
    """Every node idle, in service, without a fault, its kernel log of this boot free of Xids."""
    for node in nodes:
        lab.slurm(["scancel", "--full", "-w", node])
        lab.fault(node, "clear")
        lab.exec(node, ["rm", "-f", DRIFT_FILE, RELEASE])
        rc, out, _ = lab.exec(node, ["sh", "-c", "dmesg | grep -c 'Xid' || true"])
        if out.strip() not in ("", "0"):
            before = boot_id(lab, node)
            lab.reboot(node)
            lab.wait_ssh(node, timeout=120)
            assert wait_until(lambda n=node, b=before: boot_id(lab, n) not in ("", b), 120, 1)
        slurm_idle(lab, node, timeout=180)


class Run:
    """One `gpuconf remediate` in the background, its lines read with their time."""

    def __init__(self, label: str, argv: list[str], env: dict[str, str], lines: list[Line], on_line=None):
        self.label, self.lines, self.on_line = label, lines, on_line
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for text in self.proc.stdout:
            line = Line(time.time(), self.label, text.rstrip("\n"))
            self.lines.append(line)
            if self.on_line is not None:
                self.on_line(self, line)

    def wait(self, timeout: float = 900) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.reader.join(10)
        return code


def step_of(node: str, text: str) -> str | None:
    """The remediation step a line of remediate's starts, for this node."""
    head = f"{node}: "
    if not text.startswith(head):
        return None
    rest = text[len(head):].removeprefix("recovery: ")
    word = re.split(r"[: ]", rest, maxsplit=1)[0]
    return word or None


def run_scenario(lab, scenario: Scenario, faulty: str, peer: str, work: Path) -> tuple[Observation, list[Line]]:
    rng = random.Random(scenario.seed ^ 0x5EED)
    path = shim(lab, work / "bin")
    env = dict(os.environ, PATH=path, GPUCONF_REMEDIATE_POLL="0.3")
    prepare(lab, [faulty, peer])
    boot = boot_id(lab, faulty)
    jobs: list[tuple[str, float]] = []
    if scenario.job != "none":
        # the job runs (its prolog, the gate, passed: its script started) before the fault is injected
        started = f"/tmp/chaos-job-{scenario.seed}"
        lab.exec(faulty, ["rm", "-f", started])
        wrap = f"touch {started}; " + ("sleep 3" if scenario.job == "short" else
                                       f"while [ ! -e {RELEASE} ]; do sleep 0.3; done")
        jobs.append((submit(lab, faulty, wrap), time.time()))
        assert wait_until(lambda: lab.exec(faulty, ["test", "-e", started])[0] == 0, 60, 0.3), \
            f"the scenario's job never started on {faulty}"
    if scenario.drift:
        lab.exec(faulty, ["sh", "-c", f"echo 'options nvidia NVreg_EnableGpuFirmware=0' > {DRIFT_FILE}"])
    injected = None
    if scenario.fault:
        extra = ["--sticky"] if scenario.sticky else []
        rc, out, err = lab.fault(faulty, "xid", scenario.fault, "--gpu", str(scenario.gpu), *extra)
        assert rc == 0, out + err
        injected = time.time()
    lines: list[Line] = []
    operator: dict[str, float | str] = {}
    signalled: list[str] = []
    operator_reason = OPERATOR.format(seed=scenario.seed)
    sig, _, sig_step = scenario.signal.partition("@")

    timers: list[threading.Timer] = []

    def person() -> None:
        lab.slurm(["scontrol", "update", f"NodeName={faulty}", "State=DRAIN", f"Reason={operator_reason}"])
        operator["at"] = time.time()

    def on_line(run: Run, line: Line) -> None:
        step = step_of(faulty, line.text)
        if step is None or run.label == "concurrent":
            return
        if scenario.operator == step and not operator:
            # a person acts during the step, not in the milliseconds between remediate's read of the node
            # and its own scontrol command: Slurm has no compare-and-set, so no tool can close those
            operator.update(reason=operator_reason)
            timers.append(threading.Timer(rng.uniform(0.5, 2.0), person))
            timers[-1].start()
        if sig and sig_step == step and not signalled and run.label == "main":
            signalled.append(step)
            run.proc.send_signal(signal.SIGINT if sig == "INT" else signal.SIGKILL)

    def argv(state: Path) -> list[str]:
        return [*GPUCONF, "remediate", SITE, "-i", lab.name, "--health", HEALTH, "-l", f"{faulty},{peer}",
                "--max-unavailable", "1", "--drain-timeout", DRAIN_TIMEOUT, "--breaker", "50%,2",
                "--state-dir", str(state)]

    side: list[threading.Thread] = []
    for _ in range(scenario.gates):  # prologs of other jobs, at once with the remediation
        delay = rng.uniform(0, 4)
        side.append(threading.Thread(target=lambda d=delay: (time.sleep(d), lab.exec(
            faulty, [str(Path(sys.executable).with_name("gpuconf")), "gate", "--slurm", "--node", faulty],
            timeout=60))))
    if scenario.late_job:
        delay = rng.uniform(0, 6)
        side.append(threading.Thread(target=lambda d=delay: (time.sleep(d), jobs.append(
            (submit(lab, faulty, "true"), time.time())))))
    main = Run("main", argv(work / "state"), env, lines, on_line)
    other = Run("concurrent", argv(work / "other"), env, lines, on_line) if scenario.concurrent else None
    for thread in side:
        thread.start()
    main.wait()
    if signalled:
        Run("rerun", argv(work / "state"), env, lines, on_line).wait()
    if other is not None:
        other.wait()
    for thread in [*side, *timers]:
        thread.join(120)
    lab.exec(faulty, ["touch", RELEASE])
    observation = observe(lab, scenario, faulty, work, boot, injected, lines, jobs, operator)
    (work / "lines.txt").write_text("".join(f"{line.at:.3f} {line.run}: {line.text}\n" for line in lines))
    (work / "observation.txt").write_text(repr(observation) + "\n")
    return observation, lines


def submit(lab, node: str, wrap: str) -> str:
    done = lab.slurm(["sbatch", "--parsable", "--chdir=/tmp", "-w", node, "--wrap", wrap])
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def job_info(lab, job_id: str) -> dict[str, str]:
    done = lab.slurm(["scontrol", "show", "job", "-o", job_id])
    return dict(re.findall(r"(\w+)=(\S*)", done.stdout)) if done.returncode == 0 else {}


def epoch(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def observe(lab, scenario: Scenario, faulty: str, work: Path, boot: str, injected: float | None,
            lines: list[Line], submitted: list[tuple[str, float]], operator: dict) -> Observation:
    final = {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "PREEMPTED", "OUT_OF_MEMORY"}
    wait_until(lambda: all(job_info(lab, j).get("JobState") in final | {"PENDING"} for j, _ in submitted), 60, 0.5)
    jobs = []
    for job_id, at in submitted:
        info = job_info(lab, job_id)
        pending = info.get("JobState") == "PENDING"
        if pending:
            lab.slurm(["scancel", job_id])
        started = epoch(info.get("StartTime", "")) if info.get("JobState") not in ("PENDING", None) else None
        jobs.append(Job(job_id, info.get("JobState", "?"), info.get("NodeList", ""), started, at, pending))
    node = node_state(lab, faulty)
    rc, log, _ = lab.exec(faulty, ["dmesg"])
    answered = bool(re.search(r"gpuconf: (GPU \S+ was reset|all GPUs were reset)", log.split("NVRM: Xid")[-1]))
    holds = []  # as `gpuconf hardware` lists them, from either run's state directory (the concurrent one may hold it)
    for state in ("state", "other"):
        if not (work / state / "history.sqlite3").exists():
            continue
        listed = subprocess.run([*GPUCONF, "hardware", "--format", "json", "--state-dir", str(work / state)],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        holds += [h["host"] for h in json.loads(listed.stdout)["holds"]]
    return Observation(scenario, faulty, injected, boot_id(lab, faulty) not in ("", boot), answered,
                       node is not None and node.in_service, node.reason if node else None,
                       operator.get("reason"), operator.get("at"), lines, holds, jobs,
                       [breaker(work / d) for d in ("state", "other") if (work / d / "history.sqlite3").exists()])


def breaker(state: Path) -> tuple[set[str], set[str]]:
    """What the breaker counts in a state directory, and the hosts whose journal has a hardware action."""
    with History(state, create=False) as history:
        records = history.records()
        needed = {r.host for r in records if r.outcome in (HARDWARE, FAILED) or r.action
                  or any(step in NODE_ACTIONS for _, step, _ in history.steps(r.id))}
        return {r.host for r in counted(records, 0, 86400, time.time() + 1)}, needed
