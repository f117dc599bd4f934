"""Inventories: hosts, groups and their variables, in Ansible's shape (YAML and INI files and
executable inventories are read by inventory/sources.py into this model).

Variable merge order for a host, lowest first, as Ansible's (docs/variables.md): the inline
variables of the `all` group, then of every other group the host belongs to ordered by depth
(parent before child) and, at equal depth, by group name (the later name wins); then the
`group_vars/` files the same way (the inventory's `all`, the playbook's `all`, the inventory's
other groups, the playbook's); then the host's inline variables, its inventory `host_vars/`
file, its playbook `host_vars/` file. The playbook's are those beside the playbook
(`Inventory.read_playbook_vars`).
"""
from __future__ import annotations

import copy
import os
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuconf.errors import InventoryError, Location, PlaybookError, UsageError
from gpuconf.files import yamlsrc
from gpuconf.files.values import JSONValue
from gpuconf.inventory.sources import as_error, load_executable, load_ini, load_yaml, looks_like_ini


@dataclass
class Group:
    name: str
    vars: dict[str, JSONValue] = field(default_factory=dict)
    file_vars: dict[str, JSONValue] = field(default_factory=dict)  # its group_vars/ file beside the inventory
    playbook_vars: dict[str, JSONValue] = field(default_factory=dict)  # its group_vars/ file beside the playbook
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    parents: set[str] = field(default_factory=set)
    depth: int = 0


@dataclass
class Host:
    name: str
    vars: dict[str, JSONValue] = field(default_factory=dict)
    file_vars: dict[str, JSONValue] = field(default_factory=dict)
    playbook_vars: dict[str, JSONValue] = field(default_factory=dict)
    groups: set[str] = field(default_factory=set)  # direct groups only


class Inventory:
    """Hosts and groups, plus the merged variables of each host."""

    def __init__(self, source: str = "<inventory>"):
        self.source = source
        self.groups: dict[str, Group] = {"all": Group("all"), "ungrouped": Group("ungrouped")}
        self.hosts: dict[str, Host] = {}
        self._merged: dict[str, dict[str, JSONValue]] = {}
        self._ancestors: dict[str, list[str]] = {}
        self.limit: frozenset[str] | None = None  # --limit: the only hosts a pattern matches (`narrowed`)
        self.version = 0   # grows with each change (finish): what caches its groups looks at it
        self.implicit: set[str] = set()  # Ansible's implicit localhost, once a play names it (no group's host)

    # -- building ---------------------------------------------------------
    def add_group(self, name: str, parent: str | None = "all") -> Group:
        group = self.groups.setdefault(name, Group(name))
        if parent and parent != name:
            parent_group = self.groups.setdefault(parent, Group(parent))
            if name not in parent_group.children:
                parent_group.children.append(name)
            group.parents.add(parent)
        return group

    def add_host(self, name: str, group: str = "ungrouped", vars: dict[str, JSONValue] | None = None) -> Host:
        host = self.hosts.setdefault(name, Host(name))
        host.vars.update(vars or {})
        host.groups.add(group)
        if name not in self.groups[group].hosts:
            self.groups[group].hosts.append(name)
        return host

    def finish(self) -> None:
        """Compute group depths; reject cycles. Call after loading, and after a run's add_host or group_by."""
        self.version += 1
        all_group = self.groups["all"]
        for name, group in self.groups.items():
            if name != "all" and not group.parents:
                group.parents.add("all")
                all_group.children.append(name)
        for name, host in self.hosts.items():
            if host.groups == {"ungrouped"}:
                continue
            host.groups.discard("ungrouped")
            ungrouped = self.groups["ungrouped"]
            if name in ungrouped.hosts:
                ungrouped.hosts.remove(name)
        depth: dict[str, int] = {}

        def visit(name: str, stack: tuple[str, ...]) -> int:
            if name in stack:
                raise InventoryError(f"group cycle: {' -> '.join(stack + (name,))}", Location(self.source))
            if name not in depth:
                group = self.groups[name]
                depth[name] = 0 if name == "all" else 1 + max(visit(p, stack + (name,)) for p in group.parents)
            return depth[name]

        for name in self.groups:
            self.groups[name].depth = visit(name, ())
        self._merged.clear()
        self._ancestors.clear()

    # -- queries ------------------------------------------------------------
    def host_groups(self, host: str) -> list[str]:
        """Every group the host belongs to, in merge order (all first)."""
        if host not in self._ancestors:
            seen: set[str] = set()
            todo = list(self.hosts[host].groups)
            while todo:
                name = todo.pop()
                if name not in seen:
                    seen.add(name)
                    todo.extend(self.groups[name].parents)
            seen.add("all")
            self._ancestors[host] = sorted(seen, key=lambda g: (self.groups[g].depth, g))
        return self._ancestors[host]

    # Any: templating and the engine read these values without narrowing them first (issue 38's
    # packages, changing as this is written); they are JSONValue everywhere in this package.
    def host_vars(self, host: str) -> dict[str, Any]:
        """The host's merged inventory variables (cached)."""
        if host not in self._merged:
            merged: dict[str, JSONValue] = {}
            groups = [self.groups[name] for name in self.host_groups(host)]
            for group in groups:
                merged.update(group.vars)
            everything, others = [g for g in groups if g.name == "all"], [g for g in groups if g.name != "all"]
            for part in (everything, others):
                for group in part:
                    merged.update(group.file_vars)
                for group in part:
                    merged.update(group.playbook_vars)
            found = self.hosts[host]
            merged.update(found.vars)
            merged.update(found.file_vars)
            merged.update(found.playbook_vars)
            self._merged[host] = merged
        return self._merged[host]

    def read_playbook_vars(self, folder: Path) -> None:
        """`group_vars/` and `host_vars/` beside the playbook, above the inventory's own."""
        for group in self.groups.values():
            group.playbook_vars = {}
        for host in self.hosts.values():
            host.playbook_vars = {}
        _load_vars_dir(self, folder / "group_vars", "group", "playbook_vars")
        _load_vars_dir(self, folder / "host_vars", "host", "playbook_vars")
        self._merged.clear()

    def implicit_localhost(self, name: str) -> str:
        """Ansible's implicit localhost: a pattern that names `localhost` (or 127.0.0.1, ::1) with no
        such host in the inventory gets this machine, on a local connection with this Python. It
        belongs to no group (`all` does not match it) but takes the `all` group's variables."""
        if name not in self.hosts:
            self.hosts[name] = Host(name, {"ansible_connection": "local", "ansible_python_interpreter": sys.executable})
            self.implicit.add(name)
            self._ancestors.pop(name, None)
            self._merged.pop(name, None)
        return name

    def child_groups(self, name: str) -> list[str]:
        """A group's child groups in definition order; `ungrouped` first under `all`, as Ansible has it."""
        children = self.groups[name].children
        if name == "all" and "ungrouped" in children:
            return ["ungrouped", *(child for child in children if child != "ungrouped")]
        return list(children)

    def own_hosts(self, name: str) -> list[str]:
        """A group's own hosts; `ungrouped` holds every host of no other group (gpuconf files the hosts
        listed under `all:` in `all`, Ansible in `all` and `ungrouped`)."""
        if name == "ungrouped":
            return [host for host, entry in self.hosts.items()
                    if not entry.groups - {"all", "ungrouped"} and host not in self.implicit]
        return list(self.groups[name].hosts)

    def group_members(self, group: str) -> list[str]:
        """All hosts of a group and its descendants, in Ansible's order (Group.get_hosts): the
        group's own hosts, then its child groups' level by level, each host once; `all` leaves out
        the implicit localhost. (Ansible walks a level below the first in the order of a set; here
        each level keeps definition order.) A serial batch, `play_hosts` and `groups` follow it."""
        order, level, seen = [group], [group], {group}
        while level:
            below = [child for name in level for child in self.child_groups(name)]
            level = [child for child in dict.fromkeys(below) if child not in seen]
            seen.update(level)
            order += level
        members = dict.fromkeys(host for name in order for host in self.own_hosts(name))
        return [host for host in members if group != "all" or host not in self.implicit]

    def narrowed(self, hosts: Iterable[str]) -> Inventory:
        """The same inventory, with every host pattern confined to `hosts` (--limit, once for a whole
        command: gpuconf.inventory.patterns.narrow). Its groups and variables still name every host, as
        Ansible's `groups` and `hostvars` do under --limit."""
        view = copy.copy(self)
        view.limit = frozenset(hosts) if self.limit is None else self.limit & frozenset(hosts)
        return view

    def to_dict(self) -> dict[str, JSONValue]:
        """The merged view `gpuconf inventory` prints."""
        return {
            "groups": {
                name: {"hosts": self.group_members(name), "children": sorted(g.children), "vars": g.vars}
                for name, g in self.groups.items()
                if name != "ungrouped" or g.hosts
            },
            "hosts": {name: self.host_vars(name) for name in self.hosts},
        }


# -- loading ----------------------------------------------------------------

def load_inventory(spec: str, search_dirs: list[Path] | None = None) -> Inventory:
    """Load `-i SPEC`: a name under inventories/, a directory, a file, or `a,b,`; several, one a
    line (-i given more than once), into one inventory, as Ansible merges them."""
    parts = [part for part in spec.split("\n") if part]
    sources = [(part, resolve_inventory(part, search_dirs or [Path.cwd()])) for part in parts]
    inventory = Inventory(", ".join(str(path or part) for part, path in sources))
    for part, path in sources:
        if path is None:
            if "," in part:
                _adhoc(inventory, part)
                continue
            looked = ", ".join(str(d / "inventories" / part) for d in (search_dirs or [Path.cwd()]))
            raise InventoryError(f"inventory '{part}' not found (looked for a file or directory '{part}', "
                                 f"and {looked})")
        if path.is_dir():
            names = ("hosts.yml", "hosts.yaml", "hosts.ini", "hosts")
            hosts_file = next((path / n for n in names if (path / n).is_file()), None)
            if hosts_file is None:
                raise InventoryError(f"inventory directory {path} has no hosts.yml (or hosts.ini, hosts)")
            _load_source(inventory, hosts_file)
            _load_vars_dir(inventory, path / "group_vars", "group")
            _load_vars_dir(inventory, path / "host_vars", "host")
        else:
            _load_source(inventory, path)
            _load_vars_dir(inventory, path.parent / "group_vars", "group")
            _load_vars_dir(inventory, path.parent / "host_vars", "host")
    inventory.finish()
    return inventory


def resolve_inventory(spec: str, search_dirs: list[Path]) -> Path | None:
    """A path as given (relative to the current directory, as Ansible's -i), else a name under
    an `inventories/` of the search directories (the current one, then the playbook's project)."""
    candidate = Path(spec)
    if candidate.exists():
        return candidate
    for base in search_dirs:
        named = base / "inventories" / spec
        if "/" not in spec and named.is_dir():
            return named
    return None


def _adhoc(inventory: Inventory, spec: str) -> None:
    """`-i a,b,`: these hosts, ungrouped."""
    if inventory.source == spec:
        inventory.source = "<command line>"
    for name in (part.strip() for part in spec.split(",")):
        if name:
            inventory.add_host(name, "ungrouped", {})


def _load_source(inventory: Inventory, path: Path) -> None:
    """A hosts file in Ansible's YAML or INI format, or an executable inventory script."""
    if path.suffix not in (".yml", ".yaml", ".json", ".ini") and os.access(path, os.X_OK):
        load_executable(inventory, path)
    elif looks_like_ini(path):
        load_ini(inventory, path)
    else:
        load_yaml(inventory, path)


VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")   # Ansible's group_vars/host_vars files, by their suffix


def _load_vars_dir(inventory: Inventory, directory: Path, kind: str, layer: str = "file_vars") -> None:
    if not directory.is_dir():
        return
    targets = inventory.groups if kind == "group" else inventory.hosts
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith("."):
            continue
        files = sorted(f for f in entry.rglob("*") if f.is_file() and f.suffix in VARS_SUFFIXES[1:]) \
            if entry.is_dir() else [entry]
        name = entry.name if entry.is_dir() or entry.name in targets else entry.stem
        if entry.is_file() and name == entry.stem and entry.suffix not in VARS_SUFFIXES:
            continue
        if name not in targets:
            continue  # as Ansible: vars for a group or host not in this inventory are ignored
        for file in files:
            data = load_vars_file(file)
            getattr(targets[name], layer).update(data)


def load_vars_file(path: Path) -> dict[str, JSONValue]:
    """A YAML file that must hold a mapping of variables."""
    try:
        data = yamlsrc.load_file(path)
    except PlaybookError as exc:
        raise as_error(exc) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InventoryError("a variables file must be a mapping of names to values", Location(str(path), 1, 1))
    values: dict[str, JSONValue] = yamlsrc.plain(data)
    return values


def _key_values(item: str) -> list[str]:
    """`a=1 b="x y"` as its KEY=VALUE words (quotes removed); one word when that is not the shape
    (`msg={{ a }}`, a value with spaces and no quotes)."""
    try:
        words = shlex.split(item)
    except ValueError:
        return [item]
    if words and all("=" in w and w.partition("=")[0].isidentifier() for w in words):
        return words
    return [item]


def parse_extra_vars(items: list[str]) -> dict[str, JSONValue]:
    """`-e KEY=VALUE`, `-e @file.yml` and `-e '{"k": 1}'`; later ones win."""
    result: dict[str, JSONValue] = {}
    for item in items:
        if item.startswith("@"):
            result.update(load_vars_file(Path(item[1:])))
        elif item.lstrip().startswith("{"):
            data = yamlsrc.load_text(item, "<-e>")
            if not isinstance(data, dict):
                raise UsageError(f"-e {item!r}: expected a mapping")
            result.update(yamlsrc.plain(data))
        else:   # `-e 'a=1 b="two words"'`: each KEY=VALUE, as Ansible splits them
            for word in _key_values(item):
                key, sep, value = word.partition("=")
                if not sep or not key.isidentifier():
                    raise UsageError(f"-e {item!r}: expected KEY=VALUE, @FILE or a YAML mapping")
                result[key] = value
    return result
