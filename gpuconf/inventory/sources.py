"""Ansible's inventory sources: YAML files, INI files and executable (dynamic) inventories.

YAML (or JSON), as Ansible's yaml plugin reads it: groups with `hosts`, `vars` and `children`,
their hosts and child groups taken in the file's order.

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
import shlex
import string
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from gpuconf.errors import InventoryError, Location, PlaybookError, did_you_mean
from gpuconf.files import yamlsrc
from gpuconf.files.values import JSONValue


class _Named(Protocol):
    @property
    def vars(self) -> dict[str, JSONValue]: ...


class Inventory(Protocol):
    """What a source fills (gpuconf/inventory/hosts.py's Inventory, which imports the sources)."""

    @property
    def hosts(self) -> Mapping[str, _Named]: ...

    @property
    def groups(self) -> Mapping[str, _Named]: ...

    def add_group(self, name: str, parent: str | None = "all") -> _Named: ...

    def add_host(self, name: str, group: str = "ungrouped", vars: dict[str, JSONValue] | None = None) -> object: ...

GROUP_KEYS = ("hosts", "vars", "children")
SCRIPT_TIMEOUT = 60.0  # seconds an inventory script may take for --list
MAX_RANGE_HOSTS = 100_000  # the hosts one INI line may name: `node[0:99999999]` is a typo, not a fleet


def looks_like_ini(path: Path) -> bool:
    """An INI inventory: named .ini, or with no YAML suffix and a first line that is a section or a host."""
    if path.suffix == ".ini":
        return True
    if path.suffix in (".yml", ".yaml", ".json"):
        return False
    for line in _read_text(path).splitlines():
        text = line.strip()
        if text and not text.startswith(("#", ";", "---")):
            return text.startswith("[") or ":" not in text.split("=", 1)[0]
    return False


def _read_text(path: Path) -> str:
    """An inventory file's text, bounded as every file the user gives (yamlsrc.read_source)."""
    from gpuconf.files.bounded import read_source

    return read_source(path, InventoryError).decode("utf-8", errors="replace")


def expand_range(pattern: str, where: Location) -> list[str]:
    """`node[01:03]` -> node01, node02, node03 (zero padding kept); `r-[a:c]` -> r-a, r-b, r-c;
    `n[1:5:2]` -> n1, n3, n5. `where` is the pattern's own position: an error points at its `[`.
    Stricter than Ansible, which reads `[:03]` as node0..node3 (unpadded) and `[03:01]` as no host
    at all: both are mistakes, and said so."""
    start = pattern.find("[")
    if start < 0:
        return [pattern]
    here = Location(where.file, where.line, (where.column or 1) + start)
    end = pattern.find("]", start)
    if end < 0:
        raise InventoryError(f"host range '{pattern[start:]}' has no closing ']'", here)
    values = _range_values(pattern[start + 1:end], here, pattern)
    rest = expand_range(pattern[end + 1:], Location(where.file, where.line, (here.column or 1) + end + 1 - start))
    if len(values) * len(rest) > MAX_RANGE_HOSTS:
        raise InventoryError(f"host range '{pattern}' makes {len(values) * len(rest):,} hosts, more than the "
                             f"{MAX_RANGE_HOSTS} one line may add", here)
    return [pattern[:start] + value + tail for value in values for tail in rest]


def _range_values(body: str, where: Location, pattern: str) -> list[str]:
    shown = f"[{body}]' in '{pattern}"
    parts = body.split(":")
    if len(parts) not in (2, 3):
        raise InventoryError(f"bad host range '{shown}': write [start:end] or [start:end:step], with numbers like "
                             "[01:16] or letters like [a:f]", where)
    first, last, step = parts[0], parts[1], parts[2] if len(parts) == 3 else "1"
    if not first:
        raise InventoryError(f"host range '{shown}' has no start: write it, as in [01:16]", where)
    if not last:
        raise InventoryError(f"host range '{shown}' has no end: write it, as in [01:16]", where)
    if not step.isdigit() or int(step) < 1:
        raise InventoryError(f"host range '{shown}': the step must be a whole number of 1 or more", where)
    if first.isdigit() and last.isdigit():
        if first.startswith("0") and 1 < len(first) != len(last):
            raise InventoryError(f"host range '{shown}': a zero-padded start and its end have the same width "
                                 "([01:16], not [01:3])", where)
        low, high, width = int(first), int(last), len(first) if first.startswith("0") else 0
    elif len(first) == 1 and len(last) == 1 and first in string.ascii_letters and last in string.ascii_letters:
        low, high, width = ord(first), ord(last), -1
    else:
        raise InventoryError(f"bad host range '{shown}' (numbers like [01:16] or letters like [a:f])", where)
    if low > high:
        raise InventoryError(f"host range '{shown}' has its start after its end: it would name no host", where)
    if (high - low) // int(step) + 1 > MAX_RANGE_HOSTS:
        raise InventoryError(f"host range '{shown}' makes more than the {MAX_RANGE_HOSTS} hosts one line may add",
                             where)
    numbers = range(low, high + 1, int(step))
    return [chr(n) for n in numbers] if width < 0 else [str(n).zfill(width) for n in numbers]


def _literal(text: str) -> JSONValue:   # a Python literal, as Ansible's INI reads one
    try:
        value: JSONValue = ast.literal_eval(text)
        return value
    except (ValueError, SyntaxError):
        return text


def _pairs(words: list[str], where: Location) -> dict[str, JSONValue]:
    values: dict[str, JSONValue] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key.isidentifier():
            raise InventoryError(f"expected KEY=VALUE, got '{word}'", where)
        values[key] = _literal(value)
    return values


def load_ini(inventory: Inventory, path: Path) -> None:
    """Read an INI inventory into `inventory` (an `Inventory`)."""
    section, kind = "ungrouped", "hosts"
    children: list[tuple[str, str, Location]] = []
    for number, line in enumerate(_read_text(path).splitlines(), 1):
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
        if kind == "vars":  # as Ansible's INI: one KEY=VALUE a line, the value all the rest, a Python literal
            key, sep, value = (part.strip() for part in text.partition("="))
            if not sep or not key.isidentifier():
                raise InventoryError(f"expected KEY=VALUE, got '{text}'", where)
            inventory.groups[section].vars[key] = _literal(value)
            continue
        try:
            words = shlex.split(text, comments=True)
        except ValueError as exc:
            raise InventoryError(f"cannot read this line: {exc}", where) from None
        if not words:
            continue
        if kind == "children":
            children.append((section, words[0], where))
        else:
            host_vars = _pairs(words[1:], where)
            column = line.find(words[0]) + 1 or 1  # the host pattern's own column, for a range's error
            for name in expand_range(words[0], Location(str(path), number, column)):
                if name in inventory.groups:
                    raise InventoryError(f"'{name}' is both a host and a group", where)
                inventory.add_host(name, "ungrouped" if section == "all" else section, host_vars)
    for parent, child, where in children:
        if child in inventory.hosts:
            raise InventoryError(f"'{child}' is both a host and a group", where)
        inventory.add_group(child, parent)


def _run_script(path: Path, *args: str) -> JSONValue:
    where = Location(str(path))
    try:
        # absolute: `-i ./dyn.py` is that file, while a bare name (Path drops the `./`) would be
        # looked up on PATH and could run another program of the same name
        done = subprocess.run([str(path.absolute()), *args], capture_output=True, text=True, timeout=SCRIPT_TIMEOUT,
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
        data: JSONValue = json.loads(done.stdout)
        return data
    except json.JSONDecodeError as exc:
        raise InventoryError(f"inventory script {' '.join(args)} printed no JSON ({exc.msg} at line {exc.lineno})",
                             where) from None


def load_executable(inventory: Inventory, path: Path) -> None:
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


def as_error(exc: PlaybookError) -> InventoryError:
    return InventoryError(exc.message, exc.location)


def load_yaml(inventory: Inventory, path: Path) -> None:
    """Read a YAML (or JSON) inventory into `inventory`: groups with `hosts`, `vars`, `children`."""
    try:
        data = yamlsrc.load_file(path)
    except PlaybookError as exc:
        raise as_error(exc) from None
    if data is None:
        return
    if not isinstance(data, yamlsrc.YDict):
        kind = "a list (is this a playbook?)" if isinstance(data, list) else f"a {type(data).__name__}"
        where = data.location() if isinstance(data, yamlsrc.YList) else Location(str(path), 1, 1)
        raise InventoryError(f"not an inventory: expected a mapping of groups such as 'all:', got {kind}", where)
    for name, body in data.items():
        misspelled = isinstance(body, dict) and any(did_you_mean(str(k), GROUP_KEYS) for k in body)
        if name != "all" and isinstance(body, dict) and body and not set(body) & set(GROUP_KEYS) and not misspelled:
            raise InventoryError(
                f"not an inventory: top-level key '{name}' is not a group (a group has hosts:, vars: or children:)",
                data.location(name),
            )
        _load_group(inventory, str(name), body, data, None if name == "all" else "all")


def _load_group(inventory: Inventory, name: str, body: JSONValue, parent_map: dict[str, JSONValue],
                parent: str | None) -> None:
    group = inventory.add_group(name, parent)
    if body is None:
        return
    if not isinstance(body, yamlsrc.YDict):
        raise InventoryError(f"group '{name}' must be a mapping with hosts:, vars: or children:",
                             yamlsrc.locate(parent_map, (name,)))
    for key in body:
        if key not in GROUP_KEYS:
            raise InventoryError(
                f"unknown key '{key}' in group '{name}'{did_you_mean(key, GROUP_KEYS)}", body.location(key)
            )
    variables = body.get("vars") or {}
    if not isinstance(variables, dict):
        raise InventoryError(f"vars of group '{name}' must be a mapping", body.location("vars"))
    group.vars.update(yamlsrc.plain(variables))
    for key in body:   # hosts and children in the file's order, as Ansible's yaml plugin: the order of
        # the hosts and of the groups is the order they run in (Inventory.group_members)
        if key == "hosts":
            _load_hosts(inventory, name, body)
        elif key == "children":
            children = body.get("children") or {}
            if not isinstance(children, dict):
                raise InventoryError(f"children of group '{name}' must be a mapping", body.location("children"))
            for child, child_body in children.items():
                if str(child) in inventory.hosts:
                    raise InventoryError(f"'{child}' is both a host and a group", yamlsrc.locate(children, (child,)))
                _load_group(inventory, str(child), child_body, children, name)


def _load_hosts(inventory: Inventory, name: str, body: yamlsrc.YDict) -> None:
    hosts = body.get("hosts") or {}
    if isinstance(hosts, list):
        raise InventoryError(f"hosts of group '{name}' must be a mapping (host: vars), not a list",
                             body.location("hosts"))
    if not isinstance(hosts, dict):
        raise InventoryError(f"hosts of group '{name}' must be a mapping", body.location("hosts"))
    for host_name, host_vars in hosts.items():
        where = yamlsrc.locate(hosts, (host_name,))
        if host_vars is not None and not isinstance(host_vars, dict):
            raise InventoryError(f"variables of host '{host_name}' must be a mapping", where)
        if str(host_name) in inventory.groups:
            raise InventoryError(f"'{host_name}' is both a host and a group", where)
        inventory.add_host(str(host_name), name, yamlsrc.plain(host_vars or {}))
