"""become_user and the supported subset of delegate_to, with `-c local` (the lab test goes over SSH:
tests/lab/test_become_user_delegate.py). become_user needs root and sudo, as the test machines have."""
from __future__ import annotations

import json
import re
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest

from gpuconf.cli.main import main


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.write_text(textwrap.dedent(text))
    return path


def run(tmp_path: Path, capsys, verb: str, playbook: Path, hosts: str = "h1,", *extra: str) -> tuple[int, dict, str]:
    report = tmp_path / f"report-{verb}.json"
    code = main([verb, str(playbook), "-i", hosts, "-c", "local", "--no-retry-file", "--report", str(report),
                 *extra])
    out = capsys.readouterr().out
    return code, json.loads(report.read_text()), out


def statuses(data: dict, host: str = "h1") -> list[tuple[str, str]]:
    return [(t["task"], t["status"]) for t in data["hosts"][host]["tasks"]]


@pytest.fixture
def shared_dir():
    """A directory every user can write in (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="gpuconf-become-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_become_user_runs_reads_and_writes_as_that_user_and_check_writes_nothing(tmp_path, capsys, shared_dir):
    playbook = write(tmp_path, "site.yml", f"""\
        - hosts: all
          gather_facts: false
          become: true
          become_user: nobody
          tasks:
            - name: who
              shell: {{cmd: "id -un > {shared_dir}/who", creates: "{shared_dir}/who"}}
            - name: a file
              file: {{path: "{shared_dir}/owned", content: "hi\\n"}}
            - block:
                - name: root again
                  shell: {{cmd: "id -un > {shared_dir}/root", creates: "{shared_dir}/root"}}
              become_user: root
        """)
    code, data, _ = run(tmp_path, capsys, "check", playbook)
    assert code == 2, data
    assert [s for _, s in statuses(data)] == ["would_change"] * 3
    assert list(shared_dir.iterdir()) == []  # check mode wrote nothing, as any user
    code, data, _ = run(tmp_path, capsys, "apply", playbook)
    assert code == 0, data
    assert (shared_dir / "who").read_text() == "nobody\n"
    assert (shared_dir / "root").read_text() == "root\n"
    assert (shared_dir / "owned").owner() == "nobody"
    assert (shared_dir / "who").owner() == "nobody"
    code, data, _ = run(tmp_path, capsys, "apply", playbook)
    assert code == 0 and [s for _, s in statuses(data)] == ["ok"] * 3


def test_become_user_reads_as_that_user(tmp_path, capsys, shared_dir):
    """A file only root can read is unknown to nobody: the read ran as nobody, not as root."""
    secret = shared_dir / "secret"
    secret.write_text("x\n")
    secret.chmod(0o600)
    playbook = write(tmp_path, "site.yml", f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - probe: {{command: "cat {secret}"}}
              become: true
              become_user: nobody
              name: as nobody
              ignore_errors: true
            - probe: {{command: "cat {secret}"}}
              become: true
              name: as root
        """)
    code, data, _ = run(tmp_path, capsys, "apply", playbook)
    assert statuses(data) == [("as nobody", "failed"), ("as root", "ok")]
    assert "Permission denied" in json.dumps(data["hosts"]["h1"]["tasks"][0])


@pytest.mark.parametrize("where, text", [
    ("task", "    - command: {cmd: id}\n      become_user: 'bad name'\n"),
    ("block", "    - block:\n        - command: {cmd: id}\n      become_user: '$(reboot)'\n"),
])
def test_become_user_must_be_an_account_name(tmp_path, capsys, where, text):
    playbook = write(tmp_path, "site.yml", "- hosts: all\n  tasks:\n" + text)
    assert main(["validate", str(playbook), "-i", "h1,"]) == 1
    err = capsys.readouterr().err
    assert "site.yml:" in err and "become_user" in err


DELEGATED = """\
    - hosts: h1
      gather_facts: false
      tasks:
        - name: ask the controller host
          probe: {command: "echo slurm-ok", contains: slurm-ok}
          delegate_to: "{{ groups.all | last }}"
        - name: read on h2
          shell: {cmd: "echo from-$((40 + 2))"}
          check_mode: false
          delegate_to: h2
          register: read2
        - name: controller step
          shell: {cmd: "echo {{ inventory_hostname }} > OUT", creates: OUT}
          delegate_to: localhost
        - set_fact: {seen: "{{ read2.stdout | trim }}"}
          delegate_to: 127.0.0.1
        - name: assert on the controller
          assert: {that: ["seen == 'from-42'"]}
          delegate_to: localhost
    """


def test_delegated_reads_and_controller_steps_are_recorded_on_the_original_host(tmp_path, capsys):
    out_file = tmp_path / "local"
    playbook = write(tmp_path, "site.yml", DELEGATED.replace("OUT", str(out_file)))
    code, data, out = run(tmp_path, capsys, "check", playbook, "h1,h2", "-vvv")
    assert code == 2, data
    assert statuses(data) == [("ask the controller host", "ok"), ("read on h2", "ok"),
                              ("controller step", "would_change"), ("set_fact seen={{ read2.stdout | trim }}", "ok"),
                              ("assert on the controller", "ok")]
    assert list(data["hosts"]) == ["h1"]  # results and registered values are the original host's
    assert not out_file.exists()  # check mode: the controller step did not run
    # asked h2, not h1 (h2's first request also reads what its platform is)
    assert re.search(r"<h2> read request, 3 op\(s\): stat /etc/os-release, glob [^\n]*, sh echo slurm-ok", out)
    assert "<h2> read request, 1 op(s): sh echo from-$((40 + 2))" in out
    assert "<h1> read request, 1 op(s): sh echo" not in out
    code, data, out = run(tmp_path, capsys, "apply", playbook, "h1,h2", "-vvv")
    assert code == 0, data
    assert out_file.read_text() == "h1\n"  # run on the controller, with the original host's variables
    assert "<h2> write request" not in out  # a delegated read stays a read in apply too
    assert "<localhost> write request" in out
    assert [s for _, s in statuses(data)] == ["ok", "ok", "changed", "ok", "ok"]


def test_a_delegate_outside_the_inventory_fails_the_task_not_the_host(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          tasks:
            - probe: {command: "true"}
              delegate_to: slurmctl
              name: asked
              ignore_errors: true
            - probe: {command: "true"}
              name: after
        """)
    code, data, _ = run(tmp_path, capsys, "apply", playbook)
    assert statuses(data) == [("asked", "failed"), ("after", "ok")]
    assert "delegate_to: 'slurmctl' is not in the inventory" in data["hosts"]["h1"]["tasks"][0]["error"]


@pytest.mark.parametrize("task, words", [
    ("file: {path: /tmp/x, content: y}\n      delegate_to: h2", "delegate_to another host is supported for reads only"),
    ("command: {cmd: touch /tmp/x}\n      delegate_to: h2", "a command marked `check_mode: false`"),
    ("file: {path: /tmp/x, content: y}\n      delegate_to: localhost",
     "delegate_to: localhost is supported for command, probe, assert, debug, set_fact"),
    ("service: {name: x, state: started}\n      delegate_to: 127.0.0.1", "not for 'service'"),
])
def test_delegated_writes_are_refused_at_load_saying_what_is_supported(tmp_path, capsys, task, words):
    playbook = write(tmp_path, "site.yml", f"- hosts: all\n  tasks:\n    - {task}\n")
    assert main(["validate", str(playbook), "-i", "h1,h2"]) == 1
    err = capsys.readouterr().err
    assert "site.yml:4:7:" in err and words in err


def test_an_unreachable_delegate_fails_the_task_and_the_host_goes_on(tmp_path, capsys):
    inventory = write(tmp_path, "hosts.yml", """\
        all:
          hosts:
            h1: {connection: local}
            h2: {address: 127.0.0.1, port: 9, connect_retries: 0, connect_timeout: 2}
        """)
    playbook = write(tmp_path, "site.yml", """\
        - hosts: h1
          gather_facts: false
          tasks:
            - probe: {command: "true"}
              delegate_to: h2
              name: asked
              ignore_errors: true
            - probe: {command: "true"}
              name: after
        """)
    report = tmp_path / "report.json"
    code = main(["apply", str(playbook), "-i", str(inventory), "--no-retry-file", "--report", str(report)])
    data = json.loads(report.read_text())
    assert code == 0, data
    assert statuses(data) == [("asked", "failed"), ("after", "ok")]
    assert data["hosts"]["h1"]["tasks"][0]["error"].startswith("delegate_to h2: ")
    assert not data["hosts"]["h1"].get("unreachable")


def test_become_user_of_a_role_and_an_include_reaches_their_tasks(tmp_path, capsys, shared_dir):
    (tmp_path / "roles" / "whoami" / "tasks").mkdir(parents=True)
    write(tmp_path, "roles/whoami/tasks/main.yml", f"""\
        - shell: {{cmd: "id -un > {shared_dir}/role", creates: "{shared_dir}/role"}}
        """)
    write(tmp_path, "more.yml", f"""\
        - shell: {{cmd: "id -un > {shared_dir}/included", creates: "{shared_dir}/included"}}
        """)
    playbook = write(tmp_path, "site.yml", """\
        - hosts: all
          gather_facts: false
          become: true
          roles:
            - {role: whoami, become_user: nobody}
          tasks:
            - include_tasks:   # become_user on the include itself is refused, as by Ansible: apply passes it on
                file: more.yml
                apply: {become_user: nobody}
        """)
    code, data, _ = run(tmp_path, capsys, "apply", playbook)
    assert code == 0, data
    assert (shared_dir / "role").read_text() == "nobody\n"
    assert (shared_dir / "included").read_text() == "nobody\n"


def test_a_templated_delegate_of_a_controller_task_loads_and_runs(tmp_path, capsys):
    playbook = write(tmp_path, "site.yml", """\
        - hosts: h1
          gather_facts: false
          vars: {other: h2}
          tasks:
            - name: said
              debug: {msg: "from {{ inventory_hostname }}"}
              delegate_to: "{{ other }}"
            - name: set
              set_fact: {seen: yes}
              delegate_to: "{{ other }}"
        """)
    code, data, _ = run(tmp_path, capsys, "apply", playbook, "h1,h2")
    assert code == 0, data
    assert statuses(data) == [("said", "ok"), ("set", "ok")]


def test_a_templated_delegate_may_write_where_it_renders_to_the_controller(tmp_path, capsys):
    out_file = tmp_path / "local"
    playbook = write(tmp_path, "site.yml", f"""\
        - hosts: h1
          gather_facts: false
          vars: {{here: "127.0.0.1", other: h2}}
          tasks:
            - name: on the controller
              command: {{cmd: "touch {out_file}", creates: "{out_file}"}}
              delegate_to: "{{{{ here }}}}"
            - name: elsewhere
              command: {{cmd: "touch /tmp/nope"}}
              delegate_to: "{{{{ other }}}}"
              ignore_errors: true
        """)
    code, data, _ = run(tmp_path, capsys, "apply", playbook, "h1,h2")
    assert out_file.exists()
    assert statuses(data) == [("on the controller", "changed"), ("elsewhere", "failed")]
    assert "delegate_to another host is supported for reads only" in data["hosts"]["h1"]["tasks"][1]["error"]
