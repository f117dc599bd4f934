"""The lab's real Slurm cluster: slurmctld on the machine, a real slurmd in every node.

Over real SSH into the nodes where the product goes that way (`scontrol` on a node), and
`Lab.slurm` (the machine's Slurm clients against the lab's slurmctld) elsewhere.
"""
from __future__ import annotations

import re

from gpuconf.scheduler.slurm import parse_show_node
from tests.lab_fixtures import SLURM_LAB_PROFILES, slurm_idle, slurm_node_state, ssh_client, ssh_run, wait_until


def show_node(lab, node: str) -> dict[str, str]:
    result = lab.slurm(["scontrol", "-o", "show", "node", node])
    assert result.returncode == 0, result.stderr
    return dict(token.split("=", 1) for token in result.stdout.split() if "=" in token)


def submit(lab, *args: str) -> str:
    result = lab.slurm(["sbatch", "--parsable", *args])
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def job_state(lab, job: str) -> str:
    return lab.slurm(["squeue", "--noheader", "-j", job, "-o", "%T"]).stdout.strip()


def ancestors(lab, node: str, pid: int) -> list[str]:
    """The command names above `pid` in the node, up to its PID 1."""
    rc, out, err = lab.exec(node, ["ps", "-eo", "pid=,ppid=,comm="])
    assert rc == 0, err
    table = {int(pid): (int(ppid), comm) for pid, ppid, comm in (line.split(None, 2) for line in out.splitlines())}
    names = []
    while pid in table and pid != 1:
        pid, name = table[pid]
        names.append(table.get(pid, (0, ""))[1])
    return names


def test_every_node_registers_with_what_its_own_slurmd_reports(slurm_lab):
    nodes = [info.name for info in slurm_lab.nodes]
    assert len(nodes) == sum(SLURM_LAB_PROFILES.values())
    listed = slurm_lab.slurm(["sinfo", "--noheader", "-N", "-o", "%N %P %T"])
    assert listed.returncode == 0, listed.stderr
    assert sorted(listed.stdout.split("\n")[:-1]) == sorted(f"{name} lab* idle" for name in nodes)
    rc, out, err = slurm_lab.exec(nodes[0], ["slurmd", "-C"])   # the node's own view of its hardware
    assert rc == 0, err
    reported = dict(token.split("=", 1) for token in out.split() if "=" in token)
    shown = show_node(slurm_lab, nodes[0])
    assert reported["NodeName"] == shown["NodeName"] == nodes[0]   # its hostname (UTS namespace)
    assert (reported["CPUs"], reported["RealMemory"]) == (shown["CPUTot"], shown["RealMemory"])
    assert shown["NodeAddr"] == slurm_lab.node(nodes[0]).address
    assert shown["State"] == "IDLE" and shown["Version"] == "22.05.8"


def test_a_job_runs_in_its_node_and_a_drain_waits_for_it_then_resumes(slurm_lab):
    node, other = "t4-02", "t4-03"
    try:
        job = submit(slurm_lab, "--chdir=/tmp", "-w", node, "--wrap", "sleep 300")
        assert wait_until(lambda: job_state(slurm_lab, job) == "RUNNING", 30, 0.2), job_state(slurm_lab, job)
        # the sleep is a process of that node (its pid namespace), started by its slurmstepd
        sleeping = lambda name: slurm_lab.exec(name, ["pgrep", "-x", "sleep"])[1].split()  # noqa: E731
        assert wait_until(lambda: len(sleeping(node)) == 1, 10)
        assert sleeping(other) == []
        assert "slurmstepd" in ancestors(slurm_lab, node, int(sleeping(node)[0]))

        # as the product does: scontrol on a node, over SSH, as the admin user with sudo
        client = ssh_client(slurm_lab, other)
        try:
            rc, _, err = ssh_run(client, f"sudo scontrol update NodeName={node} State=DRAIN "
                                         f"Reason='gpuconf: drift: test'")
            assert rc == 0, err
            rc, out, err = ssh_run(client, f"scontrol show node {node}")
            assert rc == 0, err
        finally:
            client.close()
        state = parse_show_node(out)
        assert (state.state, state.reason) == ("MIXED+DRAIN", "gpuconf: drift: test")
        assert slurm_node_state(slurm_lab, node) == "draining"   # the job still runs
        assert job_state(slurm_lab, job) == "RUNNING"

        assert slurm_lab.slurm(["scancel", job]).returncode == 0
        assert wait_until(lambda: slurm_node_state(slurm_lab, node) == "drained", 30, 0.2)
        assert sleeping(node) == []
        assert re.search(r"Reason=gpuconf: drift: test \[root@", slurm_lab.slurm(
            ["scontrol", "show", "node", node]).stdout)

        assert slurm_lab.slurm(["scontrol", "update", f"NodeName={node}", "State=RESUME"]).returncode == 0
        assert wait_until(lambda: slurm_node_state(slurm_lab, node) == "idle", 30, 0.2)
    finally:
        slurm_idle(slurm_lab, node)
