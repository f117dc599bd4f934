"""`gpuconf roles [NAME]`: the roles along the roles path, each with its documented
variables: every key of `defaults/main.yml` with its default and the comment above it
(or beside it). The file's first comment is the role's summary."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpuconf.errors import UsageError, did_you_mean
from gpuconf.files import yamlsrc
from gpuconf.files.bounded import read_source

_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:")


def find_roles(dirs: list[Path]) -> dict[str, Path]:
    """Every role (a folder with tasks/ or defaults/) along the roles path; the first one of a name wins."""
    roles: dict[str, Path] = {}
    for base in dirs:
        if base.is_dir():
            for path in sorted(base.iterdir()):
                if path.is_dir() and ((path / "tasks").is_dir() or (path / "defaults").is_dir()):
                    roles.setdefault(path.name, path)
    return roles


def role_variables(path: Path) -> tuple[str, list[tuple[str, Any, str]]]:
    """The role's summary, and (name, default, comment) for each of its defaults."""
    defaults = path / "defaults" / "main.yml"
    if not defaults.is_file():
        return "", []
    lines = read_source(defaults).decode("utf-8", errors="replace").splitlines()
    values = yamlsrc.plain(yamlsrc.load_file(defaults) or {})
    summary, first = "", True
    variables: list[tuple[str, Any, str]] = []
    comment: list[str] = []
    for line in lines:
        if line.startswith("#"):
            comment.append(line.lstrip("# ").rstrip())
            continue
        if not line.strip():
            if first and comment:
                summary, comment, first = " ".join(comment), [], False
            comment = [] if not first else comment
            continue
        match = _KEY.match(line)
        if match and match.group(1) in values:
            if first and comment and len(variables) == 0 and not summary:
                summary, comment = " ".join(comment), []
            first = False
            beside = line.split("#", 1)[1].strip() if " #" in line else ""
            variables.append((match.group(1), values[match.group(1)], " ".join(comment + [beside]).strip()))
            comment = []
    if ":" in summary.split(" ", 1)[0]:
        summary = summary.split(":", 1)[1].strip()  # "nccl: /etc/nccl.conf ..." -> "/etc/nccl.conf ..."
    return summary, variables


def describe_roles(dirs: list[Path], name: str | None = None) -> str:
    roles = find_roles(dirs)
    if name is None:
        width = max((len(r) for r in roles), default=4)
        lines = [f"{role.ljust(width)}  {role_variables(path)[0].split('. ')[0]}" for role, path in roles.items()]
        looked = ", ".join(str(d) for d in dirs)
        return "\n".join(lines) + f"\n\nroles path: {looked}\n`gpuconf roles NAME` shows a role's variables."
    if name not in roles:
        raise UsageError(f"unknown role '{name}'{did_you_mean(name, roles)}")
    summary, variables = role_variables(roles[name])
    out = [name, "", summary or "(no summary: the first comment of defaults/main.yml)", "", f"from {roles[name]}",
           "", "Variables (defaults/main.yml):" if variables else "No variables."]
    for variable, default, comment in variables:
        out.append(f"  {variable} = {json.dumps(default, default=str)}")
        if comment:
            out.append(f"      {comment}")
    return "\n".join(out)
