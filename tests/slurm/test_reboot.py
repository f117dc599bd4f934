"""Reboots and Slurm: `scontrol reboot` runs the node's (simulated) reboot through slurmd's
RebootProgram, and slurmctld sees the new boot time that the node's fresh clocks give."""
from __future__ import annotations

import time

from tests.lab_fixtures import slurm_idle, slurm_node_state, wait_until
from tests.slurm.test_cluster import job_state, show_node, submit

NODE = "t4-06"


def stamp(epoch: float) -> str:
    """Slurm's time format (local time, whole seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def boots(lab, node: str) -> int:
    return int(lab.node_state(node).get("boots", 0))


def test_reboot_asap_waits_for_the_job_then_the_node_comes_back_resumed_with_a_new_boot_time(slurm_lab):
    lab = slurm_lab
    try:
        first = show_node(lab, NODE)
        booted = boots(lab, NODE)
        job = submit(lab, "--chdir=/tmp", "-w", NODE, "--wrap", "sleep 300")
        assert wait_until(lambda: job_state(lab, job) == "RUNNING", 30, 0.2)
        asked = time.time()
        reboot = lab.slurm(["scontrol", "reboot", "ASAP", "nextstate=RESUME", "reason=gpuconf: test reboot", NODE])
        assert reboot.returncode == 0, reboot.stderr
        shown = show_node(lab, NODE)
        assert {"DRAIN", "REBOOT_REQUESTED"} <= set(shown["State"].split("+")), shown["State"]
        time.sleep(1.0)
        assert boots(lab, NODE) == booted and job_state(lab, job) == "RUNNING"   # the job is never killed

        assert lab.slurm(["scancel", job]).returncode == 0
        assert wait_until(lambda: boots(lab, NODE) == booted + 1, 30, 0.1)   # slurmd ran RebootProgram
        assert wait_until(lambda: slurm_node_state(lab, NODE) == "idle", 60, 0.2), slurm_node_state(lab, NODE)
        after = show_node(lab, NODE)
        assert after["State"] == "IDLE" and "Reason" not in after   # nextstate=RESUME: drain and reason gone
        assert after["BootTime"] > first["BootTime"] and after["BootTime"] >= stamp(asked)
        rc, out, _ = lab.exec(NODE, ["cat", "/proc/uptime"])
        assert rc == 0 and float(out.split()[0]) < time.time() - asked + 1   # the node's clocks restarted
        assert lab.exec(NODE, ["systemctl", "is-active", "slurmd", "munge"])[1].split() == ["active", "active"]
    finally:
        slurm_idle(lab, NODE)


def test_reboot_with_nextstate_down_leaves_the_node_down_with_its_reason(slurm_lab):
    lab = slurm_lab
    try:
        booted = boots(lab, NODE)
        reboot = lab.slurm(["scontrol", "reboot", "nextstate=DOWN", "reason=maintenance", NODE])
        assert reboot.returncode == 0, reboot.stderr
        assert wait_until(lambda: boots(lab, NODE) == booted + 1, 30, 0.1)
        assert wait_until(lambda: slurm_node_state(lab, NODE) == "down", 60, 0.2), slurm_node_state(lab, NODE)
        reason = lab.slurm(["sinfo", "--noheader", "-N", "-n", NODE, "-o", "%E"]).stdout.strip()
        assert reason == "maintenance : reboot issued : reboot complete"
        assert lab.slurm(["scontrol", "update", f"NodeName={NODE}", "State=RESUME"]).returncode == 0
        assert wait_until(lambda: slurm_node_state(lab, NODE) == "idle", 30, 0.2)
    finally:
        slurm_idle(lab, NODE)


def test_a_reboot_from_inside_the_node_restarts_slurmd_and_the_node_returns_to_service(slurm_lab):
    lab = slurm_lab
    try:
        first = show_node(lab, NODE)["BootTime"]
        booted = boots(lab, NODE)
        time.sleep(1.0)   # Slurm's boot time has whole seconds
        lab.reboot(NODE)   # what `reboot` in the node does
        assert wait_until(lambda: boots(lab, NODE) == booted + 1, 30, 0.1)
        assert wait_until(lambda: show_node(lab, NODE)["BootTime"] > first, 60, 0.2)
        assert wait_until(lambda: slurm_node_state(lab, NODE) == "idle", 60, 0.2), slurm_node_state(lab, NODE)
    finally:
        slurm_idle(lab, NODE)


def test_a_reset_node_gets_its_slurm_units_again_and_registers(slurm_lab):
    lab, node = slurm_lab, "t4-05"
    try:
        first = show_node(lab, node)["BootTime"]
        time.sleep(1.0)   # Slurm's boot time has whole seconds
        lab.reset(node)   # a fresh filesystem: the Slurm units and the key are written again
        assert wait_until(lambda: show_node(lab, node)["BootTime"] > first, 60, 0.2)   # its slurmd registered
        assert wait_until(lambda: slurm_node_state(lab, node) == "idle", 60, 0.2), slurm_node_state(lab, node)
        assert lab.exec(node, ["systemctl", "is-active", "slurmd", "munge"])[1].split() == ["active", "active"]
        assert lab.exec(node, ["systemctl", "is-enabled", "slurmctld"])[1].strip() == "masked"
    finally:
        slurm_idle(lab, node)
