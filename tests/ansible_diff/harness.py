"""The differential suite's harness: one playbook, run by ansible-playbook (the oracle) and by
gpuconf against the same lab nodes, each in its own directory (`base`), and what each left behind
read back in the same shape so that the test compares like with like.

A playbook's first lines may hold its case's settings, `#| key: value`:
  verb: check            run `ansible-playbook --check` and `gpuconf check` (default: apply)
  args: -e x=1 --tags t  more arguments, given to both tools
  finding: 2             the finding of issue 29 that the case covers (for the report only)
  refused: TEXT          both refuse the playbook; gpuconf's message names TEXT
  differs: TEXT          a documented difference (docs/ansible.md): Ansible runs it, gpuconf refuses
                         it at load with a message that names TEXT
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
PLAYBOOKS = HERE / "playbooks"
CALLBACKS = HERE / "callback"
ANSIBLE_VENV = Path(os.environ.get("GPUCONF_ANSIBLE_VENV", HERE.parent / ".ansible-venv"))
ANSIBLE_PLAYBOOK = ANSIBLE_VENV / "bin" / "ansible-playbook"
ROOT = "/tmp/gpuconf-ansdiff"   # on the nodes: ROOT/<tool>/<case>/...
ONE_GPUCONF = threading.Lock()
ITEM = re.compile(r" \(item=.*\)$")
ROLE_PREFIX = re.compile(r"^[A-Za-z0-9_.-]+ : ")   # Ansible names a role's task "ROLE : NAME"
# Ansible's bookkeeping events, which gpuconf runs no task for (includes are read at load)
NOT_SHOWN_BY_ANSIBLE = ("an earlier task of its block failed",)
GPUCONF_UNCOUNTED = ("include_tasks", "include_role", "meta")
UNCOUNTED = ("include_tasks", "ansible.builtin.include_tasks", "include_role", "ansible.builtin.include_role")


@dataclass
class Case:
    name: str
    path: Path
    settings: dict[str, str]

    @property
    def verb(self) -> str:
        return self.settings.get("verb", "apply")

    @property
    def args(self) -> list[str]:
        return shlex.split(self.settings.get("args", ""))


@dataclass
class Outcome:
    """What one tool did with one case."""

    exit_class: str                       # ok, failed, unreachable, refused
    output: str
    tasks: dict[str, list[tuple[str, str]]] = field(default_factory=dict)   # host -> [(task, status)]
    messages: dict[str, list[Any]] = field(default_factory=dict)           # host -> debug msgs, in order
    counts: dict[str, dict[str, int]] = field(default_factory=dict)        # host -> ok/changed/failed/skipped
    recap: dict[str, dict[str, int]] = field(default_factory=dict)         # Ansible's own PLAY RECAP


def cases() -> list[Case]:
    found = []
    for path in sorted(PLAYBOOKS.glob("*.yml")):
        settings = {}
        for line in path.read_text().splitlines():
            if not line.startswith("#|"):
                break
            key, _, value = line[2:].partition(":")
            settings[key.strip()] = value.strip()
        found.append(Case(path.stem, path, settings))
    return found


def write_inventory(lab: Any, path: Path) -> Path:
    """One inventory both tools read: Ansible's connection variables (which gpuconf accepts too),
    plus gpuconf's known_hosts_file; Ansible gets the same known_hosts through its ssh arguments."""
    hosts = {info.name: {"ansible_host": info.address} for info in lab.nodes}
    data = {"all": {
        "vars": {"ansible_port": lab.state["port"], "ansible_user": "gpuadmin",
                 "ansible_ssh_private_key_file": str(lab.client_key), "ansible_become": True,
                 "ansible_python_interpreter": "/usr/bin/python3", "known_hosts_file": str(lab.known_hosts)},
        "children": {
            "gpu": {"hosts": {name: hosts[name] for name in hosts if name.startswith("a100")}},
            "t4": {"hosts": {name: hosts[name] for name in hosts if name.startswith("t4")}},
        }}}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def control_dir(work: Path) -> Path:
    """Where ssh keeps Ansible's master connections: a short path of its own in /tmp, as a Unix socket's
    path has at most 107 bytes and ssh adds 57 to it (the %C hash, then a temporary suffix), which
    pytest's tmp_path under a pytest-xdist worker (/tmp/pytest-of-root/pytest-N/popen-gwN/...) overruns."""
    path = Path("/tmp") / f"ansdiff-{hashlib.sha1(str(work).encode()).hexdigest()[:10]}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def ansible_env(lab: Any, work: Path, record: Path) -> dict[str, str]:
    ssh_args = (f"-o UserKnownHostsFile={lab.known_hosts} -o StrictHostKeyChecking=yes -o ControlMaster=auto "
                f"-o ControlPersist=60s -o ControlPath={control_dir(work)}/cp-%C")
    return {**os.environ, "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "ANSIBLE_STDOUT_CALLBACK": "diffrecord",
            "DIFF_RECORD": str(record), "ANSIBLE_PIPELINING": "1", "ANSIBLE_SSH_ARGS": ssh_args,
            "ANSIBLE_HOME": str(work / "ansible-home"), "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORKS": "5",
            "ANSIBLE_DEPRECATION_WARNINGS": "0", "PYTHONWARNINGS": "ignore"}


def run_ansible(case: Case, inventory: Path, lab: Any, work: Path) -> Outcome:
    record = work / f"{case.name}.ansible.json"
    argv = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(case.path), "-e", f"base={ROOT}/ansible/{case.name}",
            *case.args, *(["--check"] if case.verb == "check" else [])]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=case.path.parent,
                          env=ansible_env(lab, work, record))
    exit_class = {0: "ok", 2: "failed", 3: "unreachable", 4: "unreachable"}.get(done.returncode, "refused")
    outcome = Outcome(exit_class, done.stdout + done.stderr)
    if not record.exists():   # refused before any play: no recap
        outcome.exit_class = "refused"
        return outcome
    data = json.loads(record.read_text())
    if done.returncode == 4 and not data["recap"]:
        outcome.exit_class = "refused"
    for event in data["events"]:
        host = event["host"]
        if event["action"] in UNCOUNTED:
            continue
        status = "failed" if event["status"] == "ignored" else event["status"]   # gpuconf: failed, and goes on
        outcome.tasks.setdefault(host, []).append((ROLE_PREFIX.sub("", event["task"]), status))
        if "msg" in event and event["status"] == "ok":
            outcome.messages.setdefault(host, []).append(event["msg"])
    outcome.recap = data["recap"]
    return outcome


def run_gpuconf(case: Case, inventory: Path, work: Path) -> Outcome:
    report = work / f"{case.name}.gpuconf.json"
    argv = [sys.executable, "-m", "gpuconf", case.verb, str(case.path), "-i", str(inventory), "--no-retry-file",
            "--report", str(report), "-e", f"base={ROOT}/gpuconf/{case.name}", *case.args]
    with ONE_GPUCONF:   # an apply holds each host's run lock: two at once would find the host busy
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=case.path.parent)
    code = done.returncode
    exit_class = "refused" if code == 1 else "unreachable" if code & 8 else "failed" if code & 4 else \
        "ok" if code in (0, 2) else f"exit {code}"
    outcome = Outcome(exit_class, done.stdout + done.stderr)
    if exit_class == "refused" or not report.exists():
        return outcome
    for host, result in json.loads(report.read_text())["hosts"].items():
        tasks: list[tuple[str, str, str]] = []   # (task, status, location): a loop's items fold into one
        messages: list[Any] = []
        for task in result["tasks"]:
            # Ansible shows nothing for a task that a failed block step or run_once kept from a host,
            # and its includes and meta steps are not counted on its side (UNCOUNTED)
            if task.get("not_run") or (task["status"] == "skipped" and task["message"] in NOT_SHOWN_BY_ANSIBLE) \
                    or task["message"].startswith("run_once: ran on ") or task["type"] in GPUCONF_UNCOUNTED:
                continue
            name = ITEM.sub("", task["task"])
            status = {"would_change": "changed"}.get(task["status"], task["status"])
            if task["type"] == "debug" and status == "ok":
                messages.append(task["message"])
            looped = name != task["task"]
            if looped and tasks and tasks[-1][0] == name and tasks[-1][2] == task["location"]:
                before = tasks[-1][1]
                status = next(s for s in ("failed", "changed", "ok", "skipped") if s in (before, status))
                tasks[-1] = (name, status, task["location"])
            else:
                tasks.append((name, status, task["location"]))
        if tasks:
            outcome.tasks[host] = [(name, status) for name, status, _ in tasks]
        if messages:
            outcome.messages[host] = messages
    return outcome


def normalize(case: Case, outcome: Outcome) -> Outcome:
    """The per-host counts, from the tasks each host ran (a loop once, as Ansible's recap counts it);
    with `skipped: ignore`, skipped tasks are left out on both sides (a documented difference)."""
    if case.settings.get("skipped", "").startswith("ignore"):
        outcome.tasks = {host: [t for t in tasks if t[1] != "skipped"] for host, tasks in outcome.tasks.items()}
        outcome.tasks = {host: tasks for host, tasks in outcome.tasks.items() if tasks}
    outcome.counts = {host: {key: sum(1 for _, status in tasks if status == key)
                             for key in ("ok", "changed", "failed", "skipped")} for host, tasks in outcome.tasks.items()}
    return outcome


def ansible_messages(outcome: Outcome) -> dict[str, list[Any]]:
    """Ansible's debug messages as gpuconf shows them: a loop's one per item."""
    flat: dict[str, list[Any]] = {}
    for host, messages in outcome.messages.items():
        for message in messages:
            for one in message if isinstance(message, list) else [message]:
                flat.setdefault(host, []).append(one if isinstance(one, str) else str(one))
    return flat


def left_behind(lab: Any, ssh_client: Any, ssh_run: Any) -> dict[str, dict[str, tuple[str, ...]]]:
    """Every file and directory under ROOT on every node: '<node>:<tool>/<case>/<path>' ->
    (type, mode, owner, group, sha256 of the content)."""
    state: dict[str, dict[str, tuple[str, ...]]] = {}
    script = (f"cd {ROOT} 2>/dev/null || exit 0; find . -mindepth 1 -printf '%P\\t%y\\t%m\\t%u\\t%g\\n' | "
              "while IFS='\t' read -r p y m u g; do h=-; [ \"$y\" = f ] && h=$(sha256sum \"$p\" | cut -c1-16); "
              "printf '%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n' \"$p\" \"$y\" \"$m\" \"$u\" \"$g\" \"$h\"; done")
    for info in lab.nodes:
        client = ssh_client(lab, info.name)
        try:
            status, out, err = ssh_run(client, "sudo sh -c " + shlex.quote(script))
        finally:
            client.close()
        assert status == 0, err
        for line in out.splitlines():
            path, *rest = line.split("\t")
            state[f"{info.name}:{path}"] = tuple(rest)
    return state


def files_of(state: dict[str, dict[str, tuple[str, ...]]], tool: str, case: str) -> dict[str, Any]:
    prefix = f"{tool}/{case}"
    found = {}
    for key, value in state.items():
        node, _, path = key.partition(":")
        if path == prefix or path.startswith(prefix + "/"):
            found[f"{node}:{path[len(prefix):] or '/'}"] = value
    return found
