"""ansible-core's roles/role_complete.yml, in small (issue 38): a role runs again on a host where
its earlier loading did not complete (skipped, or unreachable), `ignore_unreachable` keeps an
unreachable host in the play (recap: ok and ignored), and the `ping` module. Real CLI runs on this
machine (local connection; the unreachable host is a closed port of 127.0.0.1)."""
from __future__ import annotations

from pathlib import Path

from tests.unit.engine.test_ansible_language import apply, shown


def role(tmp_path: Path, name: str, tasks: str) -> None:
    (tmp_path / "roles" / name / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / name / "tasks" / "main.yml").write_text(tasks)


def test_a_role_skipped_by_when_runs_at_its_next_loading_and_only_once_after(tmp_path):
    role(tmp_path, "a", "- debug: {msg: A}\n")
    role(tmp_path, "set_var", "- set_fact: {role_set_var: true}\n")
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          roles:
            - {role: a, when: role_set_var is defined}
            - set_var
            - {role: a, when: role_set_var is defined}
            - {role: a, when: role_set_var is defined}
        """)
    assert code == 0
    assert shown(hosts["localhost"]) == [{"msg": "A"}]
    assert hosts["localhost"]["recap"]["ok"] == 2 and hosts["localhost"]["recap"]["skipped"] == 1


def test_ignore_unreachable_keeps_the_host_and_counts_ok_and_ignored(tmp_path):
    (tmp_path / "inv").write_text("[g]\ngone ansible_host=127.0.0.1 ansible_port=1 ansible_connection=ssh\n"
                                  "here ansible_connection=local\n")
    role(tmp_path, "reach", "- ping: {data: reachable}\n  register: answer\n")
    code, hosts = apply(tmp_path, """\
        - hosts: g
          gather_facts: false
          ignore_unreachable: yes
          roles: [reach, reach]
          tasks:
            - debug: {msg: "{{ answer.ping | default('no answer') }}"}
        - hosts: g
          gather_facts: false
          tasks:
            - ping:
        """, inventory=str(tmp_path / "inv"))
    gone, here = hosts["gone"], hosts["here"]
    # the role did not complete on `gone` (unreachable), so it runs again there; on `here` once
    assert [t["status"] for t in gone["tasks"][:2]] == ["unreachable", "unreachable"]
    assert all(t["ignored"] for t in gone["tasks"][:2])
    assert shown(gone) == [{"msg": "no answer"}] and shown(here) == [{"msg": "reachable"}]
    assert gone["recap"]["ok"] == 3 and gone["recap"]["ignored"] == 2
    # the second play does not ignore it: the host is unreachable there, and the run says so
    assert gone["unreachable"] and gone["recap"]["unreachable"] == 1 and code & 8
    assert here["recap"] == {**here["recap"], "ok": 3, "ignored": 0, "unreachable": 0}


def test_ping_answers_its_data_and_crash_fails(tmp_path):
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - ansible.builtin.ping:
              register: plain
            - ping: data=crash
              ignore_errors: true
            - debug: {msg: "{{ plain.ping }} {{ plain.changed }}"}
        """)
    tasks = hosts["localhost"]["tasks"]
    assert code == 0 and tasks[1]["status"] == "failed" and "boom" in tasks[1]["error"]
    assert shown(hosts["localhost"]) == [{"msg": "pong False"}]


def test_an_include_tasks_handler_may_listen_where_a_task_include_may_not(tmp_path):
    # ansible-core's HandlerTaskInclude takes `listen` (its include_import/valid_include_keywords
    # target); a task's include_tasks does not
    (tmp_path / "inc.yml").write_text("- debug: {msg: listened}\n")
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          handlers:
            - include_tasks: {file: inc.yml}
              listen: [hear]
          tasks:
            - command: "true"
              notify: hear
        """)
    assert code == 0 and shown(hosts["localhost"]) == [{"msg": "listened"}]
    code, _ = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - include_tasks: {file: inc.yml}
              listen: [hear]
        """)
    assert code == 1
