"""Host patterns for `hosts:` and `--limit`, with Ansible's grammar.

`a,b` or `a:b` is a union, `&x` intersects, `!x` excludes, `*` and `?` glob
over host and group names, `~regex` matches host and group names from their start, and `@file` reads one
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


# `group[0]`, `group[-1]`, `group[1:3]` (inclusive), `group[2:]`: hosts by their place (Ansible's
# PATTERN_WITH_SUBSCRIPT; its removed `[x-y]` form is read as `[x:y]`, as Ansible still reads it)
SUBSCRIPT = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$")


def split_pattern(pattern: str) -> list[str]:
    """The terms of a pattern: split at commas, else at colons outside brackets (`g[0:1]:h`)."""
    terms = pattern.split(",") if "," in pattern else re.findall(r"(?:[^\s:\[\]]|\[[^\]]*\])+", pattern)
    return [t.strip() for t in terms if t.strip()]


def _term_hosts(inventory: Inventory, term: str) -> list[str]:
    """The hosts one term names, in Ansible's order (InventoryManager._enumerate_matches): a host's
    own name; else each group the term matches (a glob, a `~regex` matched from the start, or the
    name), its hosts as `group_members` orders them, then, for a glob or a regex or a term that
    names no group, each host it matches in inventory order."""
    if term.startswith("@"):
        path = Path(term[1:])
        if not path.exists():
            raise InventoryError(f"cannot read limit file {path}: no such file")
        text = read_source(path, InventoryError).decode("utf-8", errors="replace")  # bounded, regular files only
        names = [line.strip() for line in text.splitlines() if line.strip()]
        return [n for n in names if n in inventory.hosts]
    if term in inventory.hosts and term not in inventory.implicit:
        return [term]
    subscript = SUBSCRIPT.match(term) if not term.startswith("~") else None
    if subscript:
        hosts = _term_hosts(inventory, subscript.group(1))
        index, start, end = subscript.group(2, 3, 5)
        first, last = (int(index), 0) if index is not None else (int(start), int(end) if end else len(hosts) - 1)
        try:   # as Ansible's _apply_subscript: `[x:0]` is the one host x
            return hosts[first:last + 1] if last else [hosts[first]] if hosts else []
        except IndexError:
            raise InventoryError(f"no host matched the subscripted pattern '{term}'") from None
    try:
        regex = re.compile(term[1:] if term.startswith("~") else fnmatch.translate(term))
    except re.error as exc:
        raise InventoryError(f"bad regular expression in pattern '{term}': {exc}") from None
    groups = [name for name in inventory.groups if regex.match(name)]
    found = [host for name in groups for host in inventory.group_members(name)]
    if not groups or term.startswith("~") or any(c in term for c in ".?*["):
        found += [h for h in inventory.hosts if h not in inventory.implicit and regex.match(h)]
    if not found and term in LOCALHOST:
        return [inventory.implicit_localhost(term)]
    return list(dict.fromkeys(found))


def match_hosts(inventory: Inventory, pattern: str) -> list[str]:
    """Hosts matching `pattern` (may be empty), in Ansible's order (InventoryManager.get_hosts):
    the unions' hosts in the order written, each term's in its own order; then the
    intersections and the exclusions, whatever their place in the pattern."""
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
    selected = list(dict.fromkeys(host for term in unions or ["all"] for host in _term_hosts(inventory, term)))
    for term in intersections:
        kept = set(_term_hosts(inventory, term))
        selected = [h for h in selected if h in kept]
    for term in exclusions:
        dropped = set(_term_hosts(inventory, term))
        selected = [h for h in selected if h not in dropped]
    if inventory.limit is not None:
        selected = [h for h in selected if h in inventory.limit]
    return selected


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
