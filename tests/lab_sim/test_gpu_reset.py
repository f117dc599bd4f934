"""The lab follows the real tools where GPU recovery acts (issue 28, item 7): ``nvidia-smi -r``
refuses while a process holds the device, in the real tool's words and exit code; a reset
clears a reset-recoverable fault (Xid 48, Xid 119, a pending Reset recovery action) but not
a GPU that fell off the bus or a pending reboot, which end with the boot; a sticky fault
survives reboots and resets, like failed hardware; the IMEX daemon can be restarted."""
from __future__ import annotations

import pytest

from gpuconf.facts.imex import parse_imex_ctl_nodes
from gpuconf.facts.nvidia.csv import parse_query_csv
from gpuconf.facts.xid import parse_xid_events
from tests.lab_sim.test_imex import tray

# nvidia-smi's refusal as public captures print it (ComputeCanada/puppet-magic_castle#387;
# exit 255 in NVIDIA/NVSentinel#1690), for the A100 profile's GPU 1
REFUSAL = ("\nThe following GPUs could not be reset:\n  GPU 00000000:0F:00.0: In use by another client\n\n"
           "1 device is currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
           "application, graphics application such as an X server, or a monitoring application such as another "
           "instance of nvidia-smi). Please first kill all processes using this device and all compute "
           "applications running in the system.\n")


@pytest.fixture
def gpu_node(make_node):
    return make_node("a100", driver="535.104.05")   # nothing holds its GPUs: tests add holders


def recovery(node, gpu: str) -> str:
    done = node.smi("--query-gpu=gpu_recovery_action", "--format=csv,noheader", "-i", gpu)
    assert done.returncode == 0, done.stdout
    return done.stdout.strip()


def test_a_reset_is_refused_while_a_process_holds_the_gpu_then_clears_xid_48(gpu_node):
    gpu_node.run("fault", "xid", "48", "--gpu", "1", check=True)
    assert recovery(gpu_node, "1") == "Reset" and recovery(gpu_node, "0") == "None"
    gpu_node.run("fault", "gpu-process", "--gpu", "1", "--name", "python3", check=True)
    apps = parse_query_csv(gpu_node.smi("--query-compute-apps=pid,process_name,gpu_bus_id", "--format=csv").stdout)
    assert [(row["process_name"], row["gpu_bus_id"]) for row in apps.rows] == [("python3", "00000000:0F:00.0")]
    refused = gpu_node.smi("-r", "-i", "1")
    assert (refused.returncode, refused.stdout) == (255, REFUSAL)
    assert recovery(gpu_node, "1") == "Reset"                       # nothing was reset
    gpu_node.run("fault", "clear", "gpu-process", check=True)
    done = gpu_node.smi("--gpu-reset", "-i", "00000000:0F:00.0")
    assert (done.returncode, done.stdout) == (0, "GPU 00000000:0F:00.0 was successfully reset.\n")
    assert recovery(gpu_node, "1") == "None"
    assert [e.code for e in parse_xid_events(gpu_node.run("journalctl", "dmesg").stdout)] == [48]   # the log stays


def test_the_daemons_that_hold_the_device_block_a_reset_until_stopped(gpu_node):
    gpu_node.run("fault", "xid", "119", "--gpu", "1", check=True)
    gpu_node.install("nvidia-persistenced", "535.104.05")
    gpu_node.systemctl("start", "nvidia-persistenced", check=True)
    assert (gpu_node.smi("-r", "-i", "1").returncode, recovery(gpu_node, "1")) == (255, "Reset")
    gpu_node.systemctl("stop", "nvidia-persistenced", check=True)
    assert gpu_node.smi("-r", "-i", "1").returncode == 0 and recovery(gpu_node, "1") == "None"


def test_a_reset_clears_a_pending_reset_but_not_a_reboot_nor_a_gpu_off_the_bus(gpu_node):
    gpu_node.run("fault", "recovery-action", "reset", "--gpu", "0", check=True)
    gpu_node.run("fault", "recovery-action", "reboot", "--gpu", "2", check=True)
    assert gpu_node.smi("-r").returncode == 0                      # every GPU
    assert (recovery(gpu_node, "0"), recovery(gpu_node, "2")) == ("None", "Reboot")
    gpu_node.run("fault", "fallen-off-bus", "--gpu", "3", check=True)
    lost = gpu_node.smi("-r", "-i", "3")
    assert (lost.returncode, lost.stdout) == (15, "Unable to determine the device handle for GPU "
                                                  "00000000:4E:00.0: Unknown Error\n")
    gpu_node.boot()                                                # what a reboot clears
    assert (recovery(gpu_node, "2"), recovery(gpu_node, "3")) == ("None", "None")


def test_a_sticky_fault_survives_reboots_and_resets_until_cleared(gpu_node):
    gpu_node.run("fault", "fallen-off-bus", "--gpu", "3", "--sticky", check=True)
    gpu_node.run("fault", "xid", "48", "--gpu", "1", "--sticky", check=True)
    gpu_node.boot()
    dmesg = gpu_node.run("journalctl", "dmesg").stdout
    assert [(e.code, e.pci_address) for e in parse_xid_events(dmesg)] == [(79, "0000:4e:00.0"), (48, "0000:0f:00.0")]
    assert gpu_node.smi("-L").returncode == 15                     # GPU 3 fell off the bus again
    assert gpu_node.smi("-r", "-i", "1").returncode == 0
    assert recovery(gpu_node, "1") == "Reset"                      # the failed memory fails again
    gpu_node.run("fault", "clear", "fallen-off-bus", check=True)
    gpu_node.run("fault", "clear", "xid", check=True)
    gpu_node.boot()
    assert gpu_node.smi("-L").returncode == 0 and recovery(gpu_node, "1") == "None"
    assert parse_xid_events(gpu_node.run("journalctl", "dmesg").stdout) == ()


def domain(node):
    return parse_imex_ctl_nodes(node.tool("/usr/bin/nvidia-imex-ctl", "-N").stdout)


def test_a_restart_of_the_imex_daemon_recovers_it_unless_the_fault_is_sticky(make_node):
    first, second = tray(make_node, "tray1"), tray(make_node, "tray2")
    for node in (first, second):
        node.systemctl("start", "nvidia-imex", check=True)
    second.run("fault", "imex-peer-down", check=True)
    assert domain(first).connectivity[(0, 1)] == "D"
    pid = second.read("/run/gpuconf-lab/imex.json")
    second.systemctl("restart", "nvidia-imex", check=True)
    assert second.read("/run/gpuconf-lab/imex.json") != pid and domain(first).state == "UP"
    second.run("fault", "imex-peer-down", "--sticky", check=True)
    second.systemctl("restart", "nvidia-imex", check=True)
    assert domain(first).connectivity[(0, 1)] == "D"
    second.run("fault", "clear", "imex-peer-down", check=True)
    assert domain(first).state == "UP"
