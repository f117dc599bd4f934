"""The `gpuconf` command: documentation verbs, inventory view, and clean usage errors."""
import json
import sys

import pytest

from gpuconf.cli.main import main

PLAY = "- hosts: all\n  gather_facts: false\n  tasks:\n    - assert: {that: 'true'}\n"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_tasks_lists_every_generic_type_with_a_summary(capsys):
    code, out, _ = run(capsys, "tasks")
    assert code == 0
    for name in ("file", "directory", "line", "package", "service", "kernel_module", "command", "reboot", "assert"):
        line = next((row for row in out.splitlines() if row.split(" ", 1)[0] == name), None)
        assert line is not None and len(line.split(None, 1)) == 2, f"{name} is missing or has no summary"


def test_tasks_name_shows_the_params(capsys):
    code, out, _ = run(capsys, "tasks", "file")
    assert code == 0
    params = {line.split(":")[0].strip() for line in out.split("Parameters:")[1].splitlines() if line.startswith("  ")
              and not line.startswith("      ")}
    assert {"path", "content", "template", "src", "mode", "owner", "group", "state", "backup"} <= params
    assert "path: str  (required)" in out and "default: 'present'" in out


def test_tasks_misspelled_suggests_and_fails(capsys):
    code, out, err = run(capsys, "tasks", "fiel")
    assert code == 1 and out == ""
    assert err.strip() == "gpuconf: error: unknown task type 'fiel' (did you mean 'file'?)"


@pytest.mark.parametrize("extra, words", [
    ("novalue", "expected KEY=VALUE"),
    ("bad key=1", "expected KEY=VALUE"),
    ("{not: [closed", "YAML syntax error"),
    ("@/nonexistent/vars.yml", "file not found"),
    ("@{dir}", "cannot read"),
    ("@{listfile}", "must be a mapping"),
])
def test_bad_extra_vars_is_a_clean_usage_error(tmp_path, capsys, extra, words):
    (tmp_path / "site.yml").write_text(PLAY)
    (tmp_path / "list.yml").write_text("- a\n- b\n")
    extra = extra.replace("{dir}", str(tmp_path)).replace("{listfile}", str(tmp_path / "list.yml"))
    code, out, err = run(capsys, "check", str(tmp_path / "site.yml"), "-i", "localhost,", "-c", "local", "-e", extra)
    assert code == 1 and out == ""
    assert err.startswith("gpuconf: error: ") and words in err, err
    assert "Traceback" not in err and "internal error" not in err


def test_extra_vars_forms_combine_later_wins(tmp_path, capsys):
    (tmp_path / "vars.yml").write_text("a: from-file\nb: from-file\n")
    (tmp_path / "site.yml").write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                                       "    - assert: {that: \"a == 'from-file' and b == 2 and c == 'x=y'\"}\n")
    (tmp_path / "hosts.yml").write_text(f"all:\n  hosts:\n    localhost: {{python: {sys.executable}}}\n")
    code, _, err = run(capsys, "check", str(tmp_path / "site.yml"), "-i", str(tmp_path / "hosts.yml"), "-c", "local",
                       "-e", f"@{tmp_path / 'vars.yml'}", "-e", '{"b": 2}', "-e", "c=x=y")
    assert code == 0, err


@pytest.mark.parametrize("argv, words", [
    (["check"], "required"),
    (["check", "site.yml"], "-i"),
    (["frobnicate"], "invalid choice"),
    (["check", "{site}", "-i", "localhost,", "--forks", "0"], "--forks must be at least 1"),
    (["check", "{site}", "-i", "nowhere"], "inventory 'nowhere' not found"),
    (["check", "{tmp}/missing.yml", "-i", "localhost,"], "playbook not found"),
    (["check", "{site}", "-i", "localhost,", "--limit", "localhots"], "did you mean 'localhost'"),
])
def test_usage_errors_exit_1(tmp_path, capsys, argv, words):
    (tmp_path / "site.yml").write_text(PLAY)
    argv = [a.format(site=tmp_path / "site.yml", tmp=tmp_path) for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == 1 and words in err, err
    assert "Traceback" not in err


@pytest.fixture
def inventory_dir(tmp_path, monkeypatch):
    inv = tmp_path / "inventories" / "prod"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts.yml").write_text("all:\n  children:\n    gpu:\n      hosts:\n        node1: {rack: r1}\n"
                                   "        node2:\n")
    (inv / "group_vars" / "gpu.yml").write_text("driver: '550'\n")
    monkeypatch.chdir(tmp_path)
    return inv


def test_inventory_host_shows_groups_and_merged_vars(inventory_dir, capsys):
    code, out, _ = run(capsys, "inventory", "-i", "prod", "--host", "node1")
    assert code == 0
    assert json.loads(out) == {"host": "node1", "groups": ["all", "gpu"], "group_names": ["gpu"],
                               "inventory_hostname_short": "node1", "vars": {"driver": "550", "rack": "r1"}}


def test_inventory_shows_groups_and_hosts(inventory_dir, capsys):
    code, out, _ = run(capsys, "inventory", "-i", str(inventory_dir))
    data = json.loads(out)
    assert code == 0 and data["groups"]["gpu"]["hosts"] == ["node1", "node2"]
    assert data["hosts"]["node2"] == {"driver": "550"}


def test_inventory_unknown_host_suggests(inventory_dir, capsys):
    code, _, err = run(capsys, "inventory", "-i", "prod", "--host", "node3")
    assert code == 1 and "host 'node3' is not in" in err and "did you mean" in err


def test_project_layout_works_from_any_directory(tmp_path, monkeypatch, capsys):
    """playbooks/, roles/ and inventories/ side by side, run from elsewhere (cron, CI)."""
    project = tmp_path / "project"
    (project / "playbooks").mkdir(parents=True)
    (project / "roles" / "base" / "tasks").mkdir(parents=True)
    (project / "inventories" / "prod").mkdir(parents=True)
    (project / "inventories" / "prod" / "hosts.yml").write_text("all:\n  hosts:\n    node1:\n")
    (project / "roles" / "base" / "tasks" / "main.yml").write_text("- assert: {that: 'true'}\n")
    (project / "playbooks" / "site.yml").write_text("- hosts: all\n  roles: [base]\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "validate", str(project / "playbooks" / "site.yml"), "-i", "prod")
    assert code == 0, err
    assert "1 play(s), 1 task(s), 1 host(s): valid" in out
