"""SIGINT during an apply: the commands in flight finish, no new task starts, nothing is left
half-written, and the exit code (130), the summary, the JSON report and the JUnit XML say what
ran and what was not started: an interrupted host is never called converged (issue 31, defect 6)."""
from __future__ import annotations

import re
import signal
import xml.etree.ElementTree as ET

from tests.figures import record_fault
from tests.reliability.helpers import finish, no_traceback, node_file, start, wait_for, write_inventory, write_playbook

DIR = "/var/tmp/gpuconf-rel/sigint"
NODES = ["a100-01", "t4-01"]
PLAYBOOK = f"""\
- hosts: all
  gather_facts: false
  tasks:
    - name: first file
      file: {{path: {DIR}/first, content: "one\\n"}}
    - name: slow command
      shell: {{cmd: "touch {DIR}/started; while [ ! -e {DIR}/release ]; do sleep 0.1; done; touch {DIR}/finished",
                 timeout: 120}}
    - name: last file
      file: {{path: {DIR}/last, content: "three\\n"}}
    - name: last command
      command: {{cmd: "touch {DIR}/last-command"}}
"""


def listing(lab, node: str) -> list[str]:
    return sorted(lab.exec(node, ["ls", "-A", DIR])[1].split())


def stat(lab, node: str, path: str) -> str:
    return lab.exec(node, ["stat", "-c", "%a %U:%G", path])[1].strip()


def closing(stdout: str) -> str:
    """The closing summary as one line: a log folds it after a '; ' (report/console.py), each
    continuation indented."""
    lines = stdout.strip().splitlines()
    start = max(i for i, line in enumerate(lines) if not line.startswith(" "))
    return " ".join(line.strip() for line in lines[start:])

def test_sigint_lets_the_commands_in_flight_finish_and_starts_no_new_task(lab, tmp_path):
    for node in NODES:
        # the file being replaced is gpuadmin's, mode 0640: the atomic write keeps both
        lab.exec(node, f"mkdir -p {DIR} && printf 'old\\n' > {DIR}/first && chown gpuadmin:gpuadmin {DIR}/first "
                       f"&& chmod 0640 {DIR}/first")
    inventory = write_inventory(lab, tmp_path / "hosts.yml", NODES)
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    junit = tmp_path / "junit.xml"
    proc, report = start("apply", playbook, inventory, "--junit", str(junit))
    try:
        assert wait_for(lambda: all(node_file(lab, n, f"{DIR}/started") is not None for n in NODES), 60), \
            "the slow command never started"
        proc.send_signal(signal.SIGINT)
        record_fault("sigint")
        for node in NODES:   # the commands in flight end by themselves, after the interrupt
            lab.exec(node, ["touch", f"{DIR}/release"])
        run = finish(proc, report)
    finally:
        proc.kill()
        proc.wait()
    try:
        no_traceback(run)
        assert run.code == 130, run.stdout + run.stderr
        assert run.report["interrupted"] is True
        for node in NODES:
            # what ran is reported as it ended; nothing after the slow command started, and the tasks
            # left out are listed as not started (unknown: nobody looked at their state)
            assert run.statuses(node) == {"first file": "changed", "slow command": "changed",
                                          "last file": "unknown", "last command": "unknown"}, run.statuses(node)
            tasks = run.tasks(node)
            assert [tasks[t]["not_run"] for t in ("first file", "slow command", "last file", "last command")] \
                == [None, None, "interrupted", "interrupted"]
            assert "interrupted" in tasks["last file"]["error"]
            assert run.host(node)["interrupted"] is True and run.host(node)["in_sync"] is False
            assert listing(lab, node) == ["finished", "first", "release", "started"], listing(lab, node)
            assert node_file(lab, node, f"{DIR}/first") == "one\n"
            assert stat(lab, node, f"{DIR}/first") == "640 gpuadmin:gpuadmin"
        # the summary: no host is called converged; each says what it did and what it did not start
        summary = closing(run.stdout)
        assert summary.startswith("0/2 converged, 2 interrupted ("), summary
        for node in NODES:
            assert re.search(rf"{node}: 2 tasks done \(2 changed: first file, slow command\), "
                             r"2 not started \(last file, last command\)", summary), summary
        assert "4 tasks not started" in summary, summary
        # JUnit: the tasks not started fail their testcase; a CI job does not pass an interrupted apply
        suites = {suite.get("name"): suite for suite in ET.parse(junit).getroot()}
        for node in NODES:
            failures = {case.get("name"): case.find("failure") for case in suites[node]}
            assert failures["first file"] is None and failures["slow command"] is None
            assert "interrupted" in failures["last file"].get("message")
            assert "interrupted" in failures["last command"].get("message")
    finally:
        for node in NODES:
            lab.exec(node, ["rm", "-rf", "/var/tmp/gpuconf-rel"])


HANDLER_PLAYBOOK = f"""\
- hosts: all
  gather_facts: false
  tasks:
    - name: config
      file: {{path: {DIR}/config, content: "new\\n"}}
      notify: reload it
    - name: slow command
      shell: {{cmd: "touch {DIR}/started; while [ ! -e {DIR}/release ]; do sleep 0.1; done", timeout: 120}}
    - name: never reached
      file: {{path: {DIR}/never, content: "x\\n"}}
  handlers:
    - name: reload it
      command: {{cmd: "touch {DIR}/reloaded"}}
- name: second play
  hosts: all
  gather_facts: false
  tasks:
    - name: in the second play
      command: {{cmd: "touch {DIR}/second"}}
"""


def test_sigint_lists_the_notified_handler_and_the_later_plays_as_not_started(lab, tmp_path):
    """A fresh node, interrupted mid-apply: the change it made is named, and the work left undone
    (the rest of the play, the handler the change notified, the next play) is listed, not hidden."""
    node = NODES[0]
    lab.exec(node, ["rm", "-rf", DIR])
    lab.exec(node, ["mkdir", "-p", DIR])
    inventory = write_inventory(lab, tmp_path / "hosts.yml", [node])
    playbook = write_playbook(tmp_path / "site.yml", HANDLER_PLAYBOOK)
    proc, report = start("apply", playbook, inventory)
    try:
        assert wait_for(lambda: node_file(lab, node, f"{DIR}/started") is not None, 60), "the slow command never started"
        proc.send_signal(signal.SIGINT)
        record_fault("sigint")
        lab.exec(node, ["touch", f"{DIR}/release"])
        run = finish(proc, report)
    finally:
        proc.kill()
        proc.wait()
    try:
        no_traceback(run)
        assert run.code == 130, run.stdout + run.stderr
        tasks = run.host(node)["tasks"]
        assert [(t["play"], t["task"], t["status"], t["handler"], t["not_run"]) for t in tasks] == [
            ("all", "config", "changed", False, None),
            ("all", "slow command", "changed", False, None),
            ("all", "never reached", "unknown", False, "interrupted"),
            ("all", "reload it", "unknown", True, "interrupted"),
            ("second play", "in the second play", "unknown", False, "interrupted"),
        ], tasks
        assert listing(lab, node) == ["config", "release", "started"], listing(lab, node)
        summary = closing(run.stdout)
        assert summary == (f"0/1 converged, 1 interrupted ({node}: 2 tasks done (2 changed: config, slow command), "
                           "3 not started (never reached, handler reload it, in the second play)); "
                           "interrupted (SIGINT): 3 tasks not started on 1 host"), summary
        assert "converged (1 changed)" not in run.stdout
    finally:
        lab.exec(node, ["rm", "-rf", "/var/tmp/gpuconf-rel"])
