"""Readable messages for bad input: 'did you mean' hints for misspelled names, and the first
error of a pydantic validation said plainly."""
from __future__ import annotations

import difflib
from collections.abc import Iterable

from pydantic import ValidationError


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """Return ` (did you mean 'x'?)` for the closest candidate, or ''."""
    matches = difflib.get_close_matches(str(word), sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean '{matches[0]}'?)" if matches else ""


def validation_message(exc: ValidationError, allowed: tuple[str, ...] | list[str] = ()) -> tuple[tuple, str]:
    """The first pydantic error as (path, readable message)."""
    error = exc.errors()[0]
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        key = loc[-1]
        return loc, f"unknown key '{key}'{did_you_mean(str(key), allowed)}"
    if error["type"] == "missing":
        return loc, f"missing required key '{loc[-1]}'"
    where = ".".join(str(p) for p in loc)
    value = error.get("input")
    shown = f" (got {value!r})" if value is not None and not isinstance(value, (dict, list)) else ""
    return loc, f"'{where}': {error['msg']}{shown}" if where else error["msg"]


# Ansible module names people type from habit, and gpuconf's task type for each (README, "Coming from Ansible").
ANSIBLE_MODULES = {
    "shell": "command (a string runs in /bin/sh; `creates`, `removes`, `unless` make it idempotent)",
    "raw": "command", "script": "command", "expect": "command (with `stdin`)",
    "copy": "file (`content:` inline, or `src:` from the role's files/)",
    "template": "file (`template:` names a Jinja2 file in the role's templates/)",
    "lineinfile": "line", "blockinfile": "line (one line each) or file",
    "replace": "line (with `regexp`)",
    "apt": "package", "dnf": "package (backend: dnf)", "yum": "package (backend: dnf)",
    "package": "package",
    "systemd": "service", "systemd_service": "service", "service": "service",
    "modprobe": "kernel_module",
    "fail": "assert (`assert: {that: [CONDITION], fail_msg: ...}`)",
    "stat": "probe (`probe: {command: test -e PATH}`) or a fact (`facts.*`)",
    "wait_for": "probe", "uri": "probe (with curl)", "get_url": "command (with `creates`)",
    "user": "command (with `unless: id NAME`)", "group": "command (with `unless: getent group NAME`)",
    "sysctl": "line (in /etc/sysctl.d) and command (sysctl -p, as a handler)",
    "mount": "line (in /etc/fstab) and command",
    "include_vars": "vars_files",
}


def ansible_hint(name: str) -> str:
    """` (in gpuconf: X)` for an Ansible module name (plain or ansible.builtin.*), or ''."""
    short = name.split(".")[-1] if name.startswith(("ansible.builtin.", "ansible.posix.", "community.general.")) \
        else name
    return f" (Ansible's '{short}' is gpuconf's {ANSIBLE_MODULES[short]})" if short in ANSIBLE_MODULES else ""
