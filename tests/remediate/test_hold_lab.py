"""Issue 28 on the lab's real Slurm cluster: `remediate --check` changes nothing; an Xid the
catalog sends to NVIDIA support (58, FB_MEMORY_ERROR: contact_support) ends in a hardware hold,
which a second remediate and `check --slurm` leave drained and `gpuconf hardware` lists (its serial
is unknown here: the Slurm lab's nodes have no driver, so no nvidia-smi); and the circuit breaker stops the loop after two such nodes until a person resets it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.remediate.helpers import HEALTH, ROOT, SITE, drift, nodes, put_back

FAULTY_GPU = "0000:3b:00.0"  # the lab T4's GPU 0, where `fault xid` logs


def gpuconf(cluster, state: Path, *args: str):
    lab, path = cluster
    argv = [sys.executable, "-m", "gpuconf", *args, "--state-dir", str(state)]
    env = dict(os.environ, PATH=path, GPUCONF_REMEDIATE_POLL="0.3")
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=500)


def remediate(cluster, state: Path, *args: str):
    lab, _ = cluster
    return gpuconf(cluster, state, "remediate", SITE, "-i", lab.name, "--health", HEALTH, *args)


def slurm_view(lab) -> tuple[str, str]:
    shown = lab.slurm(["scontrol", "show", "node"])
    listed = lab.slurm(["sinfo", "--noheader", "-N", "-o", "%N %T %E"])
    assert shown.returncode == 0 and listed.returncode == 0, shown.stderr + listed.stderr
    # LastBusyTime and the like move on their own: compare the states and reasons Slurm keeps
    kept = [line for line in shown.stdout.splitlines() if line.strip().startswith(("NodeName=", "State=", "Reason="))]
    return "\n".join(kept), listed.stdout


def serial_of(lab, node: str) -> str:
    """The GPU's serial as nvidia-smi prints it; "" on the Slurm lab's nodes, which have no driver and
    so no nvidia-smi: the hold then says `serial unknown`."""
    rc, out, err = lab.exec(node, ["nvidia-smi", "--query-gpu=pci.bus_id,serial", "--format=csv,noheader"])
    if rc == 127:
        return ""
    assert rc == 0, err
    return next(line.split(",")[1].strip() for line in out.splitlines() if line.lower().startswith("00000000:3b"))


def clear(lab, node: str) -> None:
    lab.fault(node, "clear")
    lab.reboot(node)  # the Xid is this boot's only
    lab.wait_ssh(node)
    put_back(lab, node)


def test_remediate_check_prints_the_plan_and_changes_nothing(cluster, tmp_path):
    lab, _ = cluster
    faulty, drifted = "t4-01", "t4-02"
    try:
        rc, out, err = lab.fault(faulty, "xid", "79")
        assert rc == 0, out + err
        drift(lab, drifted)
        before = ({n.name: lab.digest(n.name) for n in lab.nodes}, slurm_view(lab))
        run = remediate(cluster, tmp_path / "state", "--check", "--max-unavailable", "1", "--breaker", "2")
        after = ({n.name: lab.digest(n.name) for n in lab.nodes}, slurm_view(lab))
        assert run.returncode == 2, run.stdout + run.stderr
        assert after == before, run.stdout
        lines = run.stdout.splitlines()
        assert any(line.startswith(f"{faulty}: reboot_node, decided by xid_catalog.csv: 79: GPU 0 ({FAULTY_GPU})")
                   for line in lines), run.stdout
        assert any(line.startswith(f"{drifted}: remediate: drain, wait, apply, verify, resume") for line in lines)
        assert "budget: --max-unavailable 1; 0 node(s) in scope out of service now; 2 more to take out, " \
               "1 in the first wave" in lines, run.stdout
        assert not (tmp_path / "state").exists()  # no lock, no history either
    finally:
        clear(lab, faulty)
        put_back(lab, drifted)


def test_a_contact_support_xid_is_a_hardware_hold_that_stays_held(cluster, tmp_path):
    """(A fault that survives the reboot ends the same way: tests/unit/remediate/test_hardware.py. The
    lab re-injects a sticky fault only once nvidia has loaded, and these nodes have no driver.)"""
    lab, path = cluster
    node, state = "t4-03", tmp_path / "state"
    try:
        rc, out, err = lab.fault(node, "xid", "58")
        assert rc == 0, out + err
        serial = serial_of(lab, node)
        run = remediate(cluster, state, "-l", node)
        assert run.returncode == 6, run.stdout + run.stderr
        assert f"{node}: hardware hold: contact_support (hold) from xid_catalog.csv: 58" in run.stdout, run.stdout
        assert f"{node}: apply" not in run.stdout and f"{node}: reboot" not in run.stdout, run.stdout
        reason = f"gpuconf: hardware: Xid 58 GPU {serial or 'serial unknown'} {FAULTY_GPU}"
        held = nodes(lab)[node]
        assert held.reason == reason and not held.in_service, (held, run.stdout)

        again = remediate(cluster, state, "-l", node)
        assert again.returncode == 6 and "still hardware holds (left drained) (1):" in again.stdout, again.stdout
        check = subprocess.run([sys.executable, "-m", "gpuconf", "check", HEALTH, "-i", lab.name, "-l", node,
                                "--slurm", "--no-retry-file"], cwd=ROOT, env=dict(os.environ, PATH=path),
                               capture_output=True, text=True, timeout=300)
        assert "Traceback" not in check.stderr, check.stderr
        assert nodes(lab)[node].reason == reason, check.stdout + check.stderr

        listed = gpuconf(cluster, state, "hardware", "--format", "json", "--scheduler")
        assert listed.returncode == 0, listed.stdout + listed.stderr
        (entry,) = json.loads(listed.stdout)["holds"]
        assert (entry["host"], entry["serial"], entry["pci"], entry["code"], entry["held"]) == (
            node, serial, FAULTY_GPU, "Xid 58", True), entry
    finally:
        clear(lab, node)


def test_the_breaker_stops_after_two_holds_until_it_is_reset(cluster, tmp_path):
    lab, _ = cluster
    faulty, state = ["t4-04", "t4-05", "t4-06"], tmp_path / "state"
    try:
        for node in faulty:
            rc, out, err = lab.fault(node, "xid", "58")
            assert rc == 0, out + err
        run = remediate(cluster, state, "--max-unavailable", "3", "--breaker", "2")
        assert run.returncode == 6, run.stdout + run.stderr
        held = [n for n in faulty if (nodes(lab)[n].reason or "").startswith("gpuconf: hardware: Xid 58")]
        assert len(held) == 2 and "circuit breaker tripped: 2 node(s)" in run.stdout, run.stdout
        (left,) = set(faulty) - set(held)
        assert nodes(lab)[left].in_service, run.stdout

        again = remediate(cluster, state, "--max-unavailable", "3", "--breaker", "2")
        assert again.returncode == 6 and "circuit breaker tripped" in again.stdout, again.stdout
        assert nodes(lab)[left].in_service, again.stdout
        reset = gpuconf(cluster, state, "remediate", "--reset-breaker")
        assert reset.returncode == 0 and "circuit breaker reset" in reset.stdout, reset.stdout + reset.stderr
    finally:
        for node in faulty:
            clear(lab, node)
