"""Playbook and role loading: every error says file:line:column and what to do."""
from pathlib import Path
from textwrap import dedent

import pytest

from gpuconf.errors import PlaybookError
from gpuconf.playbook.loader import load_playbook


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dedent(text))
    return path


def load_error(tmp_path: Path, text: str) -> tuple[str, str]:
    path = write(tmp_path / "site.yml", text)
    with pytest.raises(PlaybookError) as err:
        load_playbook(path, project_dir=tmp_path)
    return str(err.value), str(path)


PLAY = """\
- hosts: all
  tasks:
    - name: t
"""


@pytest.mark.parametrize("body, where, words", [
    # YAML syntax: the position of the problem
    ("- hosts: all\n  tasks: [\n", "3:1", ["YAML syntax error"]),
    ("- hosts: all\n  vars:\n    a: 1\n   b: 2\n", "4:4", ["YAML syntax error"]),
    # a task type nobody wrote
    (PLAY + "      fiel:\n        path: /x\n", "4:7", ["unknown task type or keyword 'fiel'", "did you mean 'file'"]),
    # a keyword misspelled is found as a type or keyword with a hint
    (PLAY + "      file: {path: /x}\n      notfy: h\n", "5:7", ["'notfy'", "did you mean 'notify'"]),
    # an unknown parameter: its own position
    (PLAY + "      file:\n        path: /x\n        contnet: hi\n", "6:9",
     ["unknown parameter 'contnet'", "did you mean 'content'"]),
    # wrong values
    (PLAY + "      file:\n        path: /x\n        mode: rwx\n", "6:9", ["mode", "octal"]),
    (PLAY + "      file:\n        path: /x\n        mode: 644\n", "6:9", ["decimal", "write '0644' or 0644"]),
    (PLAY + "      file:\n        path: /x\n        mode: 70000\n", "6:9", ["mode must be octal"]),
    (PLAY + "      file:\n        path: /x\n        state: bogus\n", "6:9", ["state", "'present' or 'absent'"]),
    (PLAY + "      file:\n        path: relative/x\n", "5:9", ["path must be absolute"]),
    (PLAY + "      command: {cmd: ls}\n      timeout: -1\n", "5:7", ["timeout", "greater than 0"]),
    (PLAY + "      command: {cmd: ls, timeout: -1}\n", "4:26", ["timeout", "greater than 0"]),
    (PLAY + "      file: {path: /x}\n      register: 1bad\n", "5:7", ["not a valid variable name"]),
    # the shape of tasks and plays
    (PLAY + "      when: true\n", "3:7", ["task has no task type"]),
    (PLAY + "      file: {path: /x}\n      service: {name: x}\n", "5:7", ["exactly one task type"]),
    ("- hosts: all\n  taks: []\n", "2:3", ["unknown play key 'taks'", "did you mean 'tasks'"]),
    ("- name: no hosts\n", "1:3", ["missing required key 'hosts'"]),
    ("hosts: all\n", "1:1", ["a playbook is a list of plays"]),
])
def test_error_location_and_message(tmp_path, body, where, words):
    message, path = load_error(tmp_path, body)
    assert message.startswith(f"{path}:{where}: "), message
    for word in words:
        assert word in message, message


def test_templated_params_are_checked_after_templating_but_literals_now(tmp_path):
    ok = write(tmp_path / "ok.yml", PLAY + "      file:\n        path: /x\n        mode: '{{ m }}'\n")
    assert load_playbook(ok, project_dir=tmp_path).plays[0].tasks[0].params["mode"] == "{{ m }}"
    message, path = load_error(tmp_path, PLAY + "      file:\n        path: '{{ p }}'\n        mode: rwx\n")
    assert message.startswith(f"{path}:6:9: ") and "octal" in message


def test_missing_role_says_where_it_looked_and_suggests(tmp_path):
    write(tmp_path / "roles" / "nvidia_driver" / "tasks" / "main.yml", "[]\n")
    message, path = load_error(tmp_path, "- hosts: all\n  roles:\n    - nvidia_drvier\n")
    assert message.startswith(f"{path}:3:7: role 'nvidia_drvier' not found")
    assert str((tmp_path / "roles").resolve()) in message and "did you mean 'nvidia_driver'" in message


def test_error_inside_a_role_points_into_the_role_file(tmp_path):
    tasks = write(tmp_path / "roles" / "r" / "tasks" / "main.yml", "- service:\n    name: x\n    stat: started\n")
    message, _ = load_error(tmp_path, "- hosts: all\n  roles: [r]\n")
    assert message.startswith(f"{tasks}:3:5: ") and "did you mean 'state'" in message


def test_role_dependencies_load_first_and_roles_see_their_defaults(tmp_path):
    write(tmp_path / "roles" / "base" / "tasks" / "main.yml", "- name: base task\n  assert: {that: 'true'}\n")
    write(tmp_path / "roles" / "driver" / "meta" / "main.yml", "dependencies: [base]\n")
    write(tmp_path / "roles" / "driver" / "defaults" / "main.yml", "version: '550'\n")
    write(tmp_path / "roles" / "driver" / "tasks" / "main.yml", "- name: driver task\n  assert: {that: 'true'}\n")
    write(tmp_path / "roles" / "fabric" / "meta" / "main.yml", "dependencies: [base, driver]\n")
    write(tmp_path / "roles" / "fabric" / "tasks" / "main.yml", "- name: fabric task\n  assert: {that: 'true'}\n")
    path = write(tmp_path / "site.yml", "- hosts: all\n  roles: [fabric]\n  tasks:\n"
                                        "    - name: play task\n      assert: {that: 'true'}\n")
    play = load_playbook(path, project_dir=tmp_path).plays[0]
    tasks = play.tasks
    # base is loaded for fabric and again for driver: each loading kept, marked as one role that runs
    # once a host (the second is skipped where the first completed: engine/hostrun.py)
    assert [t.name for t in tasks] == ["base task", "base task", "driver task", "fabric task", "play task"]
    assert [t.role for t in tasks] == ["base", "base", "driver", "fabric", None]
    assert tasks[0].role_once == tasks[1].role_once != "" and tasks[0].role_instance != tasks[1].role_instance
    assert play.role_defaults == {"version": "550"}  # role defaults are play-wide, as in Ansible


def test_a_role_with_plugins_is_refused_at_load_saying_why(tmp_path):
    write(tmp_path / "roles" / "r" / "tasks" / "main.yml", "- debug: {msg: \"{{ '1.2.3.4' | parse_ip }}\"}\n")
    write(tmp_path / "roles" / "r" / "filter_plugins" / "ip.py", "class FilterModule: ...\n")
    message, path = load_error(tmp_path, "- hosts: all\n  roles: [r]\n")
    assert message.startswith(f"{path}:2:11: role 'r' has filter_plugins/: gpuconf loads no plugins")
    # an include_role's too, when the playbook loads (where its name is no template)
    message, path = load_error(tmp_path, "- hosts: all\n  tasks:\n    - include_role: {name: r}\n")
    assert message.startswith(f"{path}:3:7: role 'r' has filter_plugins/: gpuconf loads no plugins")


def test_role_dependency_cycle_is_an_error(tmp_path):
    write(tmp_path / "roles" / "a" / "meta" / "main.yml", "dependencies: [b]\n")
    write(tmp_path / "roles" / "b" / "meta" / "main.yml", "dependencies: [{role: a, x: 1}]\n")
    message, _ = load_error(tmp_path, "- hosts: all\n  roles: [a]\n")
    assert "role dependency cycle: a -> b -> a" in message


def test_roles_next_to_the_playbook_come_before_the_project_roles(tmp_path):
    write(tmp_path / "roles" / "r" / "tasks" / "main.yml", "- name: project\n  assert: {that: 'true'}\n")
    write(tmp_path / "playbooks" / "roles" / "r" / "tasks" / "main.yml", "- name: local\n  assert: {that: 'true'}\n")
    path = write(tmp_path / "playbooks" / "site.yml", "- hosts: all\n  roles: [r]\n")
    assert [t.name for t in load_playbook(path, project_dir=tmp_path).plays[0].tasks] == ["local"]


def test_missing_vars_file_points_at_its_entry(tmp_path):
    message, path = load_error(tmp_path, "- hosts: all\n  vars_files:\n    - vars/nope.yml\n  tasks: []\n")
    assert message.startswith(f"{path}:3:7: vars file 'vars/nope.yml' not found")
    assert str(tmp_path / "vars" / "nope.yml") in message


def test_vars_files_override_play_vars(tmp_path):
    write(tmp_path / "vars" / "site.yml", "a: from-file\n")
    path = write(tmp_path / "site.yml", "- hosts: all\n  vars: {a: inline, b: inline}\n  vars_files: vars/site.yml\n")
    assert load_playbook(path, project_dir=tmp_path).plays[0].vars == {"a": "from-file", "b": "inline"}


def test_a_role_in_the_playbooks_own_folder_is_found_as_ansible_finds_it(tmp_path):
    write(tmp_path / "plays" / "beside" / "tasks" / "main.yml", "- name: beside\n  assert: {that: 'true'}\n")
    path = write(tmp_path / "plays" / "site.yml", "- hosts: all\n  roles: [beside]\n")
    assert [t.name for t in load_playbook(path, project_dir=tmp_path).plays[0].tasks] == ["beside"]


def test_a_tasks_from_leading_out_of_the_role_is_refused(tmp_path):
    write(tmp_path / "roles" / "r" / "tasks" / "main.yml", "- name: main\n  assert: {that: 'true'}\n")
    write(tmp_path / "roles" / "other.yml", "- name: outside\n  assert: {that: 'true'}\n")
    message, _ = load_error(tmp_path, "- hosts: all\n  tasks:\n    - import_role: {name: r, tasks_from: ../../other}\n")
    assert "is not inside the expected role path" in message
