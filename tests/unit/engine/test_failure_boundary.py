"""The one failure boundary: an exception nobody expected on one host becomes that host's
failed task, `internal error in <role> : <task> on <host>: <Type>: <message>`, with the
traceback in the JSON report and under -vvv only; the other hosts finish, and the recap,
the report and the retry file are written.

Both hosts are this machine (-c local, the real remote runner). One host's connection hands
back a reply the host could send but nothing expects: a file's content that is not base64
(gathering facts), or a task whose check meets a value it cannot handle."""
import json
import sys

import pytest
import yaml

from gpuconf.cli.main import main
from gpuconf.connection.local import LocalConnection
from gpuconf.engine import runner

PLAYBOOK = [{"name": "site", "hosts": "all", "roles": ["web"]}]
ROLE_TASKS = [{"name": "marker file", "file": {"path": "{{ target }}/{{ inventory_hostname }}", "content": "x\n"}}]


class GarbledStat(LocalConnection):
    """The real runner, but the host's reply for PATH carries content that is not base64."""

    path = "/proc/meminfo"

    def call(self, ops, readonly, timeout, become=None, lock=None):
        replies = super().call(ops, readonly, timeout, become, lock)
        for op, reply in zip(ops, replies, strict=True):
            if op.get("op") == "stat" and op.get("path") == self.path and reply.get("exists"):
                reply["content_b64"] = "%%% not base64 %%%"
        return replies


def project(tmp_path):
    (tmp_path / "roles" / "web" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "web" / "tasks" / "main.yml").write_text(yaml.safe_dump(ROLE_TASKS))
    (tmp_path / "site.yml").write_text(yaml.safe_dump(PLAYBOOK))
    hosts = {name: {"python": sys.executable, "connection": "local"} for name in ("good", "bad")}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": {"target": str(tmp_path)}}}))
    return tmp_path


@pytest.fixture
def garbled_on_bad(monkeypatch):
    def connect(spec, options):
        return GarbledStat(spec) if spec.host == "bad" else LocalConnection(spec)
    monkeypatch.setattr(runner, "open_connection", connect)


@pytest.mark.parametrize("path, task", [("/proc/meminfo", "gather facts")])
def test_an_unexpected_exception_fails_only_its_host(tmp_path, capsys, garbled_on_bad, path, task):
    root = project(tmp_path)
    GarbledStat.path = path
    # check: both hosts are this machine, where two applies would wait on one run lock
    code = main(["check", str(root / "site.yml"), "-i", str(root / "hosts.yml"), "--report", str(root / "r.json")])
    out, err = capsys.readouterr()
    assert code == 2 | 4, out + err
    report = json.loads((root / "r.json").read_text())
    bad = report["hosts"]["bad"]["tasks"]
    assert [t["task"] for t in bad] == [task] and bad[0]["status"] == "failed"
    assert bad[0]["error"].startswith(f"internal error in {task} on bad: ")
    assert "Traceback (most recent call last)" in bad[0]["traceback"]
    assert [t["status"] for t in report["hosts"]["good"]["tasks"]] == ["would_change"]  # the other host finished
    assert "Traceback" not in out + err and "internal error in gather facts on bad" in out
    assert "PLAY RECAP" in out
    assert (root / "site.retry").read_text().split() == ["bad"]


def test_the_traceback_shows_with_vvv(tmp_path, capsys, garbled_on_bad):
    root = project(tmp_path)
    GarbledStat.path = "/proc/meminfo"
    main(["check", str(root / "site.yml"), "-i", str(root / "hosts.yml"), "-vvv", "--no-retry-file"])
    out, _ = capsys.readouterr()
    assert "Traceback (most recent call last)" in out


def test_a_serial_that_is_not_a_count_is_refused_at_load_with_its_place(tmp_path, capsys):
    root = project(tmp_path)
    (root / "site.yml").write_text("- name: site\n  hosts: all\n  serial: '0o777'\n  roles: [web]\n")
    assert main(["check", str(root / "site.yml"), "-i", str(root / "hosts.yml")]) == 1
    err = capsys.readouterr().err
    assert "site.yml:3:3" in err and "serial must be a host count or a percentage" in err
    assert "internal error" not in err
