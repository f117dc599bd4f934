"""Naming, addressing and the client files of a lab (no nodes started)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpuconf_lab.inventory_file import inventory_data, known_hosts_text
from gpuconf_lab.runtime import LabError, parse_profiles, plan_nodes


@pytest.mark.parametrize("spec, nodes, expected", [
    ("a100", None, {"a100": 1}),
    ("t4", 3, {"t4": 3}),
    ("a100=4,t4=1", None, {"a100": 4, "t4": 1}),
    ("h100=2", None, {"h100": 2}),
])
def test_profiles_take_one_kind_with_nodes_or_a_mix_with_counts(spec, nodes, expected):
    assert parse_profiles(spec, nodes) == expected


@pytest.mark.parametrize("spec, nodes, node_os, expected", [
    ("a100", 2, "el9", {"a100@el9": 2}),
    ("a100=1,a100@el9=1", None, "debian", {"a100": 1, "a100@el9": 1}),
    ("t4@debian=1,h100=1", None, "el9", {"t4": 1, "h100@el9": 1}),
])
def test_a_node_os_applies_to_all_or_to_one_entry(spec, nodes, node_os, expected):
    assert parse_profiles(spec, nodes, node_os) == expected


def test_an_unknown_node_os_is_refused():
    with pytest.raises(LabError, match="unknown node OS 'el8'"):
        parse_profiles("a100@el8=1", None)
    with pytest.raises(LabError, match="choose from debian, el9"):
        parse_profiles("a100", 1, "ubuntu")


def test_el9_nodes_are_named_apart_and_carry_their_os():
    specs = plan_nodes({"a100@el9": 1, "a100": 1, "t4@el9": 1}, slot=5)
    assert [(s.name, s.profile, s.os, s.index) for s in specs] == [
        ("a100-01", "a100", "debian", 0), ("a100-el9-01", "a100", "el9", 1), ("t4-el9-01", "t4", "el9", 2)]
    assert specs[1].to_json()["os"] == "el9"


@pytest.mark.parametrize("spec, nodes, message", [
    ("v100", None, "unknown profile 'v100'"),
    ("a100,t4", None, "without counts"),
    ("a100=2", 3, "not both"),
    ("a100=0", None, "bad node count"),
    ("a100", 300, "1 to 254"),
])
def test_bad_profiles_say_what_is_wrong(spec, nodes, message):
    with pytest.raises(LabError, match=message):
        parse_profiles(spec, nodes)


def test_nodes_are_named_per_profile_and_get_distinct_loopback_addresses():
    specs = plan_nodes({"t4": 1, "a100": 2}, slot=5)
    assert [(s.name, s.index, s.address) for s in specs] == [
        ("a100-01", 0, "127.77.5.1"), ("a100-02", 1, "127.77.5.2"), ("t4-01", 2, "127.77.5.3")]


def test_known_hosts_uses_the_bracketed_name_of_a_non_standard_port():
    text = known_hosts_text([("127.77.1.1", 2222, "ssh-ed25519 AAAAC3Nz root@a100-01\n")])
    assert text == "[127.77.1.1]:2222 ssh-ed25519 AAAAC3Nz\n"


def test_the_inventory_has_ansibles_shape():
    class Info:
        def __init__(self, name, profile):
            self.name, self.profile, self.address, self.upper = name, profile, "127.77.1.9", Path("/u") / name
    data = inventory_data("demo", [Info("a100-01", "a100"), Info("h100-01", "h100")], 2222,
                          Path("/k/id_ed25519"), Path("/k/known_hosts"))
    assert list(data) == ["all"]
    assert data["all"]["vars"]["become"] is True
    assert data["all"]["children"]["h100"]["hosts"]["h100-01"]["lab_node_upper"] == "/u/h100-01"
    assert "t4" not in data["all"]["children"] and "el9" not in data["all"]["children"]


def test_el9_nodes_get_a_group_and_lab_os():
    class Info:
        def __init__(self, name, profile, os):
            self.name, self.profile, self.os, self.address, self.upper = name, profile, os, "127.77.1.9", Path("/u")
    data = inventory_data("demo", [Info("a100-01", "a100", "debian"), Info("a100-el9-01", "a100", "el9")], 2222,
                          Path("/k/id_ed25519"), Path("/k/known_hosts"))
    children = data["all"]["children"]
    assert children["el9"] == {"hosts": {"a100-el9-01": None}}
    assert children["a100"]["hosts"]["a100-el9-01"]["lab_os"] == "el9"
    assert children["a100"]["hosts"]["a100-01"]["lab_os"] == "debian"
