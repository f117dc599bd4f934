"""Round trips and connections per host, on the session's lab nodes (issue 8). Counts, never times.

gpuconf's JSON report says how many round trips and connections it made per host; the nodes'
own sshd logs (one "Accepted publickey" line per login) confirm the connections independently.
The file tasks work under /tmp/gpuconf-perf, which each node has to itself.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]

TWO_PLAYS = """\
- name: first play
  hosts: all
  tasks:
    - name: a directory
      directory: {path: /tmp/gpuconf-perf, mode: "0755"}
    - name: a file
      file: {path: /tmp/gpuconf-perf/a.conf, content: "a\\n", mode: "0644"}
    - name: a line
      line: {path: /tmp/gpuconf-perf/b.conf, line: "b=1"}
- name: second play, same hosts, same connection
  hosts: all
  tasks:
    - name: another file
      file: {path: /tmp/gpuconf-perf/c.conf, content: "c\\n", mode: "0644"}
"""
TASKS = 4
PLAYS = 2


def gpuconf(lab, verb: str, playbook: Path, tmp_path: Path, *args: str) -> dict:
    report = tmp_path / f"{verb}-{len(list(tmp_path.iterdir()))}.json"
    done = subprocess.run([sys.executable, "-m", "gpuconf", verb, str(playbook), "-i", str(lab.inventory_path),
                           "--report", str(report), *args], cwd=PROJECT, capture_output=True, text=True,
                          timeout=600)
    assert report.exists(), done.stderr
    return json.loads(report.read_text())


def hosts_of(report: dict) -> dict[str, dict]:
    hosts = report["hosts"]
    return hosts if isinstance(hosts, dict) else {h["host"]: h for h in hosts}


class Logins:
    """Logins each node's sshd accepted since `start()`."""

    def __init__(self, lab, names):
        self.consoles = {name: lab.paths.node(name).console for name in names}
        self.offsets = {name: path.stat().st_size for name, path in self.consoles.items()}

    def counts(self) -> dict[str, int]:
        counts = {}
        for name, path in self.consoles.items():
            with open(path, "rb") as handle:
                handle.seek(self.offsets[name])
                counts[name] = handle.read().decode(errors="replace").count("Accepted publickey for ")
        return counts


@pytest.fixture
def two_plays(tmp_path, lab, ssh):
    playbook = tmp_path / "two-plays.yml"
    playbook.write_text(TWO_PLAYS)
    yield playbook
    for info in lab.nodes:
        ssh(info.name, "sudo rm -rf /tmp/gpuconf-perf")


def test_apply_then_no_op_check_round_trips_and_one_connection_per_host(lab, two_plays, tmp_path):
    names = [info.name for info in lab.nodes]
    reports = tmp_path / "reports"
    reports.mkdir()

    logins = Logins(lab, names)
    applied = hosts_of(gpuconf(lab, "apply", two_plays, reports))
    assert logins.counts() == {name: 1 for name in names}   # one login per host for both plays
    for name in names:
        host = applied[name]
        assert host["stats"]["changed"] == TASKS and host["stats"]["failed"] == 0, host
        assert host["connections"] == 1
        # one batch per play (host and task facts), then one per changed task, which also
        # re-reads what the re-check and the next tasks need; the run lock's holder is a channel
        # on the same connection, not a round trip
        assert host["round_trips"] <= PLAYS + TASKS, host["round_trips"]

    logins = Logins(lab, names)
    checked = hosts_of(gpuconf(lab, "check", two_plays, reports))
    assert logins.counts() == {name: 1 for name in names}
    for name in names:
        host = checked[name]
        assert host["in_sync"] and host["connections"] == 1
        assert host["round_trips"] <= PLAYS, host["round_trips"]   # one batch per play

    logins = Logins(lab, names)
    again = hosts_of(gpuconf(lab, "apply", two_plays, reports))
    assert logins.counts() == {name: 1 for name in names}
    for name in names:
        assert again[name]["stats"]["changed"] == 0
        assert again[name]["round_trips"] <= PLAYS   # nothing to change: no more than a check


def test_a100_playbook_check_is_at_most_two_round_trips(lab, tmp_path):
    """The real playbook, drift or not: host facts and every check's facts in one batch; a second
    only for the facts of handlers that drift notified."""
    logins = Logins(lab, ["a100-01"])
    report = gpuconf(lab, "check", PROJECT / "playbooks" / "a100-node.yml", tmp_path, "--limit", "a100-01")
    host = hosts_of(report)["a100-01"]
    assert logins.counts() == {"a100-01": 1}
    assert host["connections"] == 1
    assert 1 <= host["round_trips"] <= 2, host["round_trips"]
