"""The magic variables Ansible users reach for, in a real run (`-c local`) and in validate."""
from __future__ import annotations

import json

from gpuconf.cli.main import main

PLAYBOOK = """\
- hosts: all
  tasks:
    - debug:
        msg: "{{ [ansible_hostname, ansible_kernel == facts.kernel, ansible_distribution,
                  inventory_hostname_short, ansible_play_hosts, group_names, ansible_check_mode,
                  hostvars[inventory_hostname].facts.hostname == facts.hostname] | to_json }}"
"""


def test_magic_variables_in_a_run_and_in_validate(tmp_path, capsys):
    (tmp_path / "site.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts.yml").write_text("all:\n  children:\n    gpu:\n      hosts:\n        n1.example.com:\n"
                                        "          connection: local\n")
    assert main(["validate", str(tmp_path / "site.yml"), "-i", str(tmp_path / "hosts.yml")]) == 0
    report = tmp_path / "r.json"
    assert main(["check", str(tmp_path / "site.yml"), "-i", str(tmp_path / "hosts.yml"), "--no-retry-file",
                 "--report", str(report)]) == 0
    shown = json.loads(json.loads(report.read_text())["hosts"]["n1.example.com"]["tasks"][0]["message"])
    hostname, same_kernel, distribution, short, play_hosts, groups, check_mode, own_facts = shown
    assert hostname and same_kernel and distribution and own_facts
    assert (short, play_hosts, groups, check_mode) == ("n1", ["n1.example.com"], ["gpu"], True)
    capsys.readouterr()


def test_an_unknown_ansible_fact_name_gets_a_hint(tmp_path, capsys):
    (tmp_path / "site.yml").write_text("- hosts: all\n  tasks:\n    - debug: {msg: '{{ ansible_lsb.codename }}'}\n")
    assert main(["validate", str(tmp_path / "site.yml"), "-i", "h1,"]) == 1
    err = capsys.readouterr().err
    assert "'ansible_lsb' is undefined (gpuconf's facts are facts.*" in err
