"""Ansible's other inventory sources: INI files and executable (dynamic) inventories.

INI, as Ansible reads it: `[group]` sections of host lines (`node01 port=2222`), host
ranges (`node[01:16]`, `rack-[a:c]`), `[group:vars]` and `[group:children]`; values on a
host line are Python literals (`2222` is a number), values under `:vars` are strings.

Executable: run with `--list`, the JSON Ansible's inventory scripts print (groups with
`hosts`, `vars`, `children`, or a plain list of hosts; `_meta.hostvars`), and `--host NAME`
for each host when `_meta` is missing. The script runs under a timeout.
"""
from __future__ import annotations

import ast
import json
import re
import shlex
import string
import subprocess
from pathlib import Path
from typing import Any

from gpuconf.errors import InventoryError, Location

SCRIPT_TIMEOUT = 60.0  # seconds an inventory script may take for --list
_RANGE = re.compile(r"\[([0-9a-zA-Z]+):([0-9a-zA-Z]+)(?::(\d+))?\]")


def looks_like_ini(path: Path) -> bool:
    """An INI inventory: named .ini, or with no YAML suffix and a first line that is a section or a host."""
    if path.suffix == ".ini":
        return True
    if path.suffix in (".yml", ".yaml", ".json"):
        return False
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return False
    for line in lines:
        text = line.strip()
        if text and not text.startswith(("#", ";", "---")):
            return text.startswith("[") or ":" not in text.split("=", 1)[0]
    return False


def expand_range(pattern: str, where: Location) -> list[str]:
    """`node[01:03]` -> node01, node02, node03 (zero padding kept); `r-[a:c]` -> r-a, r-b, r-c."""
    match = _RANGE.search(pattern)
    if not match:
        return [pattern]
    first, last, stride = match.group(1), match.group(2), int(match.group(3) or 1)
    head, tail = pattern[:match.start()], pattern[match.end():]
    if first.isdigit() and last.isdigit():
        width = len(first) if first.startswith("0") else 0
        values = [str(n).zfill(width) for n in range(int(first), int(last) + 1, stride)]
    elif len(first) == 1 and len(last) == 1 and first in string.ascii_letters and last in string.ascii_letters:
        values = [chr(c) for c in range(ord(first), ord(last) + 1, stride)]
    else:
        raise InventoryError(f"bad host range '{match.group(0)}' (numbers like [01:16] or letters like [a:f])", where)
    if not values:
        raise InventoryError(f"empty host range '{match.group(0)}'", where)
    return [name for value in values for name in expand_range(head + value + tail, where)]


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _pairs(words: list[str], where: Location, literal: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key.isidentifier():
            raise InventoryError(f"expected KEY=VALUE, got '{word}'", where)
        values[key] = _literal(value) if literal else value
    return values


def load_ini(inventory: Any, path: Path) -> None:
    """Read an INI inventory into `inventory` (an `Inventory`)."""
    section, kind = "ungrouped", "hosts"
    children: list[tuple[str, str, Location]] = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        text = line.strip()
        where = Location(str(path), number, 1)
        if not text or text.startswith(("#", ";")):
            continue
        if text.startswith("["):
            if not text.endswith("]"):
                raise InventoryError(f"a section header ends with ']': {text}", where)
            section, _, kind = text[1:-1].strip().partition(":")
            kind = kind or "hosts"
            if kind not in ("hosts", "vars", "children"):
                raise InventoryError(f"unknown section kind ':{kind}' (Ansible's are :vars and :children)", where)
            if section in inventory.hosts:
                raise InventoryError(f"'{section}' is both a host and a group", where)
            if section != "all":
                inventory.add_group(section, None)
            continue
        try:
            words = shlex.split(text, comments=True)
        except ValueError as exc:
            raise InventoryError(f"cannot read this line: {exc}", where) from None
        if not words:
            continue
        if kind == "vars":
            inventory.groups[section].vars.update(_pairs(words, where, literal=False))
        elif kind == "children":
            children.append((section, words[0], where))
        else:
            host_vars = _pairs(words[1:], where, literal=True)
            for name in expand_range(words[0], where):
                if name in inventory.groups:
                    raise InventoryError(f"'{name}' is both a host and a group", where)
                inventory.add_host(name, "ungrouped" if section == "all" else section, host_vars)
    for parent, child, where in children:
        if child in inventory.hosts:
            raise InventoryError(f"'{child}' is both a host and a group", where)
        inventory.add_group(child, parent)


def _run_script(path: Path, *args: str) -> Any:
    where = Location(str(path))
    try:
        done = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=SCRIPT_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InventoryError(f"inventory script {' '.join(args)} did not finish in {SCRIPT_TIMEOUT:g} s", where) \
            from None
    except OSError as exc:
        raise InventoryError(f"cannot run the inventory script: {exc.strerror or exc}", where) from None
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip())[-500:]
        raise InventoryError(f"inventory script {' '.join(args)} exited {done.returncode}: {tail}", where)
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise InventoryError(f"inventory script {' '.join(args)} printed no JSON ({exc.msg} at line {exc.lineno})",
                             where) from None


def load_executable(inventory: Any, path: Path) -> None:
    """Run an inventory script (`--list`, and `--host` when it gives no `_meta`) into `inventory`."""
    data = _run_script(path, "--list")
    where = Location(str(path))
    if not isinstance(data, dict):
        raise InventoryError("inventory script --list must print a JSON object of groups", where)
    meta = data.get("_meta")
    hostvars = meta.get("hostvars", {}) if isinstance(meta, dict) else None
    links: list[tuple[str, str]] = []
    for name, body in data.items():
        if name == "_meta":
            continue
        if name != "all":
            inventory.add_group(name, None)
        if isinstance(body, list):
            body = {"hosts": body}
        if not isinstance(body, dict):
            raise InventoryError(f"group '{name}': expected an object with hosts, vars, children, or a list", where)
        variables = body.get("vars") or {}
        if not isinstance(variables, dict):
            raise InventoryError(f"group '{name}': vars must be an object", where)
        inventory.groups[name].vars.update(variables)
        for host in body.get("hosts") or []:
            inventory.add_host(str(host), "ungrouped" if name == "all" else name, {})
        links += [(name, str(child)) for child in body.get("children") or [] if name != "all"]
    for parent, child in links:
        inventory.add_group(child, parent)
    for host in list(inventory.hosts):
        values = hostvars.get(host, {}) if hostvars is not None else _run_script(path, "--host", host)
        if not isinstance(values, dict):
            raise InventoryError(f"host '{host}': its variables must be a JSON object", where)
        inventory.hosts[host].vars.update(values)
