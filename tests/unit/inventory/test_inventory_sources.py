"""INI and executable (dynamic) inventories read into the same model as the YAML one."""
from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from gpuconf.errors import InventoryError
from gpuconf.inventory.hosts import load_inventory

YAML = """\
all:
  vars: {ntp: pool.example}
  children:
    gpu:
      vars: {driver_branch: "535", become: true}
      children:
        a100:
          hosts:
            node01: {address: 10.0.0.1, port: 2222}
            node02: {address: 10.0.0.2, port: 22}
        t4:
          hosts:
            t4-01: {}
    login:
      hosts:
        login1: {user: ops}
"""

INI = """\
# the same fleet, Ansible's INI way
[a100]
node01 address=10.0.0.1 port=2222
node02 address=10.0.0.2 port=22

[t4]
t4-01

[login]
login1 user=ops

[gpu:children]
a100
t4

[gpu:vars]
driver_branch=535
become=true

[all:vars]
ntp=pool.example
"""


def script(tmp_path: Path, data: dict, with_meta: bool = True) -> Path:
    """An inventory script in the --list/--host protocol (Python, as many are)."""
    listing = dict(data)
    hostvars = listing.pop("_meta")["hostvars"]
    if with_meta:
        listing["_meta"] = {"hostvars": hostvars}
    path = tmp_path / "inventory.py"
    path.write_text(textwrap.dedent(f"""\
        #!/usr/bin/env python3
        import json, sys
        LISTING = {json.dumps(listing)!r}
        HOSTVARS = {json.dumps(hostvars)!r}
        if sys.argv[1] == "--list":
            print(LISTING)
        else:
            print(json.dumps(json.loads(HOSTVARS).get(sys.argv[2], {{}})))
        """))
    path.chmod(0o755)
    return path


DYNAMIC = {
    "all": {"vars": {"ntp": "pool.example"}},
    "gpu": {"children": ["a100", "t4"], "vars": {"driver_branch": "535", "become": "true"}},
    "a100": {"hosts": ["node01", "node02"]},
    "t4": ["t4-01"],
    "login": {"hosts": ["login1"]},
    "_meta": {"hostvars": {"node01": {"address": "10.0.0.1", "port": 2222},
                           "node02": {"address": "10.0.0.2", "port": 22}, "login1": {"user": "ops"}}},
}


def view(inventory) -> dict:
    """What a plan depends on: groups with their members, and every host's variables (as text)."""
    groups = {name: sorted(inventory.group_members(name)) for name in inventory.groups if name != "ungrouped"}
    hosts = {name: {k: str(v).lower() for k, v in inventory.host_vars(name).items()} for name in inventory.hosts}
    return {"groups": groups, "hosts": hosts, "group_names": {h: inventory.host_groups(h) for h in inventory.hosts}}


@pytest.fixture
def yaml_view(tmp_path):
    (tmp_path / "hosts.yml").write_text(YAML)
    return view(load_inventory(str(tmp_path / "hosts.yml")))


def test_an_ini_inventory_is_the_yaml_one(tmp_path, yaml_view):
    (tmp_path / "hosts.ini").write_text(INI)
    inventory = load_inventory(str(tmp_path / "hosts.ini"))
    assert view(inventory) == yaml_view
    assert inventory.host_vars("node01")["port"] == 2222   # a host line's values are literals
    # :vars values are Python literals too, one a line (ansible-inventory 2.19.14 --host gives 535, an int)
    assert inventory.host_vars("node01")["driver_branch"] == 535


def test_an_ini_file_without_a_suffix_in_an_inventory_directory(tmp_path, yaml_view):
    (tmp_path / "prod").mkdir()
    (tmp_path / "prod" / "hosts").write_text(INI)
    (tmp_path / "prod" / "group_vars").mkdir()
    (tmp_path / "prod" / "group_vars" / "t4.yml").write_text("power_limit: 70\n")
    inventory = load_inventory(str(tmp_path / "prod"))
    assert inventory.host_vars("t4-01")["power_limit"] == 70


@pytest.mark.parametrize("with_meta", [True, False], ids=["_meta", "--host"])
def test_an_executable_inventory_is_the_yaml_one(tmp_path, yaml_view, with_meta):
    inventory = load_inventory(str(script(tmp_path, DYNAMIC, with_meta)))
    assert view(inventory) == yaml_view


def test_ini_host_ranges_and_errors_with_their_line(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[gpu]\nnode[01:03] rack=r1\nrack-[a:b]\n")
    assert list(load_inventory(str(path)).hosts) == ["node01", "node02", "node03", "rack-a", "rack-b"]
    path.write_text("[gpu]\nnode01\n[gpu:varz]\nx=1\n")
    with pytest.raises(InventoryError, match=r"hosts.ini:3:1: unknown section kind ':varz'"):
        load_inventory(str(path))
    path.write_text("[gpu]\nnode01 port\n")
    with pytest.raises(InventoryError, match=r"hosts.ini:2:1: expected KEY=VALUE, got 'port'"):
        load_inventory(str(path))


def test_a_failing_inventory_script_says_what_it_printed(tmp_path):
    path = tmp_path / "inv.sh"
    path.write_text("#!/bin/sh\necho 'cloud API refused the token' >&2\nexit 3\n")
    path.chmod(0o755)
    with pytest.raises(InventoryError, match="--list exited 3: cloud API refused the token"):
        load_inventory(str(path))
    path.write_text("#!/bin/sh\necho not json\n")
    with pytest.raises(InventoryError, match="printed no JSON"):
        load_inventory(str(path))
    assert os.access(path, os.X_OK)
