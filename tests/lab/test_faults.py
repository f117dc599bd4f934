"""The runtime's faults: sshd-down (a node that stops answering) and reboot-hang."""
from __future__ import annotations

import socket

import paramiko
import pytest

from gpuconf_lab.fleet import ssh_banner
from gpuconf_lab.runtime import LabError
from tests.lab_fixtures import ssh_client, ssh_run, wait_until


@pytest.fixture
def t4(lab):
    """t4-01, put back to normal whatever the test did to it."""
    yield "t4-01"
    lab.fault("t4-01", "clear")
    lab.wait_ssh("t4-01", timeout=30)


def test_sshd_down_ends_sessions_and_then_accepts_tcp_without_a_banner(lab, t4):
    client = ssh_client(lab, t4)
    try:
        _, stdout, _ = client.exec_command("sleep 60; echo survived")
        lab.fault(t4, "sshd-down")
        assert stdout.channel.status_event.wait(10), "the session outlived sshd-down"
    finally:
        client.close()
    info = lab.node(t4)
    with socket.create_connection((info.address, info.port), timeout=5) as sock:   # TCP is accepted
        sock.settimeout(1.0)
        with pytest.raises(socket.timeout):
            sock.recv(64)                                                           # but nothing is said
    with pytest.raises((paramiko.SSHException, EOFError, OSError)):
        ssh_client(lab, t4, timeout=1)
    assert lab.exec(t4, "hostname")[1] == "t4-01\n"   # the node itself is alive
    assert [s.ssh for s in lab.status() if s.node.name == t4] == [False]

    lab.fault(t4, "sshd-up")
    client = ssh_client(lab, t4)
    try:
        assert ssh_run(client, "hostname")[1] == "t4-01\n"
    finally:
        client.close()


def test_reboot_hang_keeps_the_node_down_until_the_fault_is_cleared(lab, t4):
    old_boot_id = lab.exec(t4, "cat /proc/sys/kernel/random/boot_id")[1]
    lab.fault(t4, "reboot-hang")
    assert ssh_banner(lab.node(t4).address, lab.node(t4).port, 2)   # only the next reboot hangs
    lab.reboot(t4)
    assert wait_until(lambda: lab.node_state(t4).get("state") == "hung", timeout=10)
    assert not wait_until(lambda: ssh_banner(lab.node(t4).address, lab.node(t4).port, 0.5),
                          timeout=float(lab.state["boot_delay"]) + 1.5)
    lab.fault(t4, "clear")
    lab.wait_ssh(t4, timeout=30)
    assert lab.exec(t4, "cat /proc/sys/kernel/random/boot_id")[1] != old_boot_id


def test_an_unknown_node_or_fault_says_what_exists(lab):
    with pytest.raises(LabError, match="a100-01, a100-02, t4-01"):
        lab.fault("h100-09", "sshd-down")
