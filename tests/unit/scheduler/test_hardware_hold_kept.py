"""A hardware hold (`gpuconf: hardware: ...`) is gpuconf's reason, yet nothing of gpuconf's resumes it:
not `check --slurm` (run twice healthy, even with its memory naming that very drain), and not the
gate. Through the real CLI and the real `Slurm` scheduler, with the stand-in scontrol of
test_scheduler_step.py."""
from __future__ import annotations

import json

from gpuconf.gate import node as gate_node
from tests.unit.scheduler.test_step import NODE, check, cluster, node  # noqa: F401 - the fixture

REASON = "gpuconf: hardware: Xid 79 GPU 1650924060039 0000:3b:00.0"


def hold(cluster_dir, memory: bool) -> None:
    state = json.loads((cluster_dir / "node.json").read_text())
    state.update(state="IDLE+DRAIN", reason=REASON, clock=5)
    (cluster_dir / "node.json").write_text(json.dumps(state))
    if memory:  # the check believes it set this drain itself: still no resume
        (cluster_dir / "state").mkdir(exist_ok=True)
        (cluster_dir / "state" / "healthcheck.json").write_text(json.dumps(
            {"version": 1, "node": NODE, "reason": REASON, "stamp": "root@2026-12-04T08:00:05", "healthy": 1}))


def test_check_slurm_twice_healthy_leaves_a_hardware_hold_drained(cluster, capsys):  # noqa: F811
    hold(cluster, memory=True)
    for _ in range(2):
        code, out, report = check(capsys, cluster, healthy=True)
        assert code == 0 and report["slurm"][0]["action"] == "kept"
    assert (node(cluster)["state"], node(cluster)["reason"]) == ("IDLE+DRAIN", REASON)
    assert not [c for c in node(cluster)["calls"] if c[0] == "update"]


def test_check_slurm_with_a_failure_does_not_reword_a_hardware_hold(cluster, capsys):  # noqa: F811
    hold(cluster, memory=False)
    code, out, report = check(capsys, cluster, healthy=False)
    assert report["slurm"][0]["action"] == "kept" and node(cluster)["reason"] == REASON


def test_the_gate_keeps_a_hardware_hold(cluster):  # noqa: F811
    hold(cluster, memory=False)
    assert gate_node.drain(NODE, "gpuconf: gate: GPU 0: Xid 79") == {"action": "kept", "reason": REASON}
    assert node(cluster)["reason"] == REASON
    assert not [c for c in node(cluster)["calls"] if c[0] == "update"]
