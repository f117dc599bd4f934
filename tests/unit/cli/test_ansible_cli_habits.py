"""Issue 29, finding 8: ansible-playbook's and ansible-inventory's habits on gpuconf's command
line: a templated `hosts:`, `-C` for check mode, `inventory --graph` and `--list` (their
expected text is what ansible-inventory 2.19 prints for the same inventory)."""
from __future__ import annotations

import json
import textwrap

from gpuconf.cli.main import main

PLAYBOOK = """\
- hosts: "{{ target | default('all') }}"
  gather_facts: false
  tasks:
    - name: where
      debug: {msg: "on {{ inventory_hostname }}"}
"""


def ran_on(tmp_path, capsys, playbook: str, *extra: str) -> tuple[int, list[str], str]:
    (tmp_path / "site.yml").write_text(playbook)
    report = tmp_path / "report.json"
    code = main(["check", str(tmp_path / "site.yml"), "-i", "h1,h2,h3,", "-c", "local", "--no-retry-file",
                 "--report", str(report), *extra])
    err = capsys.readouterr().err
    hosts = sorted(json.loads(report.read_text())["hosts"]) if report.exists() else []
    return code, hosts, err


def test_a_templated_hosts_renders_with_the_extra_vars(tmp_path, capsys):
    assert ran_on(tmp_path, capsys, PLAYBOOK, "-e", "target=h2")[:2] == (0, ["h2"])
    assert ran_on(tmp_path, capsys, PLAYBOOK)[:2] == (0, ["h1", "h2", "h3"])   # its default()


def test_a_templated_hosts_that_cannot_render_is_an_error_at_the_play(tmp_path, capsys):
    code, hosts, err = ran_on(tmp_path, capsys, PLAYBOOK.replace(" | default('all')", ""))
    assert (code, hosts) == (1, [])
    assert "site.yml:1:3: hosts: '{{ target }}': 'target' is undefined" in err and "-e NAME=VALUE" in err
    code, hosts, err = ran_on(tmp_path, capsys, PLAYBOOK, "-e", "target=")
    assert code == 1 and "Hosts list cannot be empty" in err and "Traceback" not in err


def test_apply_dash_capital_c_is_check_mode_and_writes_nothing(tmp_path, capsys):
    target = tmp_path / "out.txt"
    (tmp_path / "site.yml").write_text(textwrap.dedent(f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - file: {{path: {target}, content: "x\\n"}}
        """))
    for argv in (["apply", "-C"], ["apply", "--check"], ["check", "-C"]):
        report = tmp_path / "report.json"
        code = main([*argv, str(tmp_path / "site.yml"), "-i", "h1,", "-c", "local", "--no-retry-file",
                     "--report", str(report)])
        capsys.readouterr()
        assert code == 2, argv   # would change
        assert json.loads(report.read_text())["verb"] == "check"
        assert not target.exists()


INVENTORY = """\
all:
  vars: {ansible_user: ops}
  hosts:
    lone: {}
  children:
    gpu:
      children:
        a100: {hosts: {a100-01: {rack: r1}, a100-02: {}}}
        h100:
          vars: {secret_vars: [bmc_password]}
          hosts: {h100-01: {bmc_password: hunter2-not-shown}}
    t4:
      hosts: {t4-01: {}}
"""


def inventory(tmp_path, capsys, *flags: str) -> tuple[int, str, str]:
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    code = main(["inventory", "-i", str(tmp_path / "hosts.yml"), *flags])
    out, err = capsys.readouterr()
    return code, out, err


def test_inventory_graph_is_ansible_inventorys_tree(tmp_path, capsys):
    code, out, _ = inventory(tmp_path, capsys, "--graph")
    assert code == 0
    assert out == textwrap.dedent("""\
        @all:
          |--@ungrouped:
          |  |--lone
          |--@gpu:
          |  |--@a100:
          |  |  |--a100-01
          |  |  |--a100-02
          |  |--@h100:
          |  |  |--h100-01
          |--@t4:
          |  |--t4-01
        """)


def test_inventory_list_is_ansible_inventorys_json_with_secrets_masked(tmp_path, capsys):
    code, out, _ = inventory(tmp_path, capsys, "--list")
    assert code == 0
    assert "hunter2-not-shown" not in out
    data = json.loads(out)
    assert data["_meta"]["hostvars"]["h100-01"]["bmc_password"] != "hunter2-not-shown"
    assert data["_meta"]["hostvars"]["a100-01"] == {"ansible_user": "ops", "rack": "r1"}
    del data["_meta"]
    assert data == {"all": {"children": ["ungrouped", "gpu", "t4"]}, "ungrouped": {"hosts": ["lone"]},
                    "gpu": {"children": ["a100", "h100"]}, "a100": {"hosts": ["a100-01", "a100-02"]},
                    "h100": {"hosts": ["h100-01"]}, "t4": {"hosts": ["t4-01"]}}


def test_inventory_views_are_one_at_a_time(tmp_path, capsys):
    code, _, err = inventory(tmp_path, capsys, "--graph", "--list")
    assert code == 1 and "give one of --host, --graph and --list" in err
