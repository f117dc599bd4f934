"""Control flow with Ansible's names and semantics, run for real on this machine (`-c local`):
loops, blocks with rescue and always, includes and imports, changed_when/failed_when,
check_mode: false, run_once, set_fact, debug, pre_tasks/post_tasks. Check mode stays read-only."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gpuconf.cli.main import main


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def run(tmp_path: Path, capsys, verb: str, playbook: Path, hosts: str = "h1,", *extra: str) -> tuple[int, dict, str]:
    report = tmp_path / f"report-{verb}.json"
    code = main([verb, str(playbook), "-i", hosts, "-c", "local", "--no-retry-file", "--report", str(report),
                 *extra])
    out = capsys.readouterr().out
    data = json.loads(report.read_text())
    return code, data, out


def statuses(data: dict, host: str = "h1") -> list[tuple[str, str]]:
    return [(t["task"], t["status"]) for t in data["hosts"][host]["tasks"]]


def test_loop_with_label_and_register_then_a_second_apply_changes_nothing(tmp_path, capsys):
    target = tmp_path / "out"
    target.mkdir()
    playbook = write(tmp_path, "site.yml", f"""\
        - hosts: all
          gather_facts: false
          vars:
            modules: [{{name: ib_uverbs, opt: 1}}, {{name: ib_ipoib, opt: 2}}]
          tasks:
            - name: conf
              file: {{path: "{target}/{{{{ item.name }}}}.conf", content: "options {{{{ item.opt }}}}\\n"}}
              loop: "{{{{ modules }}}}"
              loop_control: {{label: "{{{{ item.name }}}}"}}
              register: confs
            - name: counted
              assert: {{that: ["confs.results | length == 2", "confs.results[1].item.name == 'ib_ipoib'"]}}
        """)
    code, data, out = run(tmp_path, capsys, "check", playbook)
    assert code == 2 and not list(target.iterdir())  # check mode wrote nothing
    assert "conf (item=ib_uverbs)" in out and "conf (item=ib_ipoib)" in out
    code, data, _ = run(tmp_path, capsys, "apply", playbook)
    assert code == 0, statuses(data)
    assert (target / "ib_ipoib.conf").read_text() == "options 2\n"
    code, data, _ = run(tmp_path, capsys, "apply", playbook, "h1,", "--detailed-exitcodes")
    assert code == 0 and {s for _, s in statuses(data)} == {"ok"}


def test_with_items_is_loop_and_a_non_list_is_an_error_at_the_task(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          tasks:
            - debug: {msg: "{{ item }}"}
              with_items: [a, b]
            - name: bad loop
              debug: {msg: "{{ item }}"}
              loop: "{{ 'text' }}"
        """)
    code, data, out = run(tmp_path, capsys, "check", playbook)
    assert code == 4
    assert [s for _, s in statuses(data)] == ["ok", "ok", "failed"]
    assert "not a list" in data["hosts"]["h1"]["tasks"][2]["error"]


def test_a_rescued_block_does_not_fail_the_host_and_always_runs(tmp_path, capsys):
    marker = tmp_path / "always"
    playbook = write(tmp_path, "site.yml", f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - block:
                - name: breaks
                  assert: {{that: "false"}}
                - name: skipped after the failure
                  debug: {{msg: no}}
              rescue:
                - name: rescue
                  file: {{path: "{tmp_path}/rescued", content: "x"}}
              always:
                - name: always
                  command: {{cmd: "touch {marker}", creates: "{marker}"}}
            - name: after the block
              debug: {{msg: goes on}}
        """)
    code, data, _ = run(tmp_path, capsys, "apply", playbook)
    assert code == 0, statuses(data)
    assert statuses(data) == [("breaks", "failed"), ("skipped after the failure", "skipped"), ("rescue", "changed"),
                              ("always", "changed"), ("after the block", "ok")]
    assert marker.exists()
    code, data, _ = run(tmp_path, capsys, "apply", playbook)   # what the rescue wrote is read again, not guessed
    assert [s for t, s in statuses(data) if t in ("rescue", "always")] == ["ok", "ok"]


def test_after_a_failed_command_the_next_task_reads_the_host_afresh(tmp_path, capsys):
    (tmp_path / "present").write_text("x")
    playbook = write(tmp_path, "site.yml", f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - {{name: fails, command: {{cmd: "exit 1"}}, ignore_errors: true}}
            - {{name: present, file: {{path: "{tmp_path}/present", content: "x"}}}}
        """)
    code, data, _ = run(tmp_path, capsys, "apply", playbook)
    assert statuses(data) == [("fails", "failed"), ("present", "ok")]


def test_in_check_mode_a_block_with_rescue_reports_what_would_run(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - block:
                - name: would write
                  file: {{path: "{tmp_path}/f", content: x}}
              rescue:
                - name: rescue
                  file: {{path: "{tmp_path}/g", content: x}}
        """)
    code, data, _ = run(tmp_path, capsys, "check", playbook)
    assert code == 2 and not (tmp_path / "f").exists()
    tasks = data["hosts"]["h1"]["tasks"]
    assert [(t["task"], t["status"], t["message"]) for t in tasks] == [
        ("would write", "would_change", f"create {tmp_path}/f"), ("rescue", "skipped", "rescue: its block did not fail")]


def test_an_unrescued_failure_runs_always_then_fails_the_host(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          tasks:
            - block:
                - block:
                    - {name: inner, assert: {that: "false"}}
                  always:
                    - {name: inner always, debug: {msg: x}}
              rescue:
                - {name: outer rescue, assert: {that: "false"}}
              always:
                - {name: outer always, debug: {msg: y}}
            - {name: never, debug: {msg: z}}
        """)
    code, data, _ = run(tmp_path, capsys, "check", playbook)
    assert code == 4
    assert statuses(data) == [("inner", "failed"), ("inner always", "ok"), ("outer rescue", "failed"),
                              ("outer always", "ok")]


def test_includes_imports_and_pre_post_tasks_in_order(tmp_path, capsys):
    write(tmp_path, "tasks/common.yml", "- {name: from include, debug: {msg: '{{ who }}'}}\n")
    write(tmp_path, "roles/extra/tasks/main.yml", "- {name: role main, debug: {msg: main}}\n")
    write(tmp_path, "roles/extra/tasks/other.yml", "- {name: role other, debug: {msg: other}}\n")
    write(tmp_path, "second.yml", "- hosts: all\n  gather_facts: false\n  tasks:\n"
                                  "    - {name: imported play, debug: {msg: p}}\n")
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          pre_tasks:
            - {name: pre, debug: {msg: pre}}
          post_tasks:
            - {name: post, debug: {msg: post}}
          tasks:
            - import_tasks: tasks/common.yml
              vars: {who: imported}
            - include_tasks: tasks/common.yml
              vars: {who: included}
              when: false
            - include_role: {name: extra}
            - include_role: {name: extra, tasks_from: other}
              tags: [other]
        - import_playbook: second.yml
        """)
    code, data, out = run(tmp_path, capsys, "check", playbook)
    assert code == 0, out
    # as ansible-core 2.19: a dynamic include is a task of its own, judged once (its `when`), and its
    # tags select the include, not the tasks it brings
    assert statuses(data) == [("pre", "ok"), ("from include", "ok"), ("include_tasks", "skipped"),
                              ("include_role : extra", "ok"), ("role main", "ok"),
                              ("include_role : extra", "ok"), ("role other", "ok"),
                              ("post", "ok"), ("imported play", "ok")]
    assert "imported" in out and data["plays"][-1] == "all"
    code, data, _ = run(tmp_path, capsys, "check", playbook, "h1,", "--tags", "other")
    assert statuses(data) == [("include_role : extra", "ok")]


def test_changed_when_failed_when_and_registered_output(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          tasks:
            - name: grep finds nothing
              shell: {cmd: "echo hello; exit 1"}
              check_mode: false
              register: found
              failed_when: found.rc not in [0, 1]
              changed_when: false
            - name: it said hello
              assert: {that: ["found.stdout_lines == ['hello']", "found.rc == 1", "not found.failed"]}
            - name: a probe that must not say hello
              probe: {command: "echo hello"}
              register: said
              failed_when: "'hello' in said.stdout"
        """)
    code, data, _ = run(tmp_path, capsys, "check", playbook)
    assert statuses(data) == [("grep finds nothing", "ok"), ("it said hello", "ok"),
                              ("a probe that must not say hello", "failed")]
    assert code == 4


def test_check_mode_false_is_refused_in_a_check_on_a_task_that_writes(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          tasks:
            - file: {path: /tmp/x, content: y}
              check_mode: false
        """)
    assert main(["check", str(playbook), "-i", "h1,", "-c", "local"]) == 1   # nothing ran
    err = capsys.readouterr().err
    assert "site.yml:3:7: check_mode: false would run task 'file path=/tmp/x content=y' (file) for real" in err


def test_check_mode_true_on_a_task_or_block_never_writes_in_apply(tmp_path, capsys):
    target = tmp_path / "out"
    playbook = write(tmp_path, "site.yml", f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - file: {{path: "{target}1", content: y}}
              check_mode: true
              register: r
            - block:
                - file: {{path: "{target}2", content: y}}
              check_mode: true
            - debug: {{msg: "{{{{ ansible_check_mode }}}} {{{{ r is changed }}}}"}}
        """)
    code, data, _ = run(tmp_path, capsys, "apply", playbook)
    assert code == 0 and not (tmp_path / "out1").exists() and not (tmp_path / "out2").exists()
    assert [t["status"] for t in data["hosts"]["h1"]["tasks"]] == ["would_change", "would_change", "ok"]
    assert data["hosts"]["h1"]["tasks"][2]["message"] == "False True"


@pytest.mark.parametrize("keyword, words", [("poll: 5", "'poll' is not supported"),
                                            ("async: 30", "'async' is not supported")])
def test_unsupported_keywords_are_refused_with_what_to_do(tmp_path, capsys, keyword, words):
    playbook = write(tmp_path, "site.yml", f"- hosts: all\n  tasks:\n    - command: {{cmd: id}}\n      {keyword}\n")
    assert main(["validate", str(playbook), "-i", "h1,"]) == 1
    assert words in capsys.readouterr().err


def test_run_once_runs_on_one_host_and_every_host_registers_its_result(tmp_path, capsys):
    counter = tmp_path / "count"
    playbook = write(tmp_path, "site.yml", f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - name: once
              shell: {{cmd: "echo ran >> {counter}; echo token"}}
              check_mode: false
              run_once: true
              register: once
            - assert: {{that: "once.stdout == 'token'"}}   # Ansible cuts the trailing newline
        """)
    # check mode: three local "hosts" are this one machine, and apply holds its run lock per host
    code, data, _ = run(tmp_path, capsys, "check", playbook, "h1,h2,h3,")
    assert code == 0
    assert counter.read_text() == "ran\n"
    skipped = [h for h in data["hosts"] if data["hosts"][h]["tasks"][0]["status"] == "skipped"]
    assert len(skipped) == 2


def test_set_fact_and_debug_work_in_check_mode_and_last_across_plays(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          tasks:
            - set_fact: {branch: "{{ 530 + 5 }}", label: "driver-{{ 535 }}"}
            - debug: {var: branch}
        - hosts: all
          gather_facts: false
          tasks:
            - debug: {msg: "{{ label }} {{ branch + 1 }}"}
        """)
    code, data, _ = run(tmp_path, capsys, "check", playbook)
    assert code == 0
    messages = [t["message"] for t in data["hosts"]["h1"]["tasks"]]
    assert messages == ["set branch, label", "branch = 535", "driver-535 536"]
