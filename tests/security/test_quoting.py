"""Hostile values (spaces, quotes, $(...), backticks, ;, &&, |, globs, newlines) in paths, variables,
commands and environment: created exactly as named, and never executed."""
from __future__ import annotations

import json

import pytest
import yaml

from gpuconf.cli.main import main
from tests.reliability.helpers import check_run, gpuconf, no_traceback, write_inventory, write_playbook

BASE = "/var/tmp/gpuconf-quoting"
HOSTILE = ("sp ace's \"dq\" $(touch pwned-gq1) `touch pwned-gq2` ; touch pwned-gq3 && touch pwned-gq4 "
           "| tee pwned-gq5 \\ * ? ~ {a,b} <x> #end\nline2")
ONE_LINE = HOSTILE.replace("\n", " ")

PLAYBOOK = f"""\
- hosts: all
  gather_facts: false
  vars:
    base: {BASE}
  tasks:
    - name: a directory named by a variable
      directory: {{path: "{{{{ base }}}}/{{{{ hostile }}}}", mode: "0755"}}
    - name: a file inside it, named and filled by the variable
      file: {{path: "{{{{ base }}}}/{{{{ hostile }}}}/f {{{{ hostile }}}}", content: "{{{{ hostile }}}}", mode: "0600"}}
    - name: a line in a file with a hostile name
      line: {{path: "{{{{ base }}}}/lines {{{{ one_line }}}}", line: "{{{{ one_line }}}}"}}
    - name: a command given as a list, with a hostile chdir, env and guard
      command:
        cmd: ["sh", "-c", 'printf "%s|%s" "$1" "$V" > printed', "sh", "{{{{ hostile }}}}"]
        chdir: "{{{{ base }}}}/{{{{ hostile }}}}"
        env: {{V: "{{{{ hostile }}}}"}}
        creates: "{{{{ base }}}}/{{{{ hostile }}}}/printed"
    - name: json with a hostile value and path
      json_merge: {{path: "{{{{ base }}}}/{{{{ one_line }}}}.json", merge: {{"k": "{{{{ hostile }}}}"}}}}
"""


def pwned(lab, node: str) -> list[str]:
    """Marker files anywhere the node could have written: its overlay upper dir, and its own /tmp and /run."""
    upper = lab.node(node).upper
    found = [str(p) for p in upper.rglob("pwned-gq*")]
    _, out, _ = lab.exec(node, "find /tmp /run /root /home -name 'pwned-gq*' 2>/dev/null")
    return found + out.split()


def listing(lab, node: str, path: str) -> dict:
    script = ("import os,sys,json;b=sys.argv[1];print(json.dumps({n: (open(os.path.join(b,n)).read() "
              "if os.path.isfile(os.path.join(b,n)) else sorted(os.listdir(os.path.join(b,n)))) for n in os.listdir(b)}))")
    rc, out, err = lab.exec(node, ["python3", "-c", script, path])
    assert rc == 0, err
    return json.loads(out)


@pytest.fixture
def hostile_project(lab, tmp_path):
    (tmp_path / "vars.yml").write_text(yaml.safe_dump({"hostile": HOSTILE, "one_line": ONE_LINE}))
    inventory = write_inventory(lab, tmp_path / "hosts.yml", ["a100-01"])
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    lab.exec("a100-01", ["mkdir", "-p", BASE])
    yield playbook, inventory, tmp_path / "vars.yml"
    lab.exec("a100-01", ["rm", "-rf", BASE])


def test_hostile_values_name_files_exactly_and_run_nothing(lab, hostile_project):
    playbook, inventory, variables = hostile_project
    run = gpuconf("apply", playbook, inventory, "-e", f"@{variables}")
    no_traceback(run)
    assert run.code == 0, run.stdout + run.stderr
    assert set(run.statuses("a100-01").values()) == {"changed"}
    assert pwned(lab, "a100-01") == []
    tree = listing(lab, "a100-01", BASE)
    assert sorted(tree) == sorted([HOSTILE, f"lines {ONE_LINE}", f"{ONE_LINE}.json"])
    assert tree[f"lines {ONE_LINE}"] == ONE_LINE + "\n"
    assert json.loads(tree[f"{ONE_LINE}.json"]) == {"k": HOSTILE}
    inner = listing(lab, "a100-01", f"{BASE}/{HOSTILE}")
    assert inner == {f"f {HOSTILE}": HOSTILE, "printed": f"{HOSTILE}|{HOSTILE}"}
    # converged: a check finds nothing to do (and changes nothing), still nothing executed
    again = check_run(lab, ["a100-01"], playbook, inventory, "-e", f"@{variables}")
    assert again.code == 0, again.stdout + again.stderr
    assert pwned(lab, "a100-01") == []


def test_a_hostile_value_on_the_command_line_is_just_as_inert(lab, hostile_project):
    playbook, inventory, _ = hostile_project
    run = gpuconf("apply", playbook, inventory, "-e", f"hostile={ONE_LINE}", "-e", f"one_line={ONE_LINE}")
    assert run.code == 0, run.stdout + run.stderr
    assert pwned(lab, "a100-01") == []
    assert f"f {ONE_LINE}" in listing(lab, "a100-01", f"{BASE}/{ONE_LINE}")


@pytest.mark.parametrize("task, words", [
    ("package: {name: 'nvidia-driver-535; touch /tmp/pwned-gq6'}", "is not a valid package name"),
    ("package: {name: ['dkms', '$(touch /tmp/pwned-gq7)']}", "is not a valid package name"),
    ("package: {name: '-oAPT::Update::Pre-Invoke::=touch'}", "is not a valid package name"),
    ("kernel_module: {name: 'nvidia; touch /tmp/pwned-gq8'}", "is not a valid module name"),
    ("kernel_module: {name: '../../etc/cron.d/x'}", "is not a valid module name"),
    ("service: {name: 'docker`touch /tmp/pwned-gq9`'}", "is not a valid unit name"),
])
def test_hostile_names_are_refused_before_anything_runs(tmp_path, capsys, task, words):
    (tmp_path / "site.yml").write_text(f"- hosts: all\n  tasks:\n    - {task}\n")
    code = main(["validate", str(tmp_path / "site.yml"), "-i", "node1,"])
    err = capsys.readouterr().err
    assert code == 1 and words in err, err
    assert err.startswith(f"gpuconf: error: {tmp_path / 'site.yml'}:3:"), err


def test_a_hostile_package_name_from_a_variable_is_refused_on_the_host_and_not_run(lab, tmp_path):
    inventory = write_inventory(lab, tmp_path / "hosts.yml", ["a100-01"])
    playbook = write_playbook(tmp_path / "site.yml", "- hosts: all\n  gather_facts: false\n  tasks:\n"
                              "    - name: pkg\n      package: {name: '{{ pkg }}'}\n")
    run = gpuconf("apply", playbook, inventory, "-e", "pkg=dkms;touch pwned-gq10")
    assert run.code == 4
    assert "is not a valid package name" in run.tasks("a100-01")["pkg"]["error"]
    assert pwned(lab, "a100-01") == []
