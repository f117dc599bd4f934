"""Inventory loading and merging: Ansible's YAML shape, vars files, errors."""
from pathlib import Path
from textwrap import dedent

import pytest

from gpuconf.errors import InventoryError
from gpuconf.inventory.hosts import load_inventory

HOSTS = """\
all:
  vars:
    site: eu
    level: all
  hosts:
    mgmt1:
  children:
    gpu:
      vars:
        level: gpu
      children:
        h100:
          vars:
            level: h100
          hosts:
            node1:
              level: host
            node2:
    storage:
      hosts:
        stor1:
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dedent(text))
    return path


@pytest.fixture
def inventory_dir(tmp_path):
    write(tmp_path / "inv" / "hosts.yml", HOSTS)
    write(tmp_path / "inv" / "group_vars" / "gpu.yml", "driver: '550'\n")
    write(tmp_path / "inv" / "group_vars" / "h100" / "a.yml", "fabric: nvlink\n")
    write(tmp_path / "inv" / "host_vars" / "node2.yml", "level: node2-file\n")
    write(tmp_path / "inv" / "group_vars" / "unknown_group.yml", "ignored: true\n")
    return tmp_path / "inv"


def test_yaml_shape_groups_hosts_and_nested_membership(inventory_dir):
    inv = load_inventory(str(inventory_dir))
    assert list(inv.hosts) == ["mgmt1", "node1", "node2", "stor1"]
    assert inv.group_members("gpu") == ["node1", "node2"]  # through the child group
    assert inv.group_members("h100") == ["node1", "node2"]
    assert inv.group_members("storage") == ["stor1"]
    assert inv.host_groups("node1") == ["all", "gpu", "h100"]  # merge order: parent before child


def test_merged_vars_child_over_parent_over_all_and_host_last(inventory_dir):
    inv = load_inventory(str(inventory_dir))
    node1, node2, mgmt1 = inv.host_vars("node1"), inv.host_vars("node2"), inv.host_vars("mgmt1")
    assert node1["level"] == "host"
    assert node1["site"] == "eu" and node1["driver"] == "550" and node1["fabric"] == "nvlink"
    assert node2["level"] == "node2-file"  # host_vars/ file
    assert mgmt1["level"] == "all" and "driver" not in mgmt1
    assert "ignored" not in node1  # vars for a group not in the inventory are ignored


def test_group_vars_file_overrides_inline_group_vars(tmp_path):
    write(tmp_path / "hosts.yml", "gpu:\n  vars: {x: inline}\n  hosts: {n1: }\n")
    write(tmp_path / "group_vars" / "gpu.yml", "x: file\n")
    assert load_inventory(str(tmp_path)).host_vars("n1")["x"] == "file"


def test_single_file_inventory_reads_vars_dirs_next_to_it(tmp_path):
    hosts = write(tmp_path / "prod.yml", "all:\n  hosts:\n    n1:\n")
    write(tmp_path / "host_vars" / "n1.yml", "rack: r7\n")
    assert load_inventory(str(hosts)).host_vars("n1") == {"rack": "r7"}


@pytest.mark.parametrize("spec, hosts", [("node1,node2,", ["node1", "node2"]), ("solo,", ["solo"]),
                                         ("a, b ,", ["a", "b"])])
def test_adhoc_host_list(spec, hosts):
    inv = load_inventory(spec)
    assert list(inv.hosts) == hosts
    assert inv.group_members("ungrouped") == hosts


def test_name_resolves_to_inventories_dir(tmp_path, monkeypatch):
    write(tmp_path / "inventories" / "prod" / "hosts.yml", "all:\n  hosts:\n    p1:\n")
    monkeypatch.chdir(tmp_path / "inventories")  # a bare name must not depend on cwd alone
    inv = load_inventory("prod", [tmp_path])
    assert list(inv.hosts) == ["p1"]


def test_missing_inventory_says_where_it_looked(tmp_path):
    with pytest.raises(InventoryError) as err:
        load_inventory("nope", [tmp_path])
    assert "nope" in str(err.value) and str(tmp_path / "inventories" / "nope") in str(err.value)


def test_playbook_given_as_inventory_is_rejected(tmp_path):
    path = write(tmp_path / "site.yml", "- hosts: all\n  tasks: []\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(str(path))
    assert "not an inventory" in str(err.value) and "playbook" in str(err.value)
    assert str(err.value).startswith(f"{path}:1:1")


def test_duplicate_host_key_reports_file_line_column(tmp_path):
    path = write(tmp_path / "hosts.yml", "all:\n  hosts:\n    n1:\n    n2:\n    n1:\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(str(path))
    assert str(err.value).startswith(f"{path}:5:5: duplicate key 'n1'")
    assert "line 3" in str(err.value)


def test_unknown_group_key_suggests_the_right_one(tmp_path):
    path = write(tmp_path / "hosts.yml", "all:\n  children:\n    gpu:\n      hsots:\n        n1:\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(str(path))
    assert str(err.value).startswith(f"{path}:4:7: unknown key 'hsots' in group 'gpu'")
    assert "did you mean 'hosts'" in str(err.value)


def test_top_level_group_with_misspelled_key_suggests_the_right_one(tmp_path):
    path = write(tmp_path / "hosts.yml", "gpu:\n  hsots:\n    n1:\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(str(path))
    assert "did you mean 'hosts'" in str(err.value)


def test_hosts_as_a_list_is_explained(tmp_path):
    path = write(tmp_path / "hosts.yml", "all:\n  hosts:\n    - n1\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(str(path))
    assert str(err.value).startswith(f"{path}:2:3") and "mapping" in str(err.value)


def test_group_cycle_is_an_error(tmp_path):
    text = "all:\n  children:\n    a:\n      children:\n        b:\n          children:\n            a:\n"
    with pytest.raises(InventoryError, match="cycle"):
        load_inventory(str(write(tmp_path / "hosts.yml", text)))
