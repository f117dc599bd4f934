"""Nodes are reached as real hosts are: an inventory, a key, and host keys checked strictly."""
from __future__ import annotations

import stat
import subprocess

import paramiko
import pytest
import yaml

from tests.lab_fixtures import ssh_client, ssh_run


def test_every_node_answers_with_its_pinned_host_key(lab):
    for info in lab.nodes:
        client = ssh_client(lab, info.name)
        try:
            assert ssh_run(client, "hostname")[1] == f"{info.name}\n"
        finally:
            client.close()


def test_an_unknown_host_key_is_rejected(lab, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        ssh_client(lab, "a100-01", known_hosts=str(empty))


def test_another_nodes_host_key_is_a_mismatch(lab, tmp_path):
    lines = lab.known_hosts.read_text().splitlines()
    first, second = lab.nodes[0], lab.nodes[1]
    swapped = [line for line in lines if line.startswith(f"[{second.address}]")][0]
    forged = tmp_path / "known_hosts"
    forged.write_text(swapped.replace(f"[{second.address}]", f"[{first.address}]") + "\n")
    with pytest.raises(paramiko.BadHostKeyException):
        ssh_client(lab, first.name, known_hosts=str(forged))


def test_openssh_client_connects_with_the_inventory_variables_and_strict_checking(lab):
    data = yaml.safe_load(lab.inventory_path.read_text())
    common = data["all"]["vars"]
    host = data["all"]["children"]["t4"]["hosts"]["t4-01"]
    result = subprocess.run(
        ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes",
         "-o", f"UserKnownHostsFile={common['known_hosts_file']}", "-o", "GlobalKnownHostsFile=/dev/null",
         "-i", common["ssh_key"], "-p", str(common["port"]), f"{common['user']}@{host['address']}",
         "sudo -n id -u; hostname"],
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "0\nt4-01\n"


def test_the_inventory_groups_nodes_by_profile_with_connection_variables(lab):
    data = yaml.safe_load(lab.inventory_path.read_text())
    assert lab.inventory_path == lab.inventory_path.parent.parent.parent / "inventories" / lab.name / "hosts.yml"
    common = data["all"]["vars"]
    assert common["user"] == "gpuadmin" and common["become"] is True
    assert common["port"] == lab.nodes[0].port
    assert stat.S_IMODE(lab.client_key.stat().st_mode) == 0o600
    assert common["ssh_key"] == str(lab.client_key) and common["known_hosts_file"] == str(lab.known_hosts)
    groups = data["all"]["children"]
    assert sorted(groups) == ["a100", "subnet_managers", "t4"]
    assert sorted(groups["a100"]["hosts"]) == ["a100-01", "a100-02"]
    # one subnet manager per fabric: the first node with HCAs (the T4 has none)
    assert groups["subnet_managers"] == {"hosts": {"a100-01": None}, "vars": {"infiniband_subnet_manager": True}}
    for group in (groups["a100"], groups["t4"]):
        for name, host in group["hosts"].items():
            assert host["address"] == lab.node(name).address
            assert host["lab_name"] == lab.name
            assert host["lab_node_upper"] == str(lab.node(name).upper)
