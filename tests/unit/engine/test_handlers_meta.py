"""Handlers and `meta:` as Ansible runs them (issue 38, class 3; ansible-core's handlers target):
real CLI runs on this machine (`-c local`), read back from the JSON report."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gpuconf.cli.main import main
from gpuconf.errors import PlaybookError
from gpuconf.playbook.loader import load_playbook


def run(tmp_path: Path, text: str, *extra: str, hosts: str = "h1,", files: dict[str, str] | None = None
        ) -> tuple[int, dict[str, list[tuple[str, str, str]]]]:
    """Apply the playbook; per host, (task, status, message) of every result, in order."""
    for name, body in (files or {}).items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
    playbook = tmp_path / "site.yml"
    playbook.write_text(textwrap.dedent(text))
    report = tmp_path / "report.json"
    code = main(["apply", str(playbook), "-i", hosts, "-c", "local", "--no-retry-file", "--report", str(report),
                 *extra])
    hosts_seen = json.loads(report.read_text())["hosts"] if report.exists() else {}
    return code, {host: [(t["task"], t["status"], t["message"]) for t in data["tasks"]]
                  for host, data in hosts_seen.items()}


def messages(results: list[tuple[str, str, str]]) -> list[str]:
    return [message for _, status, message in results if status in ("ok", "changed") and message]


def test_changed_when_false_does_not_notify_and_a_changed_debug_does(tmp_path):
    _, hosts = run(tmp_path, """\
        - hosts: all
          gather_facts: false
          tasks:
            - debug: {msg: quiet}
              changed_when: false
              notify: h1
            - debug: {msg: loud}
              changed_when: true
              notify: h2
          handlers:
            - {name: h1, debug: {msg: h1 ran}}
            - {name: h2, debug: {msg: h2 ran}}
        """)
    assert messages(hosts["h1"]) == ["quiet", "loud", "h2 ran"]


def test_pre_tasks_handlers_run_before_the_roles_and_tasks(tmp_path):
    _, hosts = run(tmp_path, """\
        - hosts: all
          gather_facts: false
          pre_tasks:
            - {debug: {msg: pre}, changed_when: true, notify: h}
          tasks:
            - debug: {msg: task}
          handlers:
            - {name: h, debug: {msg: handler}}
        """)
    assert messages(hosts["h1"]) == ["pre", "handler", "task"]


def test_flush_handlers_runs_them_at_once_and_each_once(tmp_path):
    _, hosts = run(tmp_path, """\
        - hosts: all
          gather_facts: false
          tasks:
            - {debug: {msg: first}, changed_when: true, notify: h}
            - meta: flush_handlers
            - debug: {msg: after}
          handlers:
            - {name: h, debug: {msg: handler}}
        """)
    assert messages(hosts["h1"]) == ["first", "triggered running handlers for h1", "handler", "after"]


def test_a_handler_notifies_another_even_an_earlier_one_and_none_loops(tmp_path):
    _, hosts = run(tmp_path, """\
        - hosts: all
          gather_facts: false
          tasks:
            - {debug: {msg: go}, changed_when: true, notify: [h2, self]}
          handlers:
            - {name: h1, debug: {msg: h1 ran}, changed_when: true, notify: h2}
            - {name: h2, debug: {msg: h2 ran}, changed_when: true, notify: h1}
            - {name: self, debug: {msg: self ran}, changed_when: true, notify: self}
        """)
    assert sorted(messages(hosts["h1"])[1:]) == ["h1 ran", "h2 ran", "self ran"]


def test_the_last_loaded_handler_of_a_name_wins_and_listen_reaches_every_listener(tmp_path):
    _, hosts = run(tmp_path, """\
        - hosts: all
          gather_facts: false
          tasks:
            - {debug: {msg: go}, changed_when: true, notify: [same, topic]}
          handlers:
            - {name: same, debug: {msg: first same}}
            - {name: same, debug: {msg: second same}}
            - {name: one, debug: {msg: one listens}, listen: topic}
            - {name: two, debug: {msg: two listens}, listen: topic}
        """)
    assert messages(hosts["h1"]) == ["go", "second same", "one listens", "two listens"]


def test_a_role_handler_is_found_by_role_and_name_and_a_templated_notify_by_its_value(tmp_path):
    _, hosts = run(tmp_path, """\
        - hosts: all
          gather_facts: false
          vars: {which: r}
          roles: [r]
          tasks:
            - {debug: {msg: go}, changed_when: true, notify: "{{ which }} : restart"}
        """, files={"roles/r/handlers/main.yml": "- {name: restart, debug: {msg: role handler}}\n"})
    assert messages(hosts["h1"]) == ["go", "role handler"]


def test_an_include_tasks_handler_runs_its_file_and_a_block_handler_is_refused(tmp_path):
    _, hosts = run(tmp_path, """\
        - hosts: all
          gather_facts: false
          tasks:
            - {debug: {msg: go}, changed_when: true, notify: included}
          handlers:
            - name: included
              include_tasks: more.yml
        """, files={"more.yml": "- debug: {msg: one}\n- debug: {msg: two}\n"})
    assert messages(hosts["h1"]) == ["go", "included: more.yml for h1", "one", "two"]
    (tmp_path / "bad.yml").write_text("- hosts: all\n  handlers:\n    - block:\n        - debug: {msg: x}\n")
    with pytest.raises(PlaybookError, match="Using a block as a handler is not supported"):
        load_playbook(tmp_path / "bad.yml")


def test_force_handlers_runs_the_notified_handlers_of_a_host_that_failed(tmp_path):
    play = """\
        - hosts: all
          gather_facts: false
          tasks:
            - {debug: {msg: go}, changed_when: true, notify: h}
            - {fail: {msg: boom}}
          handlers:
            - {name: h, debug: {msg: handler}}
        """
    code, hosts = run(tmp_path, play)
    assert code & 4 and "handler" not in messages(hosts["h1"])
    code, hosts = run(tmp_path, play, "--force-handlers")
    assert code & 4 and messages(hosts["h1"])[-1] == "handler"


def test_end_host_end_role_and_end_play(tmp_path):
    _, hosts = run(tmp_path, """\
        - hosts: all
          gather_facts: false
          roles: [r]
          tasks:
            - meta: end_host
              when: inventory_hostname == 'h1'
            - debug: {msg: h2 goes on}
            - meta: end_play
            - debug: {msg: never}
        - hosts: all
          gather_facts: false
          tasks:
            - debug: {msg: next play}
        """, hosts="h1,h2,", files={"roles/r/tasks/main.yml": """\
        - debug: {msg: in role}
        - meta: end_role
        - debug: {msg: never in role}
        """})
    for host in ("h1", "h2"):
        assert "never in role" not in messages(hosts[host]) and "never" not in messages(hosts[host])
        assert messages(hosts[host])[-1] == "next play"
    assert "h2 goes on" in messages(hosts["h2"]) and "h2 goes on" not in messages(hosts["h1"])


def test_a_notify_of_a_templated_name_that_finds_no_handler_fails_the_task(tmp_path):
    code, hosts = run(tmp_path, """\
        - hosts: all
          gather_facts: false
          vars: {name: missing}
          tasks:
            - {debug: {msg: go}, changed_when: true, notify: "{{ name }}"}
          handlers:
            - {name: h, debug: {msg: handler}}
        """)
    assert code & 4
    assert hosts["h1"][0][1] == "failed"


def test_a_handler_whose_name_cannot_be_rendered_is_unusable_and_said_once(tmp_path, capsys):
    code, hosts = run(tmp_path, """\
        - hosts: all
          gather_facts: false
          tasks:
            - debug: {msg: notify}
              changed_when: true
              notify: plain
          handlers:
            - name: "with {{ not_defined }}"
              debug: {msg: never}
            - name: plain
              debug: {msg: plain ran}
        """, hosts="h1,h2")
    assert code == 0
    assert messages(hosts["h1"]) == ["notify", "plain ran"]
    err = capsys.readouterr().err
    assert err.count("gpuconf: warning: Handler 'with {{ not_defined }}' is unusable") == 1
