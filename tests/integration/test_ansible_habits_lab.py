"""Issue 18's acceptance, on lab nodes over SSH: a playbook with every control-flow habit,
applied twice (the second run changes nothing); INI and executable inventories giving the
same plan as the YAML one; an Ansible Vault made by ansible-vault, decrypted and redacted;
ad hoc on 3 nodes."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuconf.inventory.hosts import load_inventory

HERE = Path(__file__).parent
VAULT = HERE.parent / "fixtures" / "vault"
BASE = "/tmp/gpuconf-habits"


def gpuconf(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuconf", *argv], capture_output=True, text=True,
                          timeout=timeout)


def report(path: Path) -> dict:
    return json.loads(path.read_text())["hosts"]


@pytest.fixture(scope="module")
def inventory(lab) -> str:
    return str(lab.inventory_path.parent)


def test_every_control_flow_habit_applied_twice_changes_nothing_the_second_time(lab, inventory, ssh, tmp_path):
    ssh("a100-01", f"sudo rm -rf {BASE}")
    ssh("a100-02", f"sudo rm -rf {BASE}")
    site = str(HERE / "habits" / "site.yml")
    check = gpuconf("check", site, "-i", inventory, "--no-retry-file", "--report", str(tmp_path / "check.json"))
    assert check.returncode == 2, check.stdout + check.stderr
    assert ssh("a100-01", f"test -e {BASE}; echo $?")[1].strip() == "1"   # check mode wrote nothing
    first = gpuconf("apply", site, "-i", inventory, "--no-retry-file", "--report", str(tmp_path / "first.json"))
    assert first.returncode == 0, first.stdout + first.stderr
    hosts = report(tmp_path / "first.json")
    statuses = {t["task"]: t["status"] for t in hosts["a100-01"]["tasks"]}
    assert statuses["a file per item (item=ib_ipoib)"] == "changed"
    assert statuses["a step that fails"] == "failed" and statuses["never reached"] == "skipped"
    assert statuses["the rescue writes its marker"] == "changed" and statuses["post_tasks run last"] == "changed"
    assert statuses["a file from an included task file ({{ who }})"] == "changed"
    assert "set_fact lasts across plays" in statuses
    run_once = sorted(t["status"] for h in hosts.values() for t in h["tasks"] if t["task"] == "run once for the batch")
    assert run_once == ["ok", "skipped"]
    listing = ssh("a100-01", f"ls {BASE}")[1].split()
    assert sorted(listing) == sorted(["ib_uverbs.conf", "ib_ipoib.conf", "w1", "w2", "rescued", "always",
                                      "included-imported", "included-included", "from-role", "post"])
    assert "included-included" not in ssh("a100-02", f"ls {BASE}")[1].split()   # the include's when
    second = gpuconf("apply", site, "-i", inventory, "--no-retry-file", "--detailed-exitcodes",
                     "--report", str(tmp_path / "second.json"))
    assert second.returncode == 0, second.stdout + second.stderr   # 2 would mean something changed
    changed = [(h, t["task"]) for h, r in report(tmp_path / "second.json").items() for t in r["tasks"]
               if t["status"] == "changed"]
    assert changed == []


def _ini(source) -> str:
    """The lab's inventory in Ansible's INI format."""
    lines = []
    for name, group in source.groups.items():
        if name in ("all", "ungrouped"):
            continue
        lines.append(f"[{name}]")
        lines += [" ".join([host, *(f"{k}={json.dumps(v) if not isinstance(v, str) else v}"
                                    for k, v in source.hosts[host].vars.items())]) for host in group.hosts]
        if group.vars:
            lines += [f"[{name}:vars]", *(f"{k}={v}" for k, v in group.vars.items())]
        if group.children:
            lines += [f"[{name}:children]", *group.children]
    lines += ["[all:vars]", *(f"{k}={v}" for k, v in source.groups["all"].vars.items())]
    return "\n".join(lines) + "\n"


def _script(source, path: Path) -> None:
    """The lab's inventory as an executable inventory (Ansible's --list JSON)."""
    listing = {name: {"hosts": list(g.hosts), "vars": g.vars, "children": list(g.children)}
               for name, g in source.groups.items() if name != "ungrouped"}
    listing["_meta"] = {"hostvars": {name: host.vars for name, host in source.hosts.items()}}
    # not sys.executable: a shebang cannot hold a path with a space (the checkout may live in one)
    path.write_text(f"#!/usr/bin/env python3\nimport sys\nprint({json.dumps(json.dumps(listing))})\n")
    path.chmod(0o755)


PLAN = """\
- hosts: all
  tasks:
    - debug: {msg: "{{ inventory_hostname }} {{ group_names }} {{ lab_profile }} {{ address }}"}
    - probe: {command: hostname}
    - kernel_module: {name: ib_uverbs}
      when: "'a100' in group_names"
    - file: {path: /tmp/gpuconf-no-such-file, state: absent}
"""


def test_ini_and_executable_inventories_give_the_yaml_plan(lab, inventory, tmp_path):
    (tmp_path / "plan.yml").write_text(PLAN)
    source = load_inventory(inventory)
    assert len(source.hosts) == 3
    (tmp_path / "ini").mkdir()
    (tmp_path / "ini" / "hosts").write_text(_ini(source))
    _script(source, tmp_path / "dynamic.py")
    plans = {}
    for kind, spec in (("yaml", inventory), ("ini", str(tmp_path / "ini")), ("script", str(tmp_path / "dynamic.py"))):
        out = tmp_path / f"{kind}.json"
        done = gpuconf("check", str(tmp_path / "plan.yml"), "-i", spec, "--no-retry-file", "--report", str(out))
        assert done.returncode in (0, 2), kind + ": " + done.stdout + done.stderr
        plans[kind] = {host: [(t["task"], t["status"], t["message"]) for t in r["tasks"]]
                       for host, r in report(out).items()}
    assert len(plans["yaml"]) == 3
    assert plans["ini"] == plans["yaml"] and plans["script"] == plans["yaml"]


def test_an_ansible_vault_is_decrypted_on_the_node_and_redacted_everywhere(lab, inventory, ssh, tmp_path):
    shutil.copy(VAULT / "secrets.yml", tmp_path / "secrets.yml")
    (tmp_path / "site.yml").write_text(
        "- hosts: a100-01\n  gather_facts: false\n  vars_files: [secrets.yml]\n  tasks:\n"
        "    - name: the token on the node\n"
        "      file: {path: /tmp/gpuconf-vault-token, content: \"token={{ vault_token }}\\n\", mode: '0600'}\n"
        "    - debug: {msg: 'token is {{ vault_token }}'}\n")
    ssh("a100-01", "sudo rm -f /tmp/gpuconf-vault-token")
    done = gpuconf("apply", str(tmp_path / "site.yml"), "-i", inventory, "--diff", "-v", "--no-retry-file",
                   "--vault-password-file", str(VAULT / "password.txt"), "--report", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "token is ********" in done.stdout and "+token=********" in done.stdout
    for text in (done.stdout, done.stderr, (tmp_path / "r.json").read_text()):
        assert "s3cr3t-T0ken-4711" not in text
    assert ssh("a100-01", "sudo cat /tmp/gpuconf-vault-token")[1] == "token=s3cr3t-T0ken-4711\n"
    refused = gpuconf("check", str(tmp_path / "site.yml"), "-i", inventory)
    assert refused.returncode == 1 and "encrypted with Ansible Vault" in refused.stderr


def test_adhoc_on_three_nodes_groups_identical_results(lab, inventory):
    same = gpuconf("run", "all", "-i", inventory, "-a", "echo same-output")
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout == "a100-01, a100-02, t4-01 | CHANGED | rc=0 >>\nsame-output\n\n"
    each = gpuconf("run", "all", "-i", inventory, "-a", "hostname; test $(hostname) != t4-01")
    blocks = each.stdout.strip().split("\n\n")
    assert each.returncode == 4 and len(blocks) == 3
    assert any(block.startswith("t4-01 | FAILED | rc=1 >>") for block in blocks)
