"""Issue 29, finding 9: Ansible habits that gpuconf used to take wrongly, without a word."""
from __future__ import annotations

import os
import textwrap

from gpuconf.connection.base import ConnectionSpec
from gpuconf.inventory.hosts import load_inventory


def test_ansible_ssh_host_port_and_user_reach_the_connection():
    spec = ConnectionSpec.from_vars("n1", {"ansible_ssh_host": "10.0.0.5", "ansible_ssh_port": 2222,
                                           "ansible_ssh_user": "ops"})
    assert (spec.address, spec.port, spec.user) == ("10.0.0.5", 2222, "ops")


def test_given_both_names_the_older_ssh_ones_win_as_in_ansibles_ssh_plugin():
    for variables in ({"ansible_host": "10.0.0.1", "ansible_ssh_host": "10.0.0.2"},
                      {"ansible_ssh_host": "10.0.0.2", "ansible_host": "10.0.0.1"}):
        assert ConnectionSpec.from_vars("n1", variables).address == "10.0.0.2"


def script(path, host):
    path.write_text(f"#!/usr/bin/python3\nimport json\nprint(json.dumps({{'gpu': {{'hosts': ['{host}']}}, "
                    "'_meta': {'hostvars': {}}}))\n")
    path.chmod(0o755)


def test_a_dynamic_inventory_given_as_dot_slash_is_that_file_not_one_on_path(tmp_path, monkeypatch):
    project, elsewhere = tmp_path / "project", tmp_path / "bin"
    project.mkdir()
    elsewhere.mkdir()
    script(project / "dyn.py", "from-the-project")
    script(elsewhere / "dyn.py", "from-path")   # a program of the same name on PATH
    monkeypatch.setenv("PATH", f"{elsewhere}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(project)
    assert sorted(load_inventory("./dyn.py").hosts) == ["from-the-project"]
    assert sorted(load_inventory("dyn.py").hosts) == ["from-the-project"]   # a file here, as Ansible's -i


def test_an_inventory_with_the_older_names_gives_the_address_the_run_connects_to(tmp_path):
    (tmp_path / "hosts.yml").write_text(textwrap.dedent("""\
        all:
          hosts:
            n1: {ansible_ssh_host: 192.0.2.7, ansible_ssh_port: 2200}
        """))
    inventory = load_inventory(str(tmp_path / "hosts.yml"))
    spec = ConnectionSpec.from_vars("n1", inventory.host_vars("n1"))
    assert (spec.address, spec.port) == ("192.0.2.7", 2200)
