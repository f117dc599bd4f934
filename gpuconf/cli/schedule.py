"""`gpuconf schedule show`: the systemd units the drift_timer role would install.

It renders the role's own templates with the role's own defaults (plus the
options given), reading which file each template becomes from the role's
tasks, so what it prints and what the role installs cannot drift apart.
"""
from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from pathlib import Path

import yaml

from gpuconf.errors import GpuconfError, UsageError
from gpuconf.files.values import JSONValue, items_of
from gpuconf.templating.render import Vars, render_string

ROLE = "drift_timer"
# A systemd time span: "1h", "30min", "1h 30min", "90s", "2d".
TIME_SPAN = re.compile(r"^\s*(\d+(\.\d+)?\s*(us|ms|s|sec|second|seconds|m|min|minute|minutes|h|hr|hour|hours|"
                       r"d|day|days|w|week|weeks|M|month|months|y|year|years)?\s*)+$")


def role_dir(project: Path | None = None) -> Path:
    """The role in this project's roles/ (the current directory's), else the one shipped with gpuconf:
    looked up as a playbook in the project looks its roles up (gpuconf/playbook/loader.py)."""
    from gpuconf.playbook.loader import roles_path

    here = project or Path.cwd()
    candidates = [base / ROLE for base in roles_path(here / "playbook.yml", here)]
    for candidate in candidates:
        if (candidate / "tasks" / "main.yml").is_file():
            return candidate
    raise GpuconfError(f"role '{ROLE}' not found (looked in {', '.join(str(c) for c in candidates)})")


def _yaml(path: Path) -> JSONValue:
    try:
        data: JSONValue = yaml.safe_load(path.read_text()) or {}
        return data
    except (OSError, yaml.YAMLError) as exc:
        raise GpuconfError(f"{path}: {exc}") from None


def unit_templates(role: Path) -> list[tuple[str, Path]]:
    """(installed path, template file) for each `file: {template: ...}` task of the role."""
    found = []
    for task in items_of(_yaml(role / "tasks" / "main.yml")):
        params = task.get("file") if isinstance(task, dict) else None
        if isinstance(params, dict) and params.get("template"):
            found.append((str(params["path"]), role / "templates" / str(params["template"])))
    return found


def check_options(options: Mapping[str, object]) -> None:
    for key in ("drift_timer_interval", "drift_timer_randomized_delay", "drift_timer_boot_delay"):
        value = options.get(key)
        if value is not None and not TIME_SPAN.match(str(value)):
            flag = "--" + key.removeprefix("drift_timer_").replace("_", "-")
            raise UsageError(f"{flag} {value!r}: not a systemd time span (e.g. 1h, 30min, 1h 30min)")
    deadline = options.get("drift_timer_deadline")
    if deadline is not None and not (isinstance(deadline, (int, float)) and deadline > 0):
        raise UsageError(f"--deadline {deadline!r}: give a number of seconds above 0")


def render_units(options: Mapping[str, object], host: str | None = None,
                 project: Path | None = None) -> list[tuple[str, str]]:
    """(path, text) of every unit, rendered as the role renders them for `host`."""
    check_options(options)
    role = role_dir(project)
    defaults = found if isinstance(found := _yaml(role / "defaults" / "main.yml"), dict) else {}
    magic = {"inventory_hostname": host or socket.gethostname()}
    variables = Vars({k: v for k, v in options.items() if v is not None}, magic, defaults)
    return [(path, str(render_string(template.read_text(), variables))) for path, template in unit_templates(role)]


def show(options: Mapping[str, object], host: str | None = None) -> str:
    parts = []
    for path, text in render_units(options, host):
        parts.append(f"# {path}\n{text.rstrip()}\n")
    return "\n".join(parts)
