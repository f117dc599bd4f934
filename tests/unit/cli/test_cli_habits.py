"""The command line Ansible users reach for: ad hoc runs, --list-hosts/--list-tasks,
--syntax-check, --start-at-task, --step, -v output tails and -vvv requests, the project
configuration (gpuconf.cfg, [tool.gpuconf], GPUCONF_*). Real runs with `-c local`."""
from __future__ import annotations

import pytest

from gpuconf.cli.config import load_config
from gpuconf.cli.main import main
from gpuconf.engine.flow import StepGate
from gpuconf.errors import Location, UsageError
from gpuconf.playbook.models import TaskDef, TaskKeywords

PLAYBOOK = """\
- name: first
  hosts: all
  gather_facts: false
  tasks:
    - {name: say, shell: {cmd: "echo out-line; echo err-line >&2"}, check_mode: false, changed_when: false}
    - {name: tagged, debug: {msg: x}, tags: [t1]}
- name: second
  hosts: gpu
  gather_facts: false
  tasks:
    - {name: later, debug: {msg: y}}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "site.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts.yml").write_text("all:\n  children:\n    gpu: {hosts: {g1: {connection: local}}}\n"
                                        "    other: {hosts: {o1: {connection: local}}}\n")
    monkeypatch.chdir(tmp_path)
    for name in ("GPUCONF_CONFIG", "GPUCONF_INVENTORY", "GPUCONF_FORKS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def gpuconf(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_adhoc_runs_a_command_and_groups_identical_results(project, capsys):
    code, out, _ = gpuconf(capsys, "run", "gpu", "-i", "hosts.yml", "-a", "echo hello")
    assert code == 0
    assert out == "g1 | CHANGED | rc=0 >>\nhello\n\n"
    code, out, _ = gpuconf(capsys, "run", "g1", "-i", "hosts.yml", "-a", "echo no; exit 3")
    assert code == 4 and out.startswith("g1 | FAILED | rc=3 >>\n")
    code, _, err = gpuconf(capsys, "run", "nosuch", "-i", "hosts.yml", "-a", "true")
    assert code == 1 and "matches no host" in err


def test_list_hosts_and_list_tasks_run_nothing(project, capsys):
    code, out, _ = gpuconf(capsys, "check", "site.yml", "-i", "hosts.yml", "--list-hosts", "--list-tasks",
                           "--tags", "t1")
    assert code == 0
    assert "play #1 (all): first" in out and "hosts (2):\n      g1\n      o1" in out
    assert "play #2 (gpu): second" in out and "hosts (1):\n      g1" in out
    assert "tagged\tTAGS: [t1]" in out and "say\t" not in out


def test_syntax_check_loads_only(project, capsys):
    code, out, _ = gpuconf(capsys, "check", "site.yml", "-i", "hosts.yml", "--syntax-check")
    assert code == 0 and "syntax ok (2 play(s), 3 task(s))" in out and "PLAY" not in out
    (project / "bad.yml").write_text("- hosts: all\n  tasks:\n    - debgu: {msg: x}\n")
    code, _, err = gpuconf(capsys, "check", "bad.yml", "-i", "hosts.yml", "--syntax-check")
    assert code == 1 and "bad.yml:3:7" in err and "did you mean 'debug'" in err


def test_start_at_task_skips_what_comes_before(project, capsys):
    code, out, _ = gpuconf(capsys, "check", "site.yml", "-i", "hosts.yml", "--start-at-task", "tagged",
                           "--no-retry-file", "-l", "g1")
    assert code == 0 and "] tagged" in out and "] say" not in out and "] later" in out
    code, _, err = gpuconf(capsys, "check", "site.yml", "-i", "hosts.yml", "--start-at-task", "taged")
    assert code == 1 and "(did you mean 'tagged'?)" in err


def test_verbose_shows_output_tails_and_vvv_the_requests(project, capsys):
    code, out, _ = gpuconf(capsys, "check", "site.yml", "-i", "hosts.yml", "-l", "g1", "--no-retry-file")
    assert code == 0 and "stdout:" not in out
    code, out, _ = gpuconf(capsys, "check", "site.yml", "-i", "hosts.yml", "-l", "g1", "--no-retry-file", "-v")
    assert "    stdout:\n      out-line" in out and "    stderr:\n      err-line" in out
    assert "<g1>" not in out
    code, out, _ = gpuconf(capsys, "check", "site.yml", "-i", "hosts.yml", "-l", "g1", "--no-retry-file", "-vvv")
    assert "<g1> connect: local" in out and "<g1> read request, 1 op(s): sh echo out-line" in out


def test_step_asks_once_per_task_and_continue_stops_asking():
    asked: list[str] = []
    answers = iter(["n", "y", "c"])
    gate = StepGate(lambda name: asked.append(name) or next(answers))
    tasks = [TaskDef(f"t{i}", "debug", {"msg": "x"}, TaskKeywords.model_validate({}), Location("x")) for i in range(5)]
    assert [gate.allows(t) for t in tasks[:3]] == [False, True, True]
    assert gate.allows(tasks[0]) is False   # a second host gets the same answer, unasked
    assert gate.allows(tasks[3]) and gate.allows(tasks[4])
    assert asked == ["t0", "t1", "t2"]


def test_the_project_configuration_and_the_environment(project, capsys, monkeypatch):
    (project / "gpuconf.cfg").write_text("[defaults]\ninventory = hosts.yml\nforks = 3\nroles_path = more:extra\n")
    config = load_config(project, {})
    assert (config.inventory, config.forks) == (str(project / "hosts.yml"), 3)
    assert config.roles_path == [project / "more", project / "extra"]
    assert load_config(project, {"GPUCONF_FORKS": "7"}).forks == 7   # the environment over the file
    code, out, _ = gpuconf(capsys, "check", "site.yml", "--list-hosts")   # no -i: the configured inventory
    assert code == 0 and "hosts (2)" in out
    (project / "gpuconf.cfg").write_text("[defaults]\nfroks = 3\n")
    with pytest.raises(UsageError, match="unknown setting 'froks' .did you mean 'forks'"):
        load_config(project, {})
    (project / "gpuconf.cfg").unlink()
    (project / "pyproject.toml").write_text('[tool.gpuconf]\ninventory = "hosts.yml"\nbecome = true\n')
    config = load_config(project, {})
    assert config.become is True and config.inventory == str(project / "hosts.yml")


def test_a_playbook_elsewhere_finds_the_shipped_roles(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "node.yml").write_text("- hosts: all\n  roles: [nccl]\n")
    code, out, err = gpuconf(capsys, "check", "node.yml", "-i", "h1,", "--syntax-check")
    assert code == 0, err


def test_a_relative_inventory_is_relative_to_the_current_directory(tmp_path, capsys, monkeypatch):
    (tmp_path / "plays").mkdir()
    (tmp_path / "plays" / "site.yml").write_text("- hosts: all\n  tasks:\n    - debug: {msg: x}\n")
    (tmp_path / "plays" / "hosts.yml").write_text("all:\n  hosts: {wrong: {}}\n")
    (tmp_path / "hosts.yml").write_text("all:\n  hosts: {right: {}}\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = gpuconf(capsys, "check", "plays/site.yml", "-i", "hosts.yml", "--list-hosts")
    assert code == 0 and "right" in out and "wrong" not in out




def test_roles_lists_the_roles_and_a_roles_documented_variables(project, capsys):
    role = project / "roles" / "site_ntp"
    (role / "defaults").mkdir(parents=True)
    (role / "defaults" / "main.yml").write_text("# site_ntp: the site's time servers.\n\n"
                                                "# Servers, in order of preference.\nntp_servers: [a, b]\n"
                                                "ntp_iburst: true   # faster first sync\n")
    code, out, _ = gpuconf(capsys, "roles")
    assert code == 0 and "site_ntp" in out and "nvidia_driver" in out   # the project's, and the shipped ones
    code, out, _ = gpuconf(capsys, "roles", "site_ntp")
    assert "the site's time servers." in out
    assert 'ntp_servers = ["a", "b"]\n      Servers, in order of preference.' in out
    assert "ntp_iburst = true\n      faster first sync" in out
    code, _, err = gpuconf(capsys, "roles", "site_ntpp")
    assert code == 1 and "did you mean 'site_ntp'" in err
