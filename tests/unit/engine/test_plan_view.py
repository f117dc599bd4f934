"""A host's plan before the run (gpuconf/engine/planner.py), as `--list-tasks -v` prints it:
what each task will do, decided from variables alone, or why it waits for the host's facts."""
from __future__ import annotations

import textwrap

from gpuconf.cli.main import main

PLAY = """\
- hosts: all
  gather_facts: false
  vars:
    motd: "welcome to {{ inventory_hostname }}"
  tasks:
    - name: a file from variables
      file: {path: /etc/motd, content: "{{ motd }}\\n"}
    - name: a module named by a fact
      kernel_module: {name: "{{ facts.kernel }}", state: present}
    - name: only on the RHEL family
      package: {name: dkms}
      when: facts.os_family == 'RedHat'
    - name: with a secret
      command: {cmd: "echo {{ token }}", creates: /tmp/x}
    - name: a loop
      kernel_module: {name: "{{ item }}", state: present}
      loop: [ib_umad, mlx5_ib]
    - set_fact: {seen: 1}
"""


def test_list_tasks_verbose_prints_each_hosts_plan_without_connecting(tmp_path, capsys):
    playbook = tmp_path / "site.yml"
    playbook.write_text(PLAY)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(textwrap.dedent("""\
        all:
          vars: {secret_vars: [token], token: s3cr3t-value, address: 192.0.2.1}
          hosts: {n1: {}, n2: {}}
        """))
    assert main(["check", str(playbook), "-i", str(inventory), "--list-tasks", "-v", "--limit", "n1"]) == 0
    out = capsys.readouterr().out
    plan = out[out.index("plan on n1:"):]
    assert "plan on n2" not in out   # --limit narrows the plan too
    assert '"content": "welcome to n1\\n"' in plan and "reads: stat:1:/etc/motd" in plan
    assert "a module named by a fact\n        decided on the host: its params read the host's facts" in plan
    assert "only on the RHEL family\n        package" in plan
    assert "when (judged on the host): facts.os_family == 'RedHat'" in plan
    assert "a loop\n        decided on the host: a loop" in plan
    assert "decided on the host: a step the engine runs itself" in plan
    assert "s3cr3t-value" not in out and "echo ********" in plan


def test_list_tasks_without_verbose_prints_no_plan(tmp_path, capsys):
    playbook = tmp_path / "site.yml"
    playbook.write_text(PLAY)
    assert main(["check", str(playbook), "-i", "n1,", "--list-tasks"]) == 0
    out = capsys.readouterr().out
    assert "a file from variables" in out and "plan on" not in out
