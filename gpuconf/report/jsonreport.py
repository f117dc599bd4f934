"""The JSON report. Its schema is `docs/report-schema.json`; bump SCHEMA_VERSION
on any change that is not a pure addition."""
from __future__ import annotations

import datetime
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from gpuconf import __version__
from gpuconf.engine.results import RunResult, Status
from gpuconf.report.redact import visible_changes, visible_error

SCHEMA_VERSION = 1


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="milliseconds")


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    return str(value)


def to_dict(run: RunResult) -> dict[str, Any]:
    hosts = {}
    for name, host in run.hosts.items():
        tasks = []
        for task in host.tasks:
            tasks.append({
                "play": task.play, "task": task.task, "role": task.role, "type": task.type,
                "status": task.status.value, "handler": task.handler, "message": "" if task.secret else task.message,
                "changes": [{"summary": c.summary, "diff": None if task.secret else c.diff,
                             "before": None if task.secret else _plain(c.before),
                             "after": None if task.secret else _plain(c.after),
                             "ops": [] if task.secret else c.ops} for c in visible_changes(task)],
                "error": visible_error(task), "duration": task.duration, "location": task.location,
                "reboot_required": task.reboot_required,
            })
        hosts[name] = {
            "unreachable": host.unreachable, "error": host.error, "reboot_required": host.reboot_required,
            "round_trips": host.round_trips, "connections": host.connects,
            "stats": {s.value: host.count(s) for s in Status if s != Status.UNREACHABLE}
            | {"unreachable": int(host.unreachable)},
            "tasks": tasks,
        }
    return {
        "schema_version": SCHEMA_VERSION, "gpuconf_version": __version__, "verb": run.verb,
        "playbook": run.playbook, "inventory": run.inventory, "plays": run.plays,
        "started": _iso(run.started), "ended": _iso(run.ended or run.started),
        "duration": round((run.ended or run.started) - run.started, 3), "exit_code": run.exit_code,
        "interrupted": run.interrupted, "hosts": hosts,
    }


def write_atomic(path: str | Path, text: str) -> None:
    """Write a file via a temp file in the same directory and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write(run: RunResult, path: str | Path) -> None:
    write_atomic(path, json.dumps(to_dict(run), indent=2) + "\n")
