"""~/.ssh/config as operators have it: an inventory that names only ssh aliases reaches lab
nodes over real SSH through the config's HostName, Port, User, IdentityFile and
UserKnownHostsFile (host keys strictly checked), and through a ProxyJump bastion; inventory
variables win over the config."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.sshconfig import lookup
from gpuconf.errors import InventoryError

PLAYBOOK = [{"name": "who", "hosts": "all", "gather_facts": True,
             "tasks": [{"name": "hostname", "probe": {"command": "hostname", "timeout": 10}, "register": "me"}]}]


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return path


def test_the_config_fills_what_the_inventory_leaves_out(tmp_path):
    path = config(tmp_path, "Host gpu-*\n  User ops\n  Port 2200\n  IdentityFile ~/.ssh/gpu\n\n"
                            "Host gpu-01\n  HostName 10.1.0.1\n  ProxyJump bastion\n")
    spec = ConnectionSpec.from_vars("gpu-01", {"ssh_config_file": str(path)})
    assert (spec.address, spec.port, spec.user, spec.jump_host) == ("10.1.0.1", 2200, "ops", "bastion")
    assert spec.ssh_key == str(Path("~/.ssh/gpu").expanduser())
    spec = ConnectionSpec.from_vars("gpu-01", {"ssh_config_file": str(path), "port": 22, "ansible_user": "root"})
    assert (spec.port, spec.user) == (22, "root")  # the inventory wins
    spec = ConnectionSpec.from_vars("node9", {"ssh_config_file": str(path), "address": "gpu-01"})
    assert spec.address == "10.1.0.1"  # the inventory's address is an alias: the config says where it goes
    assert lookup("other", path) == {}


def test_a_missing_config_file_and_a_multi_hop_jump_are_clear_errors(tmp_path):
    with pytest.raises(InventoryError, match="does not exist"):
        ConnectionSpec.from_vars("a", {"ssh_config_file": str(tmp_path / "none")})
    path = config(tmp_path, "Host a\n  ProxyJump one,two\n\nHost b\n  ProxyCommand nc %h %p\n")
    with pytest.raises(InventoryError, match="several hops"):
        ConnectionSpec.from_vars("a", {"ssh_config_file": str(path)})
    with pytest.raises(InventoryError, match="ProxyCommand is not supported; use ProxyJump"):
        ConnectionSpec.from_vars("b", {"ssh_config_file": str(path)})


def run_check(tmp_path: Path, hosts: dict, ssh_config: Path) -> tuple[int, dict, str]:
    (tmp_path / "site.yml").write_text(yaml.safe_dump(PLAYBOOK))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "gpuconf", "check", str(tmp_path / "site.yml"), "-i",
                           str(tmp_path / "hosts.yml"), "--report", str(report), "--no-retry-file"],
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                                            "GPUCONF_SSH_CONFIG": str(ssh_config)})
    return proc.returncode, json.loads(report.read_text()) if report.exists() else {}, proc.stdout + proc.stderr


def test_aliases_and_a_proxyjump_reach_lab_nodes_over_ssh(lab, tmp_path):
    first, second = lab.node("a100-01"), lab.node("t4-01")
    # "t4-01" resolves only inside the lab (every node's /etc/hosts), never on this machine: reaching
    # it proves the connection went through the jump host, which resolved it
    known = tmp_path / "known_hosts"
    lines = lab.known_hosts.read_text().splitlines()
    second_key = next(line for line in lines if line.startswith(f"[{second.address}]:{second.port} "))
    known.write_text("\n".join([*lines, second_key.replace(f"[{second.address}]", "[t4-01]", 1)]) + "\n")
    ssh_config = config(tmp_path, (
        f"Host lab-first\n  HostName {first.address}\n  Port {first.port}\n  User gpuadmin\n"
        f"  IdentityFile {lab.client_key}\n  UserKnownHostsFile {known}\n\n"
        f"Host lab-second\n  HostName t4-01\n  Port {second.port}\n  User gpuadmin\n"
        f"  IdentityFile {lab.client_key}\n  UserKnownHostsFile {known}\n  ProxyJump lab-first\n"))
    code, report, output = run_check(tmp_path, {"lab-first": {}, "lab-second": {}}, ssh_config)
    assert code == 0, output
    for alias in ("lab-first", "lab-second"):
        [task] = report["hosts"][alias]["tasks"]
        assert task["status"] == "ok", task
    # the inventory wins over the config: a wrong port given there is used, and fails
    code, report, output = run_check(tmp_path, {"lab-first": {"port": 1, "connect_retries": 0}}, ssh_config)
    assert code == 8 and "unreachable" in output, output


def test_an_unknown_host_key_is_refused_even_through_the_config(lab, tmp_path):
    first = lab.node("a100-01")
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    ssh_config = config(tmp_path, f"Host lab-first\n  HostName {first.address}\n  Port {first.port}\n"
                                  f"  User gpuadmin\n  IdentityFile {lab.client_key}\n  UserKnownHostsFile {empty}\n"
                                  "  StrictHostKeyChecking no\n")
    code, report, output = run_check(tmp_path, {"lab-first": {}}, ssh_config)
    assert code == 8 and "host key" in output.lower(), output
