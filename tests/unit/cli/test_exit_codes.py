"""Exit codes: one bitmask for check and apply (2 drift/changes, 4 failed, 8 unreachable)."""
import sys

import pytest

from gpuconf.cli.main import main
from gpuconf.results import RunResult, Status, TaskResult


def run_result(verb, *host_statuses, unreachable=(), interrupted=False, detailed=False):
    result = RunResult(verb, "site.yml", "inv", 0.0, interrupted=interrupted, detailed_exitcodes=detailed)
    for index, statuses in enumerate(host_statuses):
        host = result.host(f"node{index}")
        host.tasks = [TaskResult(host.host, "play", f"t{i}", status) for i, status in enumerate(statuses)]
    for name in unreachable:
        result.host(name).unreachable = True
    return result


OK, WOULD, CHANGED, FAILED, UNKNOWN, SKIPPED = (Status.OK, Status.WOULD_CHANGE, Status.CHANGED, Status.FAILED,
                                                Status.UNKNOWN, Status.SKIPPED)


@pytest.mark.parametrize("result, code", [
    (run_result("check", [OK, SKIPPED]), 0),
    (run_result("check", [OK, WOULD]), 2),
    (run_result("check", [OK], [WOULD], unreachable=["down"]), 10),
    (run_result("check", [FAILED]), 4),
    (run_result("check", [UNKNOWN]), 4),                     # state could not be known
    (run_result("check", [WOULD], [FAILED], unreachable=["down"]), 14),
    (run_result("apply", [CHANGED]), 0),
    (run_result("apply", [CHANGED], detailed=True), 2),
    (run_result("apply", [OK], detailed=True), 0),
    (run_result("apply", [CHANGED, FAILED], detailed=True), 6),
    (run_result("apply", unreachable=["down"]), 8),
    (run_result("check", [WOULD], [FAILED], interrupted=True), 130),
])
def test_bitmask(result, code):
    assert result.exit_code == code


def test_an_ignored_failure_is_not_counted():
    result = run_result("apply", [FAILED, CHANGED], detailed=True)
    result.hosts["node0"].tasks[0].ignored = True
    assert result.exit_code == 2


def test_drift_plus_an_unreachable_host_is_10_through_the_cli(tmp_path, capsys):
    """One host drifts (a missing file, run locally), one refuses connections."""
    (tmp_path / "hosts.yml").write_text(
        f"all:\n  hosts:\n    here: {{connection: local, python: {sys.executable}}}\n"
        "    down: {address: 127.0.0.1, port: 1, connect_retries: 0, connect_timeout: 2}\n")
    (tmp_path / "site.yml").write_text(
        f"- hosts: all\n  tasks:\n    - file: {{path: {tmp_path}/wanted, content: x}}\n")
    code = main(["check", str(tmp_path / "site.yml"), "-i", str(tmp_path / "hosts.yml")])
    out = capsys.readouterr().out
    assert code == 10, out
    assert "1 unreachable (down)" in out and "1 drifted (here: create" in out
    assert not (tmp_path / "wanted").exists()


IGNORED = ("- hosts: all\n  gather_facts: false\n  tasks:\n"
           "    - name: may fail\n      command: {cmd: 'false'}\n      ignore_errors: true\n      register: r\n"
           "    - name: after\n      assert: {that: r.failed}\n")


@pytest.mark.parametrize("extra_task, code", [("", 0), ("    - name: fails\n      command: {cmd: 'false'}\n", 4)],
                         ids=["only-ignored", "and-a-real-failure"])
def test_an_ignored_failure_does_not_fail_the_run(tmp_path, capsys, extra_task, code):
    (tmp_path / "site.yml").write_text(IGNORED + extra_task)
    (tmp_path / "hosts.yml").write_text(f"all:\n  hosts:\n    localhost: {{python: {sys.executable}}}\n")
    assert main(["apply", str(tmp_path / "site.yml"), "-i", str(tmp_path / "hosts.yml"), "-c", "local",
                 "-v"]) == code
    out = capsys.readouterr().out
    assert "ok: [localhost] after" in out  # the play went on (-v: every line)
    if not code:
        assert "1/1 converged" in out and "ignored=1" in out and "failed=0" in out
