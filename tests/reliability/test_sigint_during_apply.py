"""SIGINT during an apply: the commands in flight finish, no new task starts, nothing is left
half-written, and the exit code (130) and the JSON report say what ran."""
from __future__ import annotations

import signal

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
      command: {{cmd: "touch {DIR}/started; while [ ! -e {DIR}/release ]; do sleep 0.1; done; touch {DIR}/finished",
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


def test_sigint_lets_the_commands_in_flight_finish_and_starts_no_new_task(lab, tmp_path):
    for node in NODES:
        # the file being replaced is gpuadmin's, mode 0640: the atomic write keeps both
        lab.exec(node, f"mkdir -p {DIR} && printf 'old\\n' > {DIR}/first && chown gpuadmin:gpuadmin {DIR}/first "
                       f"&& chmod 0640 {DIR}/first")
    inventory = write_inventory(lab, tmp_path / "hosts.yml", NODES)
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    proc, report = start("apply", playbook, inventory)
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
            # what ran is reported as it ended; nothing after the slow command started
            assert run.statuses(node) == {"first file": "changed", "slow command": "changed"}, run.statuses(node)
            assert listing(lab, node) == ["finished", "first", "release", "started"], listing(lab, node)
            assert node_file(lab, node, f"{DIR}/first") == "one\n"
            assert stat(lab, node, f"{DIR}/first") == "640 gpuadmin:gpuadmin"
        assert "interrupted" in run.stdout + run.stderr
    finally:
        for node in NODES:
            lab.exec(node, ["rm", "-rf", "/var/tmp/gpuconf-rel"])
