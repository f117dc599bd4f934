"""The simulated IMEX of GB200 trays: nvidia-imex-ctl -N in the real capture's layout, the
domain seen across nodes through the shared fabric directory, the daemon refusing another
driver version, the imex-peer-down fault, and IMEX channel 0 at nvidia load only when
NVreg_CreateImexChannel0=1 is configured (gone after a reboot otherwise)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuconf.facts.imex import parse_imex_ctl_nodes, parse_imex_log, parse_proc_devices
from gpuconf.tasks.health.imex_domain import judge_domain
from tests.real import real_path

DRIVER = "580.95.05"
SIM = Path(__file__).resolve().parents[2] / "lab/gpuconf_lab/sim"
ADDRESSES = {"tray1": "10.0.0.1", "tray2": "10.0.0.2"}
CHANNEL0 = "/dev/nvidia-caps-imex-channels/channel0"


def test_ctl_layout_is_the_real_captures():
    capture = real_path("imex/imex-ctl-N-gh200-2node-domain-up-jpsnips.txt")
    # the simulator module as installed in a node (stdlib only), in its own interpreter: its
    # sibling modules (state, gpu, ...) must not land in this process's sys.modules
    code = ("import sys; import imex; sys.stdout.write(imex.render_domain('3/25/2025 10:42:08.082', "
            "['10.136.206.47', '10.136.206.48'], ['READY', 'READY'], [['C', 'C'], ['C', 'C']], 'UP'))")
    text = subprocess.run([sys.executable, "-B", "-c", code], cwd=SIM, capture_output=True, text=True, timeout=30,
                          check=True).stdout
    assert text.rstrip("\n") == capture.read_text().rstrip("\n")


def booted(make_node, name: str):
    """A GB200 tray with the open driver loaded (Blackwell takes the open modules only)."""
    node = make_node("gb200", name=name)
    node.install_driver(DRIVER, open_modules=True)
    node.blacklist_nouveau()
    node.boot()
    return node


def tray(make_node, name: str, imex_version: str = DRIVER):
    node = booted(make_node, name)
    node.write("/etc/hosts", "127.0.0.1\tlocalhost\n" + "".join(f"{a}\t{n}\n" for n, a in ADDRESSES.items()))
    node.install("nvidia-imex", imex_version)
    node.write("/etc/nvidia-imex/nodes_config.cfg", "".join(f"{a}\n" for a in ADDRESSES.values()))
    return node


def domain_of(node):
    done = node.tool("/usr/bin/nvidia-imex-ctl", "-N")
    assert done.returncode == 0, done.stderr
    return parse_imex_ctl_nodes(done.stdout)


def test_two_trays_connect_and_a_peer_down_is_seen_by_the_other(make_node):
    first, second = tray(make_node, "tray1"), tray(make_node, "tray2")
    first.systemctl("start", "nvidia-imex", check=True)
    alone = domain_of(first)
    assert [n.state for n in alone.nodes] == ["READY", "UNAVAILABLE"] and alone.state != "UP"
    assert "10.0.0.2 (node #1, UNAVAILABLE" in judge_domain(alone, "imex_domain")[0].message
    second.systemctl("start", "nvidia-imex", check=True)
    both = domain_of(first)
    assert both.complete and both.state == "UP" and not both.unconnected()
    assert first.tool("/usr/bin/nvidia-imex-ctl", "-q").stdout.strip() == "READY"
    log = parse_imex_log(first.read("/var/log/nvidia-imex.log"))
    assert log.driver_matched and log.node_id == 0 and log.bind_ip == "10.0.0.1" and log.peers == 2
    assert second.run("fault", "imex-peer-down").returncode == 0
    seen = domain_of(first)
    assert seen.nodes[1].state == "UNAVAILABLE" and seen.connectivity[(0, 1)] == "D"
    assert [f.severity for f in judge_domain(seen, "imex_domain")] == ["warning"]
    second.run("fault", "clear", "imex-peer-down", check=True)
    assert domain_of(first).state == "UP"


def test_the_daemon_refuses_another_driver_version(make_node):
    node = tray(make_node, "tray1", imex_version="580.105.08")
    done = node.systemctl("start", "nvidia-imex")
    assert done.returncode != 0
    log = node.read("/var/log/nvidia-imex.log")
    assert "NvGpu Library version 580.105.08 does not match with GPU Driver version 580.95.05" in log
    assert not parse_imex_log(log).driver_matched
    assert node.tool("/usr/bin/nvidia-imex-ctl", "-N").returncode != 0


def test_channel0_at_load_only_when_configured_and_a_hand_made_one_is_lost_at_reboot(make_node):
    node = booted(make_node, "tray1")
    assert parse_proc_devices(node.read("/run/gpuconf-lab/proc/devices"))["nvidia-caps-imex-channels"] == 234
    assert not node.path(CHANNEL0).exists()
    node.path(CHANNEL0).parent.mkdir(parents=True)
    node.path(CHANNEL0).touch()   # what mknod by hand leaves
    node.boot()
    assert not node.path(CHANNEL0).exists()
    node.write("/etc/modprobe.d/nvidia-imex-channels.conf", "options nvidia NVreg_CreateImexChannel0=1\n")
    node.boot()
    assert node.path(CHANNEL0).exists()
