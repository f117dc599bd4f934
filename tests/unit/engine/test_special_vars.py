"""ansible-core's special_vars target, in small (issue 38): a template's own variables
(template_path, template_fullpath, template_destpath, template_uid, template_host, template_mtime,
template_run_date), the play's role names, and ansible_parent_role_names/paths of an imported or
included role. Real CLI runs on this machine (the implicit localhost)."""
from __future__ import annotations

import os
import pwd
from pathlib import Path

from tests.unit.engine.test_ansible_language import apply, shown


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_template_sees_where_it_comes_from_and_goes(tmp_path):
    source = tmp_path / "roles" / "r" / "templates" / "t.j2"
    write(source, "{{ template_path }}|{{ template_fullpath }}|{{ template_destpath }}|{{ template_uid }}|"
                  "{{ template_host }}|{{ template_mtime.year }}|{{ template_run_date is defined }}\n"
                  "{{ lookup('template', 'l.j2') }}")
    write(source.parent / "l.j2", "{{ template_path }} {{ template_destpath }}")
    write(tmp_path / "roles" / "r" / "tasks" / "main.yml", f"- template: {{src: t.j2, dest: {tmp_path}/out}}\n")
    code, _ = apply(tmp_path, "- hosts: localhost\n  gather_facts: false\n  roles: [r]\n")
    owner = pwd.getpwuid(os.getuid()).pw_name
    year = __import__("datetime").datetime.fromtimestamp(source.stat().st_mtime).year
    assert code == 0
    assert (tmp_path / "out").read_text() == (f"t.j2|{source}|{tmp_path}/out|{owner}|{os.uname()[1]}|{year}|True\n"
                                              "l.j2 ")   # as ansible-core 2.19 writes it


def test_role_names_and_the_parents_of_an_included_role(tmp_path):
    write(tmp_path / "roles" / "dep" / "tasks" / "main.yml", "- debug: {msg: dep}\n")
    write(tmp_path / "roles" / "top" / "meta" / "main.yml", "dependencies: [dep]\n")
    write(tmp_path / "roles" / "top" / "tasks" / "main.yml", """\
- debug: {msg: "{{ [role_names, ansible_play_role_names, ansible_dependent_role_names, ansible_role_names | sort] }}"}
- debug: {msg: "{{ ansible_parent_role_names | default('none') }}"}
- include_role: {name: kid}
- import_role: {name: kid, tasks_from: other}
""")
    write(tmp_path / "roles" / "kid" / "tasks" / "main.yml", """\
- debug: {msg: "{{ ansible_parent_role_names }} {{ ansible_parent_role_paths | map('basename') | list }}"}
- include_tasks: more.yml
""")
    write(tmp_path / "roles" / "kid" / "tasks" / "more.yml", "- import_role: {name: kid, tasks_from: other}\n")
    write(tmp_path / "roles" / "kid" / "tasks" / "other.yml", "- debug: {msg: \"{{ ansible_parent_role_names }}\"}\n")
    code, hosts = apply(tmp_path, "- hosts: localhost\n  gather_facts: false\n  roles: [top]\n")
    assert code == 0
    # as ansible-core 2.19 shows them: an import_role names a role of the play too; a dependency has
    # no parent, an include's import (in the role's own file or an included one) has the role's chain
    assert [m["msg"] for m in shown(hosts["localhost"])] == [
        "dep", [["top", "kid"], ["top", "kid"], ["dep"], ["dep", "kid", "top"]], "none",
        "['top'] ['top']", ["kid", "top"], ["top"]]
