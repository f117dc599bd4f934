"""Host patterns for `hosts:` and `--limit`, with Ansible's grammar.

`a,b` or `a:b` is a union, `&x` intersects, `!x` excludes, `*` and `?` glob
over host and group names, `~regex` matches host names, and `@file` reads one
host name per line (a retry file). Unions are applied first, then
intersections, then exclusions, whatever the written order, as in Ansible.
"""
from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from gpuconf.errors import InventoryError, did_you_mean
from gpuconf.files.bounded import read_source
from gpuconf.inventory.hosts import Inventory

LOCALHOST = ("localhost", "127.0.0.1", "::1")   # Ansible's implicit localhost answers to these


def split_pattern(pattern: str) -> list[str]:
    terms = re.split(r"[,:]" if "[" not in pattern else r",", pattern)
    return [t.strip() for t in terms if t.strip()]


def _term_hosts(inventory: Inventory, term: str) -> list[str]:
    if term.startswith("@"):
        path = Path(term[1:])
        if not path.exists():
            raise InventoryError(f"cannot read limit file {path}: no such file")
        text = read_source(path, InventoryError).decode("utf-8", errors="replace")  # bounded, regular files only
        names = [line.strip() for line in text.splitlines() if line.strip()]
        return [n for n in names if n in inventory.hosts]
    named = [h for h in inventory.hosts if h not in inventory.implicit]   # what `all` and globs match
    if term in ("all", "*"):
        return named
    if term in inventory.groups:
        return inventory.group_members(term)
    if term in inventory.hosts:
        return [term]
    if term in LOCALHOST:
        return [inventory.implicit_localhost(term)]
    if term.startswith("~"):
        try:
            regex = re.compile(term[1:])
        except re.error as exc:
            raise InventoryError(f"bad regular expression in pattern '{term}': {exc}") from None
        return [h for h in named if regex.search(h)]
    if any(c in term for c in "*?["):
        hosts = {h for h in named if fnmatch.fnmatchcase(h, term)}
        for group in inventory.groups:
            if fnmatch.fnmatchcase(group, term):
                hosts.update(inventory.group_members(group))
        return [h for h in inventory.hosts if h in hosts]
    return []


def match_hosts(inventory: Inventory, pattern: str) -> list[str]:
    """Hosts matching `pattern`, in inventory order (may be empty)."""
    unions: list[str] = []
    intersections: list[str] = []
    exclusions: list[str] = []
    for term in split_pattern(pattern):
        if term.startswith("&"):
            intersections.append(term[1:])
        elif term.startswith("!"):
            exclusions.append(term[1:])
        else:
            unions.append(term)
    selected: set[str] = set()
    for term in unions or ["all"]:
        selected.update(_term_hosts(inventory, term))
    for term in intersections:
        selected &= set(_term_hosts(inventory, term))
    for term in exclusions:
        selected -= set(_term_hosts(inventory, term))
    if inventory.limit is not None:
        selected &= inventory.limit
    return [h for h in inventory.hosts if h in selected]


def narrow(inventory: Inventory, limit: str | None) -> Inventory:
    """--limit, applied once for a whole command: the inventory whose patterns match only the hosts
    the limit selects (Inventory.narrowed). A limit that matches no host is an error."""
    if not limit:
        return inventory
    return inventory.narrowed(limit_hosts(inventory, list(inventory.hosts), limit))


def limit_hosts(inventory: Inventory, hosts: list[str], limit: str | None) -> list[str]:
    """Apply `--limit` to an already selected host list; empty is an error."""
    if not limit:
        return hosts
    allowed = set(match_hosts(inventory, limit))
    result = [h for h in hosts if h in allowed]
    if not allowed:
        names = list(inventory.hosts) + list(inventory.groups)
        # hint at a term that matches nothing by itself, not at one that is fine
        terms = [t.lstrip("&!") for t in split_pattern(limit) if not t.lstrip("&!").startswith(("@", "~"))]
        unmatched = next((t for t in terms if not _term_hosts(inventory, t)), None)
        hint = did_you_mean(unmatched, names) if unmatched else ""
        raise InventoryError(f"--limit '{limit}' matches no hosts in {inventory.source}{hint}")
    return result
