"""Acceptance 5 (issue 16): gpuconf as the real slurmd's HealthCheckProgram, on every node of the
lab's Slurm cluster, every 15 s. An injected Xid drains its node within one interval; the reboot
that clears it returns the node to service after two healthy checks in a row, never after one.
Meanwhile a node that a person drained, and one that remediate set aside as a lemon, stay
drained with their reasons, and no healthy node is ever drained.

slurmd runs scripts/gpuconf-healthcheck as it would on a real node: as root, no arguments, no
environment but SLURMD_NODENAME; the wrapper runs this checkout's gpuconf with `-c local` and no
inventory, on the gpu_health role's Xid probe (the lab's nodes have no driver for the rest).
"""
from __future__ import annotations

import datetime
import json
import re
import shlex
import sys
import threading
from pathlib import Path

from gpuconf.scheduler.slurm import parse_show_node
from tests.lab_fixtures import slurm_idle, wait_until

ROOT = Path(__file__).resolve().parents[2]
INTERVAL = 15
FAULTY, PERSON, LEMON = "t4-06", "t4-02", "t4-03"
PERSONS_REASON = "bad DIMM, ticket 4411"
LEMONS_REASON = "gpuconf: lemon (4 remediations in 7 days)"
REPORT = "/var/lib/gpuconf/healthcheck-report.json"
SETTINGS = f"""\
GPUCONF={shlex.quote(str(Path(sys.executable).with_name("gpuconf")))}
GPUCONF_HEALTHCHECK_PLAYBOOK={shlex.quote(str(ROOT / "playbooks" / "gpu-health.yml"))}
GPUCONF_HEALTHCHECK_ARGS="--tags xid"
"""


def show(lab, node: str):
    done = lab.slurm(["scontrol", "show", "node", node])
    assert done.returncode == 0, done.stderr
    return parse_show_node(done.stdout)


def last_report(lab, node: str) -> dict | None:
    rc, out, _ = lab.exec(node, ["cat", REPORT])
    return json.loads(out) if rc == 0 and out.strip() else None


class Watch(threading.Thread):
    """Every health check run of some nodes (each run's JSON report, told apart by its start time),
    read once a second in the background for the whole test."""

    def __init__(self, lab, nodes: list[str]):
        super().__init__(daemon=True)
        self.lab, self.runs = lab, {node: {} for node in nodes}
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(1):
            for node, runs in self.runs.items():
                try:
                    report = last_report(self.lab, node)
                except Exception:  # noqa: BLE001 - the node is rebooting: read it next time
                    continue
                if report and report.get("slurm"):
                    runs.setdefault(report["started"], report["slurm"][0] | {"started": report["started"]})

    def of(self, node: str) -> list[dict]:
        return [self.runs[node][key] for key in sorted(self.runs[node])]

    def actions(self, node: str) -> list[str]:
        return [run["action"] for run in self.of(node)]


def started(run: dict) -> datetime.datetime:
    return datetime.datetime.fromisoformat(run["started"].replace("Z", "+00:00"))


def slurmd_log(lab, node: str = FAULTY) -> str:
    """What slurmd and slurmctld said about health checks, for a failure's message."""
    ours = lab.exec(node, "grep -i health /var/log/slurm/slurmd.log | tail -5")[1]
    controller = (lab.slurm_paths.log / "slurmctld.log").read_text().splitlines()
    return ours + "\n".join(line for line in controller if "health" in line.lower())[-2000:]


def controller_log_size(lab) -> int:
    return (lab.slurm_paths.log / "slurmctld.log").stat().st_size


def controller_updates(lab, node: str, since: int = 0) -> list[str]:
    """What slurmctld logged for state and reason updates of `node` (whoever sent them), from byte
    `since` of its log on: the session's Slurm lab is shared, and other tests drain this node too."""
    with open(lab.slurm_paths.log / "slurmctld.log", "rb") as handle:
        handle.seek(since)
        log = handle.read().decode(errors="replace")
    return re.findall(rf"update_node: node {re.escape(node)} (.*)", log)


def test_an_xid_drains_within_one_interval_and_two_healthy_checks_resume(slurm_lab):
    lab = slurm_lab
    nodes = [info.name for info in lab.nodes]
    watch = Watch(lab, [FAULTY, PERSON, LEMON])
    try:
        for node in nodes:
            lab.exec(node, "rm -f /var/lib/gpuconf/healthcheck.json " + REPORT)
            rc, _, err = lab.exec(node, ["sh", "-c", "cat > /etc/default/gpuconf-healthcheck"], input=SETTINGS)
            assert rc == 0, err
        assert lab.slurm(["scontrol", "update", f"NodeName={PERSON}", "State=DRAIN",
                          f"Reason={PERSONS_REASON}"]).returncode == 0
        assert lab.slurm(["scontrol", "update", f"NodeName={LEMON}", "State=DRAIN",
                          f"Reason={LEMONS_REASON}"]).returncode == 0
        lab.slurm_config(HealthCheckProgram=str(ROOT / "scripts" / "gpuconf-healthcheck"),
                         HealthCheckInterval=INTERVAL, HealthCheckNodeState="ANY")
        watch.start()
        # the check runs on every node, and finds them healthy: nothing is drained
        assert wait_until(lambda: all(last_report(lab, n) for n in nodes), 4 * INTERVAL, 1), \
            {n: last_report(lab, n) for n in nodes}
        assert last_report(lab, FAULTY)["slurm"][0]["action"] == "none" and not show(lab, FAULTY).drained

        injected = datetime.datetime.now(datetime.UTC)
        rc, out, err = lab.fault(FAULTY, "xid", "79")
        assert rc == 0, out + err
        assert wait_until(lambda: "drain" in watch.actions(FAULTY), 4 * INTERVAL, 0.5), \
            (watch.of(FAULTY), slurmd_log(lab))
        # within one interval: the first run that started after the fault drained the node
        runs = watch.of(FAULTY)
        first_after = next((n for n, run in enumerate(runs) if started(run) > injected), len(runs))
        assert [run["action"] for run in runs].index("drain") <= first_after, runs
        drained = show(lab, FAULTY)
        assert drained.reason.startswith("gpuconf: failed: Xid errors since this boot: GPU 0 (0000:3b:00.0): Xid 79")
        assert drained.state in ("IDLE+DRAIN", "DRAINED")

        lab.reboot(FAULTY)  # an Xid lasts until the next boot: the reboot clears it
        # slurmd runs the check once at its start, then every interval: healthy once is not enough
        assert wait_until(lambda: not show(lab, FAULTY).drained or "resume" in watch.actions(FAULTY),
                          6 * INTERVAL, 1), (watch.of(FAULTY), show(lab, FAULTY))
        assert wait_until(lambda: "resume" in watch.actions(FAULTY), 5, 0.5), watch.of(FAULTY)
        runs = watch.of(FAULTY)
        after = [run["action"] for run in runs[[r["action"] for r in runs].index("drain"):]]
        assert after[-2:] == ["wait", "resume"], runs
        assert runs[-2]["healthy"] == 1
        assert show(lab, FAULTY).reason is None
        assert controller_updates(lab, FAULTY)[-3:] == [f"reason set to: {drained.reason}", "state set to DRAINED",
                                                       "state set to IDLE"]

        # the drains it did not set: the checks ran on them all along, and left them as they were
        assert show(lab, PERSON).reason == PERSONS_REASON and show(lab, PERSON).drained
        assert show(lab, LEMON).reason == LEMONS_REASON and show(lab, LEMON).drained
        assert set(watch.actions(PERSON)) == {"kept"} and set(watch.actions(LEMON)) == {"kept"}
        assert len(watch.of(PERSON)) >= 3 and len(watch.of(LEMON)) >= 3
        for node in set(nodes) - {FAULTY, PERSON, LEMON}:
            assert not show(lab, node).drained, (node, show(lab, node))
    finally:
        watch.stopped.set()
        lab.slurm_config(HealthCheckProgram=None, HealthCheckInterval=None, HealthCheckNodeState=None)
        lab.fault(FAULTY, "clear")
        for node in nodes:
            lab.exec(node, "rm -f /etc/default/gpuconf-healthcheck /var/lib/gpuconf/healthcheck.json " + REPORT)
        for node in (FAULTY, PERSON, LEMON):
            slurm_idle(lab, node)
