"""Issue 29, findings 4 and 6: the hosts of a batch act together where Ansible makes them
(gpuconf/engine/batch.py), run for real on this machine (`-c local`, check mode: three "hosts"
are this one machine). A host made slow with `sleep` shows that the order does not come from
whichever thread gets there first."""
from __future__ import annotations

from tests.unit.engine.test_control_flow import run, write


def messages(data: dict, task: str) -> dict[str, str]:
    return {host: t["message"] for host, h in data["hosts"].items() for t in h["tasks"] if t["task"] == task}


def test_max_fail_percentage_zero_stops_every_host_before_its_next_task(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          max_fail_percentage: 0
          tasks:
            - name: h2 fails, late
              shell: {cmd: "sleep 1; test {{ inventory_hostname }} != h2"}
              check_mode: false
            - name: nobody goes on
              debug: {msg: went on}
        - hosts: all
          gather_facts: false
          tasks:
            - name: the next play
              debug: {msg: never}
        """)
    code, data, _ = run(tmp_path, capsys, "check", playbook, "h1,h2,h3,")
    assert code != 0
    went_on = messages(data, "nobody goes on")
    assert "went on" not in went_on.values(), went_on
    left = {h: t["not_run"] for h, hr in data["hosts"].items() for t in hr["tasks"] if t["task"] == "nobody goes on"}
    assert left == {"h1": "max_fail_percentage", "h3": "max_fail_percentage"}
    assert "never" not in messages(data, "the next play").values()


def test_a_failure_within_max_fail_percentage_lets_the_others_go_on(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          max_fail_percentage: 50
          tasks:
            - command: {cmd: "test {{ inventory_hostname }} != h2"}
              check_mode: false
            - name: the others go on
              debug: {msg: went on}
        """)
    code, data, _ = run(tmp_path, capsys, "check", playbook, "h1,h2,h3,")
    assert code != 0
    assert messages(data, "the others go on") == {"h1": "went on", "h3": "went on"}


def test_run_once_runs_on_the_first_host_and_its_set_fact_reaches_every_host(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          tasks:
            - name: the first host comes late
              shell: {cmd: "if [ {{ inventory_hostname }} = h1 ]; then sleep 1; fi"}
              check_mode: false
            - name: once
              set_fact: {token: "from-{{ inventory_hostname }}"}
              run_once: true
            - name: every host has it
              debug: {msg: "{{ token }}"}
        """)
    code, data, _ = run(tmp_path, capsys, "check", playbook, "h1,h2,h3,")
    assert code == 0
    assert messages(data, "every host has it") == {"h1": "from-h1", "h2": "from-h1", "h3": "from-h1"}
    assert messages(data, "once") == {"h1": "set token", "h2": "run_once: ran on h1", "h3": "run_once: ran on h1"}


def test_run_once_goes_to_the_next_host_when_the_first_failed(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          tasks:
            - command: {cmd: "test {{ inventory_hostname }} != h1"}
              check_mode: false
            - name: once
              debug: {msg: "on {{ inventory_hostname }}"}
              run_once: true
        """)
    code, data, _ = run(tmp_path, capsys, "check", playbook, "h1,h2,h3,")
    assert messages(data, "once") == {"h2": "on h2", "h3": "run_once: ran on h2"}


def test_ansible_play_batch_is_the_serial_batch_and_play_hosts_all_the_play(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          serial: 2
          tasks:
            - name: batch
              debug: {msg: "{{ ansible_play_batch | join(',') }} {{ play_hosts | join(',') }}"}
            - name: all
              debug: {msg: "{{ ansible_play_hosts_all | join(',') }}"}
        """)
    code, data, _ = run(tmp_path, capsys, "check", playbook, "h1,h2,h3,")
    assert code == 0
    assert messages(data, "batch") == {"h1": "h1,h2 h1,h2", "h2": "h1,h2 h1,h2", "h3": "h3 h3"}
    assert set(messages(data, "all").values()) == {"h1,h2,h3"}
