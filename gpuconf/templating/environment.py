"""The Jinja environment's Ansible-shaped part: its filters, tests, lookups and globals, as
Ansible's templar has them (trim_blocks included), and the bounds every render runs under.
Ansible's own filters (gpuconf/templating/ansible_filters.py) are imported at their first use, so a check
whose templates use none starts no slower; validate knows them by these names."""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jinja2
import yaml

from gpuconf.errors import TemplateError
from gpuconf.templating.bounds import bound_environment
from gpuconf.templating.secret_marks import CountingEnvironment


def _to_bool(value: Any) -> bool:
    """Ansible 2.19's `bool`: yes/on/true/1 (any case) and the int 1 are true; no/off/false/0 false;
    anything else is `== 1` (so 'y' is false, as Ansible coerces it)."""
    check: Any = value.lower() if isinstance(value, str) else str(value).lower() if isinstance(value, int) else value
    try:
        if check in ("yes", "on", "true", "1"):
            return True
        if check in ("no", "off", "false", "0"):
            return False
        return bool(check == 1)
    except TypeError:
        return False


def _version_key(text: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"[.\-+~:]", str(text)) if p]


def _version_test(value: Any, other: Any, op: str = "eq") -> bool:
    a, b = _version_key(value), _version_key(other)
    ops = {"eq": a == b, "==": a == b, "ne": a != b, "!=": a != b, "lt": a < b, "<": a < b,
           "le": a <= b, "<=": a <= b, "gt": a > b, ">": a > b, "ge": a >= b, ">=": a >= b}
    if op not in ops:
        raise TemplateError(f"unknown version comparison '{op}'")
    return ops[op]


ANSIBLE_FILTERS = ("combine", "dict2items", "items2dict", "to_nice_yaml", "b64encode", "b64decode", "split",
                   "flatten", "hash", "password_hash", "regex_search", "regex_findall", "regex_replace",
                   "difference", "union", "intersect", "symmetric_difference", "checksum", "sha1", "md5",
                   "product")
ANSIBLE_MANAGED = "Ansible managed"


ANSIBLE_TESTS = ("changed", "change", "failed", "failure", "succeeded", "success", "successful", "skipped", "skip")


def _ansible_filter(name: str, table: str = "FILTERS") -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        from gpuconf.templating import ansible_filters
        return getattr(ansible_filters, table)[name](*args, **kwargs)
    call.__name__ = name
    return call


@jinja2.pass_context
def _ansible_lookup(context: Any, name: str, *terms: Any, **options: Any) -> Any:
    from gpuconf.templating.lookups import lookup
    return lookup(_lookup_paths(context), name, *terms, variables=_ContextVars(context), **options)


@jinja2.pass_context
def _ansible_query(context: Any, name: str, *terms: Any, **options: Any) -> Any:
    from gpuconf.templating.lookups import query
    return query(_lookup_paths(context), name, *terms, variables=_ContextVars(context), **options)


class _ContextVars(Mapping[str, Any]):
    """A template's variables, for lookup('vars', NAME)."""

    def __init__(self, context: Any):
        self.context = context

    def __getitem__(self, name: str) -> Any:
        value = self.context.resolve_or_missing(name)
        if value is jinja2.utils.missing:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.context.resolve_or_missing(name) is not jinja2.utils.missing

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _lookup_paths(context: Any) -> list[Any]:
    """Where lookup('file') looks, as Ansible: beside the playbook (its files/), then the current folder."""
    base = context.get("playbook_dir")
    folders = [Path(base) / "files", Path(base)] if isinstance(base, str) else []
    return [*folders, Path.cwd() / "files", Path.cwd()]


def make_env() -> jinja2.Environment:
    # trim_blocks as Ansible's templar: a template ported from Ansible renders byte for byte the same
    env = CountingEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False,
                              trim_blocks=True)
    env.filters.update({name: _ansible_filter(name) for name in ANSIBLE_FILTERS})
    env.globals.update(lookup=_ansible_lookup, query=_ansible_query, q=_ansible_query, ansible_managed=ANSIBLE_MANAGED)
    env.filters.update(
        bool=_to_bool,
        to_json=lambda v: json.dumps(v, default=str),  # as Ansible: in order; str: a value validate cannot know yet
        to_nice_json=lambda v: json.dumps(v, indent=4, sort_keys=True, default=str),  # as Ansible
        to_yaml=lambda v: yaml.safe_dump(v, default_flow_style=False, sort_keys=False),
        quote=lambda v: shlex.quote(str(v)),
    )
    env.tests["version"] = _version_test
    env.tests.update({name: _ansible_filter(name, "TESTS") for name in ANSIBLE_TESTS})
    bound_environment(env)  # output and CPU bounds (gpuconf/templating/bounds.py)
    return env
