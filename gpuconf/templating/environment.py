"""The Jinja environment's Ansible-shaped part: its filters, tests, lookups and globals, as
Ansible's templar has them (trim_blocks included), and the bounds every render runs under.
Ansible's own filters (gpuconf/templating/ansible_filters.py) are imported at their first use, so a check
whose templates use none starts no slower; validate knows them by these names."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import jinja2
import yaml

from gpuconf.errors import TemplateError
from gpuconf.templating.bounds import bound_environment
from gpuconf.templating.secret_marks import CountingEnvironment


def _to_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y")
    return bool(value)


def _version_key(text: str) -> list[int | str]:
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
    def call(*args: object, **kwargs: object) -> Any:
        from gpuconf.templating import ansible_filters
        return getattr(ansible_filters, table)[name](*args, **kwargs)
    call.__name__ = name
    return call


@jinja2.pass_context
def _ansible_lookup(context: Any, name: str, *terms: Any, **options: Any) -> Any:
    from gpuconf.templating.ansible_filters import lookup
    return lookup(_lookup_paths(context), name, *terms, **options)


@jinja2.pass_context
def _ansible_query(context: Any, name: str, *terms: Any, **options: Any) -> Any:
    from gpuconf.templating.ansible_filters import query
    return query(_lookup_paths(context), name, *terms, **options)


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
