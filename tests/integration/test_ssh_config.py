"""~/.ssh/config as operators have it: an inventory that names only ssh aliases reaches lab
nodes over real SSH through the config's HostName, Port, User, IdentityFile and
UserKnownHostsFile (host keys strictly checked at every hop), through a ProxyJump bastion, a
chain of two and a ProxyCommand; Include and Match are read; inventory variables win over the config."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.sshconfig import Hop, hops, lookup
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


def test_a_missing_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(InventoryError, match="does not exist"):
        ConnectionSpec.from_vars("a", {"ssh_config_file": str(tmp_path / "none")})


def test_proxyjump_chains_and_proxycommand_are_followed_as_ssh_follows_them(tmp_path):
    path = config(tmp_path, "Host a\n  ProxyJump ops@one,two:2222\n\nHost two\n  HostName 10.0.0.2\n  User hop\n\n"
                            "Host b\n  HostName 10.0.0.9\n  ProxyCommand ssh -W %h:%p bastion\n")
    spec = ConnectionSpec.from_vars("a", {"ssh_config_file": str(path), "user": "root"})
    assert spec.jump_host == "ops@one,two:2222" and spec.proxy_command is None
    assert hops(spec.jump_host, path, spec.user) == [Hop("one", 22, "ops"), Hop("10.0.0.2", 2222, "hop")]
    spec = ConnectionSpec.from_vars("b", {"ssh_config_file": str(path)})
    assert (spec.address, spec.proxy_command, spec.jump_host) == ("10.0.0.9", "ssh -W 10.0.0.9:22 bastion", None)
    # the inventory's way through wins over the config's, whole
    spec = ConnectionSpec.from_vars("b", {"ssh_config_file": str(path), "jump_host": "gw"})
    assert (spec.jump_host, spec.proxy_command) == ("gw", None)


def test_include_and_match_blocks_are_read(tmp_path):
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "10-gpu.conf").write_text("Host gpu-07\n  HostName 10.2.0.7\n")
    (tmp_path / "conf.d" / "20-users.conf").write_text("Match host 10.2.0.*\n  User ops\n  Port 2207\n")
    path = config(tmp_path, f"Include {tmp_path}/conf.d/*.conf\n\nHost *\n  User nobody\n")
    spec = ConnectionSpec.from_vars("gpu-07", {"ssh_config_file": str(path)})
    assert (spec.address, spec.user, spec.port) == ("10.2.0.7", "ops", 2207)
    assert ConnectionSpec.from_vars("other", {"ssh_config_file": str(path)}).user == "nobody"
    config(tmp_path, f"Include {tmp_path}/ssh_config\n")  # includes itself
    with pytest.raises(InventoryError, match="Include nested deeper than 16"):
        ConnectionSpec.from_vars("x", {"ssh_config_file": str(path)})


def run_check(tmp_path: Path, hosts: dict, ssh_config: Path, playbook: list | None = None) -> tuple[int, dict, str]:
    (tmp_path / "site.yml").write_text(yaml.safe_dump(playbook or PLAYBOOK))
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


def test_a_proxyjump_chain_and_a_proxycommand_reach_a_node_through_jump_nodes(lab, tmp_path):
    """a100-02 and t4-01 resolve only inside the lab: the chain's second hop and the target are
    reached from the hop before them. Every hop's key is checked: a hop whose key is unknown fails."""
    first, middle, last = lab.node("a100-01"), lab.node("a100-02"), lab.node("t4-01")
    lines = lab.known_hosts.read_text().splitlines()
    inside = [next(line for line in lines if line.startswith(f"[{node.address}]:{node.port} ")).replace(
        f"[{node.address}]", f"[{node.name}]", 1) for node in (middle, last)]
    known = tmp_path / "known_hosts"
    known.write_text("\n".join([*lines, *inside]) + "\n")
    common = f"  User gpuadmin\n  IdentityFile {lab.client_key}\n  UserKnownHostsFile {known}\n"
    proxy = (f"ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={known} "
             f"-i {lab.client_key} -p {first.port} gpuadmin@{first.address} -W %h:%p")
    ssh_config = config(tmp_path, (
        f"Host lab-first\n  HostName {first.address}\n  Port {first.port}\n{common}\n"
        f"Host lab-middle\n  HostName {middle.name}\n  Port {middle.port}\n{common}\n"
        f"Host lab-chain\n  HostName {last.name}\n  Port {last.port}\n{common}  ProxyJump lab-first,lab-middle\n\n"
        f"Host lab-proxied\n  HostName {last.name}\n  Port {last.port}\n{common}  ProxyCommand {proxy}\n"))
    said = [*PLAYBOOK[0]["tasks"], {"name": "say", "debug": {"msg": "{{ me.stdout | trim }}"}}]
    code, report, output = run_check(tmp_path, {"lab-chain": {}, "lab-proxied": {}}, ssh_config,
                                     [dict(PLAYBOOK[0], tasks=said)])
    assert code == 0, output
    for alias in ("lab-chain", "lab-proxied"):
        probe, say = report["hosts"][alias]["tasks"]
        assert probe["status"] == say["status"] == "ok", (probe, say)
        assert say["message"] == last.name, say  # the hostname the target itself printed
    known.write_text("\n".join([*lines, inside[1]]) + "\n")  # the middle hop's key is no longer known
    code, report, output = run_check(tmp_path, {"lab-chain": {}}, ssh_config)
    assert code == 8 and f"host key for [{middle.name}]:{middle.port} is not known" in output, output
