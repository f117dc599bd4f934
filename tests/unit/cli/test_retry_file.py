"""The retry file: failed and unreachable hosts, one a line, for the next run's `--limit @FILE`."""
import json
import os
import sys

import pytest

from gpuconf.cli import retry
from gpuconf.cli.main import main
from gpuconf.results import RunResult, Status, TaskResult

PLAYBOOK = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: not broken
      assert: {that: "inventory_hostname not in broken.split(',')"}
"""


@pytest.fixture
def project(tmp_path):
    """Three hosts run here; a host fails while it is named in -e broken=..."""
    (tmp_path / "site.yml").write_text(PLAYBOOK)
    hosts = "".join(f"    {name}: {{connection: local, python: {sys.executable}}}\n" for name in ("n1", "n2", "n3"))
    (tmp_path / "hosts.yml").write_text(f"all:\n  hosts:\n{hosts}")
    return tmp_path


def check(project, broken, *args):
    """A check (its lock is shared: the three hosts, all this machine, do not wait for each other)."""
    return main(["check", str(project / "site.yml"), "-i", str(project / "hosts.yml"), "-e", f"broken={broken}",
                 *args])


def test_failed_hosts_are_written_next_to_the_playbook_and_the_next_run_retries_only_them(project, capsys):
    assert check(project, "n3,n1") == 4
    out = capsys.readouterr().out
    assert (project / "site.retry").read_text() == "n1\nn3\n"
    assert f"retry with: --limit @{project / 'site.retry'}" in out
    assert sorted(os.listdir(project)) == ["hosts.yml", "site.retry", "site.yml"]

    report = project / "report.json"
    assert check(project, "n3", "--limit", f"@{project / 'site.retry'}", "--report", str(report)) == 4
    assert sorted(json.loads(report.read_text())["hosts"]) == ["n1", "n3"]   # n2 was not run again
    assert (project / "site.retry").read_text() == "n3\n"

    capsys.readouterr()
    assert check(project, "none", "--limit", f"@{project / 'site.retry'}") == 0
    assert not (project / "site.retry").exists(), "a run with nothing to retry leaves no stale retry file"
    assert "retry with" not in capsys.readouterr().out


def test_retry_file_path_and_no_retry_file(project, capsys):
    elsewhere = project / "out" / "failed.txt"
    elsewhere.parent.mkdir()
    assert check(project, "n2", "--retry-file", str(elsewhere)) == 4
    assert elsewhere.read_text() == "n2\n" and not (project / "site.retry").exists()
    assert f"retry with: --limit @{elsewhere}" in capsys.readouterr().out

    (project / "site.retry").write_text("stale\n")
    assert check(project, "n2", "--no-retry-file") == 4
    assert (project / "site.retry").read_text() == "stale\n"   # neither written nor removed
    assert "retry with" not in capsys.readouterr().out


def test_a_retry_file_that_cannot_be_written_is_a_warning_not_a_different_exit_code(project, capsys):
    (project / "not-a-dir").write_text("")
    assert check(project, "n1", "--retry-file", str(project / "not-a-dir" / "x.retry")) == 4
    err = capsys.readouterr().err
    assert "gpuconf: warning: could not update the retry file" in err and "not-a-dir" in err
    assert "Traceback" not in err


def test_an_empty_retry_file_path_is_refused(project, capsys):
    assert check(project, "n1", "--retry-file", "") == 1
    assert "--no-retry-file" in capsys.readouterr().err


@pytest.mark.parametrize("playbook, expected", [("playbooks/x.yml", "playbooks/x.retry"),
                                                ("site.yaml", "site.retry"), ("play", "play.retry")])
def test_the_default_path_is_the_playbooks_with_retry(playbook, expected):
    assert str(retry.default_path(playbook)) == expected


def result_with(interrupted=False, **statuses):
    result = RunResult("apply", "site.yml", "inv", 0.0, interrupted=interrupted)
    for name, status in statuses.items():
        host = result.host(name)
        if status == "unreachable":
            host.unreachable = True
        else:
            host.tasks = [TaskResult(name, "play", "t", Status(status))]
    return result


def test_unreachable_failed_and_unknown_hosts_are_listed_in_inventory_order(tmp_path):
    result = result_with(b="unreachable", a="ok", c="failed", d="unknown", e="changed")
    assert retry.update(result, tmp_path / "r.retry") == tmp_path / "r.retry"
    assert (tmp_path / "r.retry").read_text() == "b\nc\nd\n"
    assert os.listdir(tmp_path) == ["r.retry"]   # written through a temp file, renamed


def test_an_interrupted_run_leaves_the_retry_file_as_it_was(tmp_path):
    (tmp_path / "r.retry").write_text("old\n")
    assert retry.update(result_with(interrupted=True, a="failed"), tmp_path / "r.retry") is None
    assert retry.update(result_with(interrupted=True, a="ok"), tmp_path / "r.retry") is None
    assert (tmp_path / "r.retry").read_text() == "old\n"


def test_a_limit_run_that_fixes_one_host_keeps_the_others_it_did_not_run(project, capsys):
    assert check(project, "n1,n3") == 4
    assert (project / "site.retry").read_text() == "n1\nn3\n"
    assert check(project, "none", "--limit", "n3") == 0   # n3 is fixed; n1 was not run: still to retry
    assert (project / "site.retry").read_text() == "n1\n"
    assert check(project, "n2", "--limit", "n2") == 4   # a new failure joins the ones not run
    assert (project / "site.retry").read_text() == "n1\nn2\n"
    assert check(project, "none") == 0   # every host ran and converged: nothing left
    assert not (project / "site.retry").exists()
