"""Issue 18's bugs, each as a user meets it: real CLI runs on this machine (`-c local`) where a run
is needed, the function itself where it is not."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuconf.cli.main import main
from gpuconf.engine.options import RunOptions
from gpuconf.engine.runner import Runner
from gpuconf.inventory.hosts import load_inventory
from gpuconf.playbook.loader import load_playbook
from gpuconf.report.text import summary
from gpuconf.results import HostResult, RunResult, Status, TaskResult
from gpuconf.templating.render import Vars, render

GPUCONF = str(Path(sys.executable).with_name("gpuconf"))


def write(tmp_path: Path, text: str, name: str = "site.yml") -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


def local(capsys, verb: str, playbook: str, *extra: str, hosts: str = "h1,") -> tuple[int, str, str]:
    code = main([verb, playbook, "-i", hosts, "-c", "local", "--no-retry-file", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def report(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "report.json").read_text())


def test_serial_stops_after_a_batch_in_which_every_host_failed(tmp_path, capsys):
    playbook = write(tmp_path, """\
        - hosts: all
          serial: 1
          gather_facts: false
          tasks:
            - name: fails everywhere
              assert: {that: "false"}
        """)
    code, out, _ = local(capsys, "check", playbook, "--report", str(tmp_path / "report.json"), hosts="h1,h2,h3,")
    assert code == 4
    hosts = report(tmp_path)["hosts"]
    assert hosts["h1"]["tasks"][0]["status"] == "failed"
    for name in ("h2", "h3"):  # Ansible stops the play: the next batches are not started
        assert [(t["status"], t["not_run"]) for t in hosts[name]["tasks"]] == [("unknown", "batch_failed")]
    assert "every host of a serial batch failed: 2 hosts not started" in out


def test_serial_goes_on_when_a_batch_has_a_host_left(tmp_path, capsys):
    playbook = write(tmp_path, """\
        - hosts: all
          serial: 2
          gather_facts: false
          tasks:
            - assert: {that: "inventory_hostname != 'h1'"}
        """)
    code, _, _ = local(capsys, "check", playbook, "--report", str(tmp_path / "report.json"), hosts="h1,h2,h3,")
    assert code == 4
    assert report(tmp_path)["hosts"]["h3"]["tasks"][0]["status"] == "ok"


def test_a_failed_probe_and_a_failed_command_register_rc_and_output(tmp_path, capsys):
    playbook = write(tmp_path, """\
        - hosts: all
          gather_facts: false
          tasks:
            - probe: {command: "echo hello; echo oops >&2; exit 3", pending_in_check: false}
              register: probed
              ignore_errors: true
            - shell: {cmd: "printf 'a\\nb\\n'; exit 5"}
              register: ran
              ignore_errors: true
            - assert:
                that:
                  - probed.rc == 3 and probed.stdout == 'hello' and probed.stderr_lines == ['oops']
                  - probed.failed and not probed.changed
                  - ran.rc == 5 and ran.stdout_lines == ['a', 'b'] and ran.failed
                fail_msg: "{{ probed | to_json }} {{ ran | to_json }}"
        """)
    code, out, _ = local(capsys, "apply", playbook)
    assert code == 0, out
    assert out.count("failed, ignored: [h1]") == 2 and "FAILED" not in out


def test_a_successful_command_registers_rc_and_stdout_lines(tmp_path, capsys):
    playbook = write(tmp_path, """\
        - hosts: all
          gather_facts: false
          tasks:
            - shell: {cmd: "echo one; echo two"}
              register: ran
            - assert: {that: ["ran.rc == 0", "ran.stdout_lines == ['one', 'two']", "ran.changed"]}
        """)
    assert local(capsys, "apply", playbook)[0] == 0


def test_a_trailing_newline_after_one_expression_is_kept():
    variables = Vars({"n": 8, "s": "ab"})
    # as ansible-core 2.19's templar: the line break is set aside, the lone expression keeps its
    # type, and a string gets its line break back
    assert render("{{ s }}\n", variables) == "ab\n" and render("x {{ n }}\n", variables) == "x 8\n"
    assert render("{{ n }}\n", variables) == 8
    # only a lone expression is native; a space around it is text, as in ansible-core 2.19
    assert render("{{ n }}", variables) == 8 and render(" {{ n }} ", variables) == " 8 "


def test_a_string_parameter_takes_an_expression_that_renders_a_number(tmp_path, capsys):
    target = tmp_path / "out"
    playbook = write(tmp_path, f"""\
        - hosts: all
          gather_facts: false
          vars: {{branch: 535}}
          tasks:
            - file: {{path: "{target}", content: "{{{{ branch }}}}"}}
        """)
    assert main(["validate", playbook, "-i", "h1,"]) == 0
    code, out, _ = local(capsys, "apply", playbook)
    assert code == 0, out
    assert target.read_text() == "535"


def test_an_undefined_variable_in_a_template_file_is_reported_at_the_template_line(tmp_path, capsys):
    write(tmp_path, "# managed\nport={{ port }}\nname={{ nosuchvar }}\n", "templates/app.conf.j2")
    playbook = write(tmp_path, f"""\
        - hosts: all
          gather_facts: false
          vars: {{port: 80}}
          tasks:
            - name: app config
              file: {{path: "{tmp_path}/app.conf", template: app.conf.j2}}
        """)
    template = tmp_path / "templates" / "app.conf.j2"
    code = main(["validate", playbook, "-i", "h1,"])
    err = capsys.readouterr().err
    assert code == 1 and f"{template}:3: 'nosuchvar' is undefined" in err, err
    code, out, _ = local(capsys, "check", playbook)
    assert code == 4 and f"{template}:3: 'nosuchvar' is undefined in task 'app config'" in out, out


def test_validate_refuses_a_missing_template_file(tmp_path, capsys):
    playbook = write(tmp_path, """\
        - hosts: all
          tasks:
            - file: {path: /etc/x.conf, template: nosuch.j2}
        """)
    assert main(["validate", playbook, "-i", "h1,"]) == 1
    assert "file 'nosuch.j2' not found" in capsys.readouterr().err


def test_validate_counts_the_hosts_of_the_plays(tmp_path, capsys):
    inventory = write(tmp_path, "all:\n  children:\n    gpu: {hosts: {g1: {}, g2: {}}}\n    db: {hosts: {d1: {}}}\n",
                      "hosts.yml")
    playbook = write(tmp_path, "- hosts: gpu\n  tasks:\n    - assert: {that: 'true'}\n")
    assert main(["validate", playbook, "-i", inventory]) == 0
    assert "1 task(s), 2 host(s): valid" in capsys.readouterr().out


def test_the_summary_names_the_first_failed_task_not_an_earlier_unknown():
    run = RunResult("check", "p.yml", "i", 0.0, 1.0)
    run.hosts["a"] = HostResult("a", [TaskResult("a", "p", "gpu clocks", Status.UNKNOWN, error="timed out"),
                                      TaskResult("a", "p", "driver", Status.FAILED, error="refused")])
    assert summary(run) == "0/1 in sync, 1 failed (a: driver: refused)"


def test_tasks_cuda_compatibility_prints_its_table(capsys):
    assert main(["tasks", "cuda_compatibility"]) == 0
    out = capsys.readouterr().out
    assert "| 12.2 | 535.54 |" in out and "Parameters:" in out


def test_a_tag_filter_that_selects_no_task_is_an_error_naming_the_tags(tmp_path, capsys):
    playbook = write(tmp_path, """\
        - hosts: all
          tasks:
            - {assert: {that: "true"}, tags: [driver]}
            - {assert: {that: "true"}, tags: [fabric, always]}
        """)
    code, out, err = local(capsys, "check", playbook, "--tags", "drivers")
    assert code == 1 and out == ""
    assert "--tags drivers selects no task" in err and "(did you mean 'driver'?)" in err
    assert "the tags it has: driver, fabric" in err
    assert local(capsys, "check", playbook, "--skip-tags", "driver,fabric")[0] == 1
    assert local(capsys, "check", playbook, "--tags", "driver")[0] == 0


def test_extra_vars_override_connection_variables(tmp_path):
    inventory = write(tmp_path, "all:\n  hosts:\n    n1: {port: 22, user: inv}\n", "hosts.yml")
    playbook = write(tmp_path, "- hosts: all\n  tasks:\n    - assert: {that: 'true'}\n")
    options = RunOptions(extra_vars={"ansible_port": 2222, "user": "ops"})
    runner = Runner(load_inventory(inventory), load_playbook(playbook), options,
                    connect=lambda spec, _: spec)  # type: ignore[arg-type,return-value]
    spec = runner.connection("n1")
    assert (spec.port, spec.user) == (2222, "ops")  # type: ignore[attr-defined]


def test_a_report_in_a_missing_directory_is_refused_not_created(tmp_path, capsys):
    playbook = write(tmp_path, "- hosts: all\n  tasks:\n    - assert: {that: 'true'}\n")
    target = tmp_path / "no" / "such" / "dir" / "x.json"
    code, _, err = local(capsys, "check", playbook, "--report", str(target))
    assert code == 1 and "does not exist" in err
    assert not (tmp_path / "no").exists()


def test_a_closed_pipe_keeps_the_runs_exit_code(tmp_path):
    """`gpuconf check ... | head -0`: the reader leaves at once; the exit code still says drift."""
    playbook = write(tmp_path, f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - file: {{path: "{tmp_path}/absent", content: "x"}}
        """)
    proc = subprocess.Popen([GPUCONF, "check", playbook, "-i", "h1,", "-c", "local", "--no-retry-file"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 2, err
    assert "Traceback" not in err and "BrokenPipe" not in err


@pytest.mark.parametrize("reboot", [False])
def test_a_held_reboot_is_marked_reboot_required_in_the_json(tmp_path, capsys, reboot):
    playbook = write(tmp_path, "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: reboot\n      reboot: {}\n")
    code, _, _ = local(capsys, "apply", playbook, "--report", str(tmp_path / "report.json"))
    task = report(tmp_path)["hosts"]["h1"]["tasks"][0]
    assert code == 16 and task["status"] == "reboot_pending" and task["reboot_required"] is True


def test_the_infiniband_role_honours_every_listed_module_and_says_when_there_is_no_hca(tmp_path, capsys):
    """Every module of infiniband_modules is a task (ib_ipoib too); and on a node with no HCA (this
    machine), apply says so instead of waiting for ports that cannot come. No module is listed for
    the apply, so nothing on this machine is changed."""
    playbook = write(tmp_path, "- hosts: all\n  roles: [infiniband]\n")
    local(capsys, "check", playbook, "-e", '{"infiniband_modules": [ib_uverbs, ib_ipoib]}',
          "--report", str(tmp_path / "report.json"))
    tasks = {t["task"]: t for t in report(tmp_path)["hosts"]["h1"]["tasks"]}
    assert {"InfiniBand module loaded now and at boot (item=ib_uverbs)",
            "InfiniBand module loaded now and at boot (item=ib_ipoib)"} <= set(tasks)
    assert tasks["An InfiniBand HCA is present"]["status"] == "skipped"   # not knowable in a check
    code, _, _ = local(capsys, "apply", playbook, "-e", '{"infiniband_modules": []}',
                       "--report", str(tmp_path / "report.json"))
    tasks = {t["task"]: t for t in report(tmp_path)["hosts"]["h1"]["tasks"]}
    hca = tasks["An InfiniBand HCA is present"]
    assert code == 4 and hca["status"] == "failed" and "no InfiniBand HCA on this node" in hca["error"]
    assert "Every port ACTIVE" not in tasks   # no 60 s wait for ports that cannot come
