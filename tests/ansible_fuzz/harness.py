"""Run a generated program through ansible-core (the oracle) and gpuconf, each in its own copy of
the program's directory with the local connection, and read back what each did in one shape,
an observation:

    {"exit": "ok" | "failed" | "error" | ...,
     "hosts": {HOST: {"messages": [debug message as JSON, ...],         in order
                      "registered": [[NAME, value as Ansible shapes it], ...],   in order
                      "recap": {"ok": N, "changed": N, ...}}},
     "files": {PATH: [MODE, CONTENT]}}                                 under the program's `out`

Both tools run from fork servers (forkserver.py): imported once, a child per program.
"""
from __future__ import annotations

import collections
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.ansible_fuzz.program import PLAYBOOK, Program

HERE = Path(__file__).parent
REPO = HERE.parent.parent
ANSIBLE_VENV = Path(os.environ.get("GPUCONF_ANSIBLE_VENV", REPO / "tests" / ".ansible-venv"))
ANSIBLE_PYTHON = ANSIBLE_VENV / "bin" / "python"
RECAP_KEYS = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")
# what a registered value is compared on: the keys Ansible documents as common return values, and
# a loop's (each item's result is compared on the same keys)
REGISTERED_KEYS = ("changed", "failed", "skipped", "rc", "stdout", "stdout_lines", "stderr", "stderr_lines", "msg",
                   "results", "item", "ansible_loop_var", "ansible_index_var", "ansible_facts", "skip_reason",
                   "skipped_reason", "false_condition", "attempts")
# actions whose registered `msg` is compared: the others' is the module's own text (copy: none)
MSG_OF = ("debug", "assert", "fail", "set_fact", "command", "shell")


TASK_ERROR = "Task failed: "   # how ansible-core's registered msg of a task error (not a module's result) starts
ERROR_TEXT = "<the task's error>"


def project(value: Any, action: str) -> Any:
    """A registered value on the keys compared (REGISTERED_KEYS), recursively into `results`. The
    text of a task's error (a condition, a loop or a template that could not be evaluated) is each tool's
    own (Ansible's names its file and column, gpuconf's the task and the host): that there is one
    is compared, not its words."""
    if not isinstance(value, dict):
        return value
    keys = [k for k in REGISTERED_KEYS if k in value and (k != "msg" or action in MSG_OF or "results" in value)]
    out = {k: value[k] for k in keys}
    if value.get("failed") and isinstance(out.get("msg"), str) and out["msg"] and (
            out["msg"].startswith(TASK_ERROR) or "changed" not in value):
        out["msg"] = ERROR_TEXT   # (no `changed`: an error ansible-core's task executor caught, a loop's say)
    if isinstance(out.get("results"), list):
        out["results"] = [project(item, action) for item in out["results"]]
    return out


def shown(value: Any) -> str:
    """A debug message as compared: JSON, so that a string and a list that print alike differ."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def files_under(root: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    if not root.exists():
        return found
    for path in sorted(root.rglob("*")):
        mode = oct(path.lstat().st_mode & 0o7777)
        relative = str(path.relative_to(root))
        if path.is_dir():
            found[relative] = [mode, "<directory>"]
        else:
            data = path.read_bytes()
            found[relative] = [mode, data[:4000].decode("utf-8", "replace")]
    return found


def private_run(tool: str) -> list[str]:
    """As root, gpuconf's applies share one run lock, /run/gpuconf.lock (connection/lock.py): two
    fork servers, or another gpuconf on this machine, would wait for each other. Each gpuconf
    server gets a /run of its own (a private mount namespace; nothing is mounted outside it).
    Without root each server has its own XDG_RUNTIME_DIR, where the lock then is."""
    if tool != "gpuconf" or os.geteuid() != 0 or not shutil.which("unshare"):
        return []
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs -o mode=0755 gpuconf-fuzz /run && exec "$@"', "private-run"]


class ForkServers:
    """`size` fork servers of one tool; `run` uses a free one."""

    def __init__(self, tool: str, python: str, env: dict[str, str], size: int):
        self.tool = tool
        self.free: queue.Queue[subprocess.Popen[str]] = queue.Queue()
        self.all: list[subprocess.Popen[str]] = []
        self.seconds = 0.0  # spent running programs, all servers together
        self.runs = 0
        for index in range(size):
            extra = {"XDG_RUNTIME_DIR": env["XDG_RUNTIME_DIR"] + f"-{index}"} if "XDG_RUNTIME_DIR" in env else {}
            if extra:
                os.makedirs(extra["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
            proc = subprocess.Popen([*private_run(tool), python, str(HERE / "forkserver.py"), tool], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, env={**os.environ, **env, **extra},
                                    cwd=str(REPO))
            assert proc.stdout is not None
            ready = proc.stdout.readline()
            if not ready.startswith("{"):
                raise RuntimeError(f"the {tool} fork server did not start: {ready!r}")
            self.all.append(proc)
            self.free.put(proc)

    def run(self, argv: list[str], cwd: Path, output: Path, env: dict[str, str] | None = None) -> int:
        proc = self.free.get()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd), "output": str(output),
                                         "env": env or {}}) + "\n")
            proc.stdin.flush()
            reply = json.loads(proc.stdout.readline())
            self.seconds += float(reply["seconds"])
            self.runs += 1
            return int(reply["rc"])
        finally:
            self.free.put(proc)

    def close(self) -> None:
        for proc in self.all:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(30)


@dataclass
class Tools:
    ansible: ForkServers | None
    gpuconf: ForkServers


@contextmanager
def tools(work: Path, jobs: int = 2, oracle: bool = True) -> Iterator[Tools]:
    work.mkdir(parents=True, exist_ok=True)
    ansible = None
    if oracle:
        ansible = ForkServers("ansible", str(ANSIBLE_PYTHON), ansible_env(work), jobs)
    gpuconf = ForkServers("gpuconf", sys.executable, {"XDG_RUNTIME_DIR": str(work / "xdg"),
                                                       "GPUCONF_CACHE_DIR": str(work / "cache")}, jobs)
    try:
        yield Tools(ansible, gpuconf)
    finally:
        for servers in (ansible, gpuconf):
            if servers is not None:
                servers.close()


def ansible_env(work: Path) -> dict[str, str]:
    config = work / "ansible.cfg"   # none of a user's or a program's: the settings below are all
    config.write_text("[defaults]\n")
    return {"ANSIBLE_CALLBACK_PLUGINS": str(HERE / "callback"), "ANSIBLE_STDOUT_CALLBACK": "fuzzrecord",
            "ANSIBLE_HOME": str(work / "ansible-home"), "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"),
            "ANSIBLE_REMOTE_TMP": str(work / "ansible-remote-tmp"), "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORKS": "5", "ANSIBLE_DEPRECATION_WARNINGS": "0",
            "ANSIBLE_PIPELINING": "1", "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_HOST_KEY_CHECKING": "0",
            "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
            "ANSIBLE_CONFIG": str(config), "PYTHONWARNINGS": "ignore"}


def prepare(program: Program, root: Path) -> Path:
    base = program.write(root)
    (base / "out").mkdir()
    return base


def run_ansible(servers: ForkServers, program: Program, root: Path) -> dict[str, Any]:
    base = prepare(program, root)
    record = base / "record.json"
    argv = ["-i", program.inventory, PLAYBOOK, "-e", f"out={base / 'out'}", *program.args]
    rc = servers.run(argv, base, base / "output.txt", {"FUZZ_RECORD": str(record)})
    return ansible_observation(rc, record, base)


def ansible_observation(rc: int, record: Path, base: Path) -> dict[str, Any]:
    output = (base / "output.txt").read_text(errors="replace")
    if not record.exists():
        return {"exit": "error", "hosts": {}, "files": files_under(base / "out"), "output": output[-3000:]}
    data = json.loads(record.read_text())
    exit_class = {0: "ok", 2: "failed"}.get(rc, "error")
    hosts: dict[str, Any] = {}
    for event in data["events"]:
        host = hosts.setdefault(event["host"], {"messages": [], "registered": []})
        if "msg" in event:
            looped = isinstance(event["msg"], list) and event["action"] in ("debug", "ansible.builtin.debug") \
                and event.get("looped")
            for message in (event["msg"] if looped else [event["msg"]]):
                host["messages"].append(shown(message))
        if "registered" in event:
            host["registered"].append([event["register"], project(event["registered"], _short(event["action"]))])
    for name, counts in data["recap"].items():
        recap = {"ok": counts["ok"], "changed": counts["changed"], "unreachable": counts["unreachable"],
                 "failed": counts["failures"], "skipped": counts["skipped"], "rescued": counts["rescued"],
                 "ignored": counts["ignored"]}
        hosts.setdefault(name, {"messages": [], "registered": []})["recap"] = recap
    return {"exit": exit_class, "hosts": hosts, "files": files_under(base / "out"), "output": output[-3000:]}


def _short(action: str) -> str:
    return action.rsplit(".", 1)[-1]


def run_gpuconf(servers: ForkServers, program: Program, root: Path) -> dict[str, Any]:
    base = prepare(program, root)
    report = base / "report.json"
    argv = ["apply", PLAYBOOK, "-i", program.inventory, "-e", f"out={base / 'out'}", "--no-retry-file",
            "--report", str(report), *program.args]
    rc = servers.run(argv, base, base / "output.txt")
    return gpuconf_observation(rc, report, base)


def gpuconf_observation(rc: int, report: Path, base: Path) -> dict[str, Any]:
    output = (base / "output.txt").read_text(errors="replace")
    exit_class = "error" if rc == 1 else "failed" if rc > 0 and rc & 4 else "ok" if rc in (0, 2) else f"exit {rc}"
    if exit_class == "error" or not report.exists():
        return {"exit": exit_class, "hosts": {}, "files": files_under(base / "out"), "output": output[-3000:]}
    data = json.loads(report.read_text())
    hosts: dict[str, Any] = {}
    for name, result in data["hosts"].items():
        if result["tasks"] and all(task.get("not_run") == "batch_failed" for task in result["tasks"]):
            continue  # a host of a play the run never started (every host of a batch failed before it):
            # gpuconf lists it as not run, Ansible says nothing of it (docs/ansible.md, supported differently)
        messages = [shown(_debug_value(task)) for task in result["tasks"]
                    if task["type"] == "debug" and task["status"] == "ok"]
        registered = [[entry["name"], project(entry["value"], entry.get("type", ""))]
                      for entry in result.get("registered", [])]
        recap = dict(result.get("recap", {}))
        # the tasks of a play not started for a host (its serial batch before failed whole): gpuconf
        # counts them unknown, Ansible nothing (docs/ansible.md, supported differently)
        recap["unknown"] = recap.get("unknown", 0) - sum(task.get("not_run") == "batch_failed"
                                                         for task in result["tasks"])
        shown_recap = {k: recap[k] for k in RECAP_KEYS if k in recap} | \
            {k: recap[k] for k in ("unknown", "reboot_pending") if recap.get(k)}  # gpuconf's own: never Ansible's
        hosts[name] = {"messages": messages, "registered": registered, "recap": shown_recap}
    return {"exit": exit_class, "hosts": hosts, "files": files_under(base / "out"), "output": output[-3000:]}


def _debug_value(task: dict[str, Any]) -> Any:
    data = task.get("data") or {}
    if "msg" in data:
        return data["msg"]
    return data or task["message"]


def _errors_alike(oracle: dict[str, Any], ours: dict[str, Any]) -> None:
    """Where Ansible registered a task's error (its msg made ERROR_TEXT by `project`), gpuconf's
    failed value with a message of its own is taken as the same error."""
    def alike(one: Any, two: Any) -> None:
        if isinstance(one, dict) and isinstance(two, dict):
            if one.get("msg") == ERROR_TEXT and two.get("failed") and isinstance(two.get("msg"), str) and two["msg"]:
                two["msg"] = ERROR_TEXT
            for a, b in zip(one.get("results") or [], two.get("results") or []):
                alike(a, b)

    for host, theirs in oracle.get("hosts", {}).items():
        own = ours.get("hosts", {}).get(host, {})
        mine: dict[str, list[Any]] = {}   # each name's registered values in order (a name may be registered twice)
        for name, value in own.get("registered", []):
            mine.setdefault(name, []).append(value)
        seen: collections.Counter[str] = collections.Counter()
        for name, value in theirs.get("registered", []):
            values = mine.get(name, [])
            alike(value, values[seen[name]] if seen[name] < len(values) else None)
            seen[name] += 1
        # a debug of a task's error text (ansible_failed_result.msg in a rescue): an error, each its own words
        messages = own.get("messages", [])
        for index, message in enumerate(theirs.get("messages", [])[:len(messages)]):
            if message.startswith('"' + TASK_ERROR) and messages[index].startswith('"') and len(messages[index]) > 2:
                messages[index] = message


def compare(oracle: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """What differs, one line each, first the exit class; [] when the two agree."""
    _errors_alike(oracle, ours)
    found = []
    if oracle["exit"] != ours["exit"]:
        found.append(f"exit: ansible {oracle['exit']}, gpuconf {ours['exit']}")
    if oracle["exit"] == "error" or ours["exit"] == "error":
        return found
    for host in sorted(set(oracle["hosts"]) | set(ours["hosts"])):
        a, g = oracle["hosts"].get(host, {}), ours["hosts"].get(host, {})
        for key in ("messages", "registered", "recap"):
            if key == "recap" and not any((a.get(key) or {}).values()) and not any((g.get(key) or {}).values()):
                continue  # a host that ran nothing: Ansible prints no recap line, gpuconf a line of zeros
            if a.get(key, [] if key != "recap" else {}) != g.get(key, [] if key != "recap" else {}):
                found.append(f"{host} {key}: ansible {json.dumps(a.get(key))}\n"
                             f"{' ' * len(host)} {' ' * len(key)}  gpuconf {json.dumps(g.get(key))}")
    if oracle["files"] != ours["files"]:
        for path in sorted(set(oracle["files"]) | set(ours["files"])):
            if oracle["files"].get(path) != ours["files"].get(path):
                found.append(f"file {path}: ansible {oracle['files'].get(path)}, gpuconf {ours['files'].get(path)}")
    return found


def signature(oracle: dict[str, Any], ours: dict[str, Any]) -> list[tuple[str, ...]]:
    """What differs, finely (the shrinker keeps a change only while the first of these remains):
    the exit classes, each recap field, each registered key, the messages, each file's part."""
    _errors_alike(oracle, ours)
    found: list[tuple[str, ...]] = []
    if oracle["exit"] != ours["exit"]:
        found.append(("exit", oracle["exit"], ours["exit"]))
    if oracle["exit"] == "error" or ours["exit"] == "error":
        return found
    for host in sorted(set(oracle["hosts"]) | set(ours["hosts"])):
        a, g = oracle["hosts"].get(host, {}), ours["hosts"].get(host, {})
        for field in RECAP_KEYS:
            if (a.get("recap") or {}).get(field, 0) != (g.get("recap") or {}).get(field, 0):
                found.append(("recap", field))
        theirs, mine = dict(map(tuple, a.get("registered", []))), dict(map(tuple, g.get("registered", [])))
        for name in set(theirs) | set(mine):
            one, two = theirs.get(name), mine.get(name)
            if one is None or two is None:
                found.append(("registered", "missing" if two is None else "extra"))
            elif isinstance(one, dict) and isinstance(two, dict):
                found += [("registered", key) for key in sorted(set(one) | set(two)) if one.get(key) != two.get(key)]
        if a.get("messages", []) != g.get("messages", []):
            found.append(("messages",))
    for path in sorted(set(oracle["files"]) | set(ours["files"])):
        one, two = oracle["files"].get(path), ours["files"].get(path)
        if one != two:
            found.append(("file", "missing" if two is None else "extra" if one is None else
                          "mode" if one[0] != two[0] else "content"))
    return list(dict.fromkeys(found))


def kind(differences: list[str]) -> tuple[str, ...]:
    """What a divergence is about (the shrinker keeps it): exit, messages, registered, recap, file."""
    kinds = set()
    for line in differences:
        head = line.split(":", 1)[0].split()
        if head[-1] == "says":  # what a tool's error said: a note, not a difference
            continue
        kinds.add(head[0] if head[0] in ("exit", "file") else head[-1])
    return tuple(sorted(kinds))


def both(tools_: Tools, program: Program, root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `program` through the two tools at once (each in its own copy); both observations."""
    assert tools_.ansible is not None
    results: dict[str, Any] = {}
    oracle_servers = tools_.ansible

    def oracle() -> None:
        results["ansible"] = run_ansible(oracle_servers, program, root / "ansible")

    thread = threading.Thread(target=oracle)
    thread.start()
    ours = run_gpuconf(tools_.gpuconf, program, root / "gpuconf")
    thread.join()
    return results["ansible"], ours
