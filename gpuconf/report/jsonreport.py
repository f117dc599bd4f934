"""The JSON report. Its schema is `docs/report-schema.json`; bump SCHEMA_VERSION
on any change that is not a pure addition."""
from __future__ import annotations

import datetime
import json
from pathlib import Path

from gpuconf import __version__
from gpuconf.files.bounded import write_atomic
from gpuconf.files.values import JSONValue
from gpuconf.report.redact import visible_changes, visible_error, visible_findings, visible_message, visible_output
from gpuconf.results import HostResult, RunResult, Status, TaskResult

SCHEMA_VERSION = 1
OUTPUT_TAIL = 4000  # characters of a task's stdout/stderr kept in the report


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat(timespec="milliseconds")


def _plain(value: object) -> JSONValue:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    return str(value)


def _task(task: TaskResult) -> dict[str, JSONValue]:
    stdout, stderr = visible_output(task)
    return {
        "play": task.play, "task": task.task, "role": task.role, "type": task.type,
        "status": task.status.value, "handler": task.handler, "message": visible_message(task),
        "changes": [{"summary": c.summary, "diff": None if task.secret else c.diff,
                     "before": None if task.secret else _plain(c.before),
                     "after": None if task.secret else _plain(c.after),
                     "ops": [] if task.secret else c.ops} for c in visible_changes(task)],
        "error": visible_error(task), "duration": task.duration, "location": task.location,
        "reboot_required": task.reboot_required, "secret": task.secret, "not_run": task.not_run,
        "stdout": stdout[-OUTPUT_TAIL:], "stderr": stderr[-OUTPUT_TAIL:],
        "findings": [{"probe": f.probe, "severity": f.severity, "message": f.message, "gpu": f.gpu,
                      "bus_id": f.bus_id, "value": _plain(f.value), "action": f.action,
                      "code": str(f.code) if f.code else None, "count": f.count, "rule": f.rule}
                     for f in visible_findings(task)],
        "traceback": None if task.secret else task.traceback,
        "data": None if task.secret else _plain(task.data),
        # what a debug task showed, as a value ({"msg": ...} or {"VAR": ...}), as Ansible's output shows it
        "ansible_name": task.ansible_name,
        "ignored": task.ignored,   # failed, and the run went on (ignore_errors, or a block's rescue)
        "shown": _plain(task.data) if task.type == "debug" and task.status in (Status.OK, Status.CHANGED)
        and not task.secret else None,
    }


def to_dict(run: RunResult) -> dict[str, JSONValue]:
    return _document(run, _hosts(run))


def _hosts(run: RunResult) -> dict[str, JSONValue]:
    hosts: dict[str, JSONValue] = {}
    for name, host in run.hosts.items():
        hosts[name] = {
            "unreachable": host.unreachable, "error": host.error, "reboot_required": host.reboot_required,
            "reboot_pending": host.reboot_pending, "in_sync": host_in_sync(run, host),
            "interrupted": host.interrupted,
            "round_trips": host.round_trips, "connections": host.connects,
            "stats": {s.value: host.count(s) for s in Status if s != Status.UNREACHABLE}
            | {"unreachable": int(host.unreachable)},
            "recap": host.recap(),
            "tasks": [_task(task) for task in host.tasks],
            "registered": [{"task": r.task, "name": r.name, "type": r.type, "value": _plain(r.value)}
                           for r in host.registered],
        }
    return hosts


def _document(run: RunResult, hosts: dict[str, JSONValue] | None) -> dict[str, JSONValue]:
    """The run's fields, its hosts (when given) and the sections after the run's tasks."""
    document: dict[str, JSONValue] = {
        "schema_version": SCHEMA_VERSION, "gpuconf_version": __version__, "verb": run.verb,
        "playbook": run.playbook, "inventory": run.inventory, "plays": run.plays,
        "started": _iso(run.started), "ended": _iso(run.ended or run.started),
        "duration": round((run.ended or run.started) - run.started, 3), "exit_code": run.exit_code,
        "interrupted": run.interrupted, "deadline": run.deadline, "deadline_reached": run.deadline_reached,
        "strict": run.strict,
    }
    if hosts is not None:
        document["hosts"] = hosts
    document.update({section.key: section.report() for section in run.sections})  # e.g. `slurm`, with check --slurm
    return document


def host_in_sync(run: RunResult, host: HostResult) -> bool:
    """check: nothing drifted, failed, unknown or unreachable; apply: converged with nothing failed.
    A host that SIGINT stopped before its work was done is neither."""
    if host.unreachable or host.failed_under(run.strict) or host.interrupted:
        return False
    if run.verb == "check":
        return not host.drifted
    return not host.reboot_pending


def dumps(run: RunResult) -> str:
    """The report as JSON text: one line for each of the run's fields, and one for each host.
    json's C encoder writes that; `indent=` would fall back to its pure-Python encoder, five
    times slower (a 100-host check's 2 MB: 74 ms against 15). `jq .` shows it indented, and a
    host's line is what `grep` finds."""
    document, hosts = _document(run, None), _hosts(run)
    lines = [f"  {json.dumps(key)}: {json.dumps(value)}," for key, value in document.items()]
    entries = ",\n".join(f"    {json.dumps(name)}: {json.dumps(host)}" for name, host in hosts.items())
    return "{\n" + "\n".join(lines) + '\n  "hosts": {' + (f"\n{entries}\n  " if entries else "") + "}\n}\n"


def write(run: RunResult, path: str | Path) -> None:
    write_atomic(path, dumps(run))
