"""The Slurm rules without a host: scontrol's output parsed, NHC's ownership rule applied.

The lab test (tests/slurm/test_check_slurm.py) runs the same code against the lab's real Slurm over SSH.
"""
from __future__ import annotations

import pytest

from gpuconf.results import ChangeReport, HostResult, Status, TaskResult
from gpuconf.scheduler.healthcheck import decide, drain_reason
from gpuconf.scheduler.interface import Node
from gpuconf.scheduler.slurm import Slurm, parse_show_node

SHOW = """NodeName=gpu017 Arch=x86_64 CoresPerSocket=32
   CPUAlloc=64 CPUEfctv=128 CPUTot=128 CPULoad=31.02
   AvailableFeatures=a100,ib
   ActiveFeatures=a100,ib
   Gres=gpu:a100:8(S:0-1)
   NodeAddr=gpu017 NodeHostName=gpu017 Version=23.02.7
   OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)
   RealMemory=1031000 AllocMem=512000 FreeMem=400112 Sockets=2 Boards=1
   State=MIXED+DRAIN ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=gpu
   BootTime=2024-05-01T10:00:00 SlurmdStartTime=2024-05-01T10:01:12
   LastBusyTime=2024-05-02T11:00:00 ResumeAfterTime=None
   CfgTRES=cpu=128,mem=1031000M,billing=128,gres/gpu=8
   AllocTRES=cpu=64,mem=500G,gres/gpu=4
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=gpuconf: drift: start nvidia-fabricmanager [root@2024-05-02T11:05:00]

"""


def test_parse_the_multi_line_form():
    node = parse_show_node(SHOW)
    assert (node.name, node.state, node.reason) == ("gpu017", "MIXED+DRAIN",
                                                    "gpuconf: drift: start nvidia-fabricmanager")
    assert node.stamp == "root@2024-05-02T11:05:00"  # who set the reason and when: the check's proof of its drain
    assert node.drained and node.ours and not node.held


def test_parse_the_one_line_form_and_a_node_without_reason():
    one = " ".join(line.strip() for line in SHOW.splitlines() if line.strip())
    assert parse_show_node(one).reason == "gpuconf: drift: start nvidia-fabricmanager"
    assert parse_show_node(one).stamp == "root@2024-05-02T11:05:00"
    idle = parse_show_node("NodeName=n1 Arch=x86_64\n   State=IDLE ThreadsPerCore=2\n")
    assert (idle.state, idle.reason, idle.stamp, idle.drained) == ("IDLE", None, None, False)
    assert parse_show_node("NodeName=n1\n   State=DOWN*+DRAIN\n   Reason=Not responding [slurm@2024]").drained


def test_output_that_is_not_scontrols_is_refused():
    with pytest.raises(ValueError, match="not the output of scontrol"):
        parse_show_node("Node n1 not found")


@pytest.mark.parametrize("reason, state, current, expected", [
    ("gpuconf: drift: x", "IDLE", None, "drain"),
    ("gpuconf: drift: x", "IDLE+DRAIN", "gpuconf: drift: x", "none"),       # already, for this reason
    ("gpuconf: drift: y", "IDLE+DRAIN", "gpuconf: drift: x", "drain"),      # ours: the reason is updated
    ("gpuconf: drift: x", "IDLE+DRAIN", "bad DIMM, ticket 4411", "kept"),   # an operator's drain stays
    (None, "IDLE+DRAIN", "gpuconf: drift: x", "resume"),
    (None, "MIXED+DRAIN", "bad DIMM, ticket 4411", "kept"),                 # never undone
    (None, "IDLE", None, "none"),
    (None, "DOWN+DRAIN", "gpuconf:failed", "resume"),
    # remediate's verdicts wait for a person or a verifying remediate: neither resumed nor overwritten
    (None, "IDLE+DRAIN", "gpuconf: remediation failed: xid 79 after reboot", "kept"),
    (None, "IDLE+DRAIN", "gpuconf: lemon (4 remediations in 7 days)", "kept"),
    ("gpuconf: drift: x", "IDLE+DRAIN", "gpuconf: lemon (4 remediations in 7 days)", "kept"),
])
def test_ownership_rule(reason, state, current, expected):
    assert decide(reason, Node("n1", state, current)) == expected


def test_reason_is_short_and_names_the_first_problem():
    host = HostResult("n1", [
        TaskResult("n1", "p", "fabric manager", Status.WOULD_CHANGE, changes=[ChangeReport("start nvidia-fabricmanager")]),
        TaskResult("n1", "p", "dkms", Status.WOULD_CHANGE, changes=[ChangeReport("build nvidia/535 for 6.1.0-99")]),
    ])
    assert drain_reason(host) == "gpuconf: drift: start nvidia-fabricmanager (+1 more)"
    host.tasks.append(TaskResult("n1", "p", "gpu count", Status.UNKNOWN, error="nvidia-smi timed out\nmore"))
    assert drain_reason(host) == "gpuconf: unknown: gpu count: nvidia-smi timed out"
    host.tasks[-1].error = "x" * 500
    assert len(drain_reason(host)) == 120
    assert drain_reason(HostResult("n2", [TaskResult("n2", "p", "t", Status.OK)])) is None


def test_the_reason_is_one_argument_of_scontrol_update():
    sent = []

    def run(argv, timeout):
        sent.append(argv)
        return 0, "", ""
    Slurm(run).drain("n1", "gpuconf: drift: a 'b'")
    Slurm(run).resume("n1")
    assert sent == [["scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=gpuconf: drift: a 'b'"],
                    ["scontrol", "update", "NodeName=n1", "State=RESUME"]]
