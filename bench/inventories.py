"""The lab's nodes as each tool's inventory: the same hosts, key, user, sudo and pinned host keys.

gpuconf reads the lab's own `inventories/NAME/hosts.yml`. The others get theirs written here:
  floor     hosts.json for bench/floor.py
  ansible   hosts.ini (group a100) and ansible.cfg: forks as gpuconf's, strict host key checking
            against the lab's known_hosts, python3 named so that no interpreter discovery runs,
            everything else ansible-core's defaults (ControlMaster/ControlPersist, no pipelining)
  pyinfra   inventory.py (group a100): ssh_known_hosts_file and strict host key checking
"""
from __future__ import annotations

import json
from pathlib import Path

from gpuconf_lab.fleet import Lab

USER = "gpuadmin"


def write_all(lab: Lab, directory: Path, forks: int) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    nodes = lab.nodes
    key, known_hosts = str(lab.client_key), str(lab.known_hosts)

    hosts = [{"name": n.name, "address": n.address, "port": n.port, "user": USER, "key": key,
              "known_hosts": known_hosts} for n in nodes]
    floor = directory / "hosts.json"
    floor.write_text(json.dumps(hosts, indent=1))

    ansible_dir = directory / "ansible"
    ansible_dir.mkdir(exist_ok=True)
    ini = ansible_dir / "hosts.ini"
    # the first node is the fabric's subnet manager, as in the lab's own inventory
    ini.write_text("[a100]\n" + "".join(
        f"{n.name} ansible_host={n.address} ansible_port={n.port}"
        f"{' infiniband_subnet_manager=true' if i == 0 else ''}\n" for i, n in enumerate(nodes)) +
        "\n[a100:vars]\n"
        f"ansible_user={USER}\nansible_ssh_private_key_file={key}\n"
        "ansible_python_interpreter=/usr/bin/python3\n"
        f"ansible_ssh_common_args='-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes'\n")
    config = ansible_dir / "ansible.cfg"
    config.write_text(
        "[defaults]\n"
        f"inventory = {ini}\nforks = {forks}\nhost_key_checking = True\nretry_files_enabled = False\n"
        f"local_tmp = {ansible_dir / 'tmp'}\n"
        "[ssh_connection]\n"
        f"control_path_dir = {ansible_dir / 'cp'}\n")

    pyinfra = directory / "pyinfra_inventory.py"
    data = {"ssh_user": USER, "ssh_key": key, "ssh_known_hosts_file": known_hosts,
            "ssh_strict_host_key_checking": "yes"}
    rows = "".join(f"    ({n.name!r}, {{**DATA, 'ssh_hostname': {n.address!r}, 'ssh_port': {n.port}"
                   f"{', ' + repr('infiniband_subnet_manager') + ': True' if i == 0 else ''}}}),\n"
                   for i, n in enumerate(nodes))
    pyinfra.write_text(f"DATA = {data!r}\na100 = [\n{rows}]\n")
    return {"floor": floor, "ansible_cfg": config, "ansible_dir": ansible_dir, "pyinfra": pyinfra,
            "gpuconf": lab.inventory_path}
