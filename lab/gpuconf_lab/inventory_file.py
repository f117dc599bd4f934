"""The files `lab up` hands to gpuconf and to people: inventory, known_hosts and an ssh config.

The inventory has Ansible's YAML shape (groups under `all: children:`), one group per profile,
so that `gpuconf check playbook.yml -i lab` reaches the nodes exactly as it reaches real ones.
"""
from __future__ import annotations

import os
from pathlib import Path

import yaml

from gpuconf_lab.bmc.control import host_vars
from gpuconf_lab.profiles import get_profile
from gpuconf_lab.runtime import OSES, PROFILES, USER


def known_hosts_text(entries: list[tuple[str, int, str]]) -> str:
    """`[address]:port key` lines, the names paramiko and OpenSSH look up for a non-22 port."""
    lines = []
    for address, port, public_key in entries:
        key_type, key_data = public_key.split()[:2]
        name = address if port == 22 else f"[{address}]:{port}"
        lines.append(f"{name} {key_type} {key_data}")
    return "\n".join(lines) + "\n"


def inventory_data(lab: str, nodes: list, port: int, ssh_key: Path, known_hosts: Path,
                   bmc: dict | None = None) -> dict:
    """One group per profile, `el9` and `el10` for the EL nodes (every host has `lab_os`: debian,
    el9 or el10), and `subnet_managers`: the first node with HCAs runs opensm
    (`infiniband_subnet_manager: true`), as one fabric needs exactly one. A lab with BMCs gives
    each node that has one `bmc_address`, `bmc_user`, `bmc_password` and `bmc_ca_file`, and a
    profile's group the lab provider's current `firmware_bundle` where it publishes one."""
    children: dict = {}
    for profile in PROFILES:
        hosts = {node.name: {"address": node.address, "lab_name": lab, "lab_profile": node.profile,
                             "lab_os": node_os(node), "lab_node_upper": str(node.upper),
                             **(host_vars(bmc, node.name) if bmc else {})}
                 for node in nodes if node.profile == profile}
        if hosts:
            children[profile] = {"hosts": hosts}
            if bmc and profile in bmc.get("bundles", {}):
                children[profile]["vars"] = {"firmware_bundle": bmc["bundles"][profile]}
    for name in OSES[1:]:   # a group per node OS other than Debian, so a play can target it
        members = {node.name: None for node in nodes if node_os(node) == name}
        if members:
            children[name] = {"hosts": members}
    with_hcas = [node for node in nodes if get_profile(node.profile).hca_count]
    if with_hcas:
        children["subnet_managers"] = {"hosts": {with_hcas[0].name: None},
                                       "vars": {"infiniband_subnet_manager": True}}
    return {"all": {
        "vars": {"port": port, "user": USER, "ssh_key": str(ssh_key), "become": True,
                 "known_hosts_file": str(known_hosts), "lab_name": lab},
        "children": children,
    }}


def node_os(node) -> str:
    return getattr(node, "os", "debian")   # callers may pass any object with name, profile, address


def ssh_config_text(nodes: list, port: int, ssh_key: Path, known_hosts: Path) -> str:
    """For people: `ssh -F <this file> a100-01` with the lab's key and strict host keys."""
    blocks = []
    for node in nodes:
        blocks.append(f"Host {node.name}\n  HostName {node.address}\n  Port {port}\n  User {USER}\n"
                      f"  IdentityFile {ssh_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known_hosts}\n"
                      f"  StrictHostKeyChecking yes\n")
    return "\n".join(blocks)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.rename(tmp, path)


def write_inventory(path: Path, data: dict) -> None:
    header = "# written by `gpuconf lab up`; removed by `gpuconf lab down`\n"
    write_text(path, header + yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
