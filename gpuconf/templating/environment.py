"""The Jinja environment's Ansible-shaped part: its filters, tests, lookups and globals, as
Ansible's templar has them (trim_blocks included), and the bounds every render runs under.
Ansible's own filters (gpuconf/templating/ansible_filters.py) are imported at their first use, so a check
whose templates use none starts no slower; validate knows them by these names."""
from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jinja2
import yaml

from gpuconf.templating.ansible_lexer import printed
from gpuconf.templating.bounds import bound_environment
from gpuconf.templating.secret_marks import DIRECT_CALLS, CountingEnvironment, first_undefined


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


ANSIBLE_FILTERS = ("combine", "dict2items", "items2dict", "to_nice_yaml", "b64encode", "b64decode", "split",
                   "flatten", "hash", "password_hash", "regex_search", "regex_findall", "regex_replace",
                   "difference", "union", "intersect", "symmetric_difference", "checksum", "sha1", "md5",
                   "product")
ANSIBLE_MANAGED = "Ansible managed"


ANSIBLE_TESTS = ("changed", "change", "failed", "failure", "succeeded", "success", "successful", "skipped", "skip")
# the rest of ansible-core's (gpuconf/templating/core_filters.py), imported at first use too
CORE_FILTERS = ("ternary", "mandatory", "comment", "subelements", "regex_escape", "from_yaml", "from_json",
                "type_debug", "basename", "dirname", "expanduser", "expandvars", "realpath", "relpath", "splitext",
                "normpath", "win_basename", "win_dirname", "path_join", "zip", "zip_longest", "combinations",
                "permutations", "unique", "log", "pow", "root", "human_to_bytes", "json_query")
CORE_TESTS = ("match", "search", "regex", "truthy", "falsy", "subset", "issubset", "superset", "issuperset",
              "contains", "any", "all", "version", "version_compare", "nan")


def _ansible_filter(name: str, table: str = "FILTERS", module: str = "ansible_filters") -> Any:
    def call(*args: object, **kwargs: object) -> Any:
        import importlib
        if module == "ansible_filters" and args and isinstance(args[0], jinja2.Undefined):
            args[0]._fail_with_undefined_error()   # as Ansible's: an undefined value is the error, not its type
        inside = _undefined_inside([*args, *kwargs.values()])
        if inside is not None:
            return inside
        return getattr(importlib.import_module(f"gpuconf.templating.{module}"), table)[name](*args, **kwargs)
    call.__name__ = name
    return call


def _undefined_inside(values: list[Any]) -> jinja2.Undefined | None:
    """An undefined value inside a list or a mapping given to one of Ansible's filters or tests: as
    ansible-core's plugins read their arguments' items (a lazy container trips the marker it holds),
    the filter gives that undefined value back (`d2 | combine({'k': nope})` is undefined), where
    Python would carry it along unread. Jinja's own filters read an item only where they use it."""
    for value in values:
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
        for item in items:
            if isinstance(item, jinja2.Undefined):
                return item
            if isinstance(item, (dict, list, tuple)):
                found = _undefined_inside([item])
                if found is not None:
                    return found
    return None


@jinja2.pass_environment
def _extract(environment: Any, item: Any, container: Any, morekeys: Any = None) -> Any:
    from gpuconf.templating.core_filters import extract
    return extract(environment, item, container, morekeys)


@jinja2.pass_context
def _ansible_lookup(context: Any, name: str, *terms: Any, **options: Any) -> Any:
    from gpuconf.templating.lookups import lookup
    if (undefined := _first_undefined(name, terms, options)) is not None:
        return undefined
    return lookup(_lookup_paths(context), name, *terms, variables=_ContextVars(context),
                  environment=context.environment, **options)


@jinja2.pass_context
def _ansible_query(context: Any, name: str, *terms: Any, **options: Any) -> Any:
    from gpuconf.templating.lookups import query
    if (undefined := _first_undefined(name, terms, options)) is not None:
        return undefined
    return query(_lookup_paths(context), name, *terms, variables=_ContextVars(context),
                 environment=context.environment, **options)


# The lookups that are given an undefined term or option (ansible-core 2.19: accept_args_markers);
# any other given one is not run and gives it back (_jinja_plugins._invoke_lookup).
UNDEFINED_LOOKUPS = frozenset(("env", "first_found"))


def _first_undefined(name: str, terms: tuple[Any, ...], options: Mapping[str, Any]) -> jinja2.Undefined | None:
    return None if name in UNDEFINED_LOOKUPS else first_undefined(terms, options)


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
    """Where lookup('file') looks, as Ansible: in the task's role (its files/, the role, its tasks/),
    beside the playbook (its files/), then the current folder. Other lookups look in another
    subfolder than files/ (lookup('template'): templates/)."""
    role, base = context.get("role_path"), context.get("playbook_dir")
    folders = [Path(role) / "files", Path(role), Path(role) / "tasks"] if isinstance(role, str) and role else []
    folders += [Path(base) / "files", Path(base)] if isinstance(base, str) else []
    return [*folders, Path.cwd() / "files", Path.cwd()]


class AnsibleDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Ansible's dumper: libyaml's safe dumper where PyYAML has it, as ansible-core uses (a lone
    scalar ends without PyYAML's `...` line: `false | to_yaml` is "false\\n"), and a string, mapping
    or list of any class is dumped as its plain kind (a YAML source's positioned dict, a marked string)."""


AnsibleDumper.add_multi_representer(str, lambda dumper, text: dumper.represent_str(str.__str__(text)))
AnsibleDumper.add_multi_representer(dict, yaml.SafeDumper.represent_dict)
AnsibleDumper.add_multi_representer(list, yaml.SafeDumper.represent_list)


def _to_yaml(value: Any, *_args: Any, default_flow_style: bool | None = None, **options: Any) -> str:
    """Ansible's to_yaml: its dumper (keys sorted, flow style for the innermost collections), unicode kept."""
    return str(yaml.dump(value, Dumper=AnsibleDumper, allow_unicode=True, default_flow_style=default_flow_style,
                         **options))


class ChainedUndefined(jinja2.ChainableUndefined, jinja2.StrictUndefined):
    """An undefined value as Ansible's templar has it: an error wherever it is used, but
    `x.y` of an undefined `x` is undefined too, so `r.rc | default(-1)` and `r.rc is defined`
    work when `r` is not set at all. A key a value lacks is named in 2.19's words
    (_jinja_common.Marker): "object of type 'dict' has no attribute 'rc'"."""

    def __init__(self, hint: str | None = None, obj: Any = jinja2.utils.missing, name: str | None = None,
                 exc: type[jinja2.exceptions.TemplateRuntimeError] = jinja2.UndefinedError):
        if not hint and name is not None and obj is not jinja2.utils.missing:
            hint = f"object of type {native_type_name(obj)!r} has no attribute {name!r}"
            exc = MissingAttribute
        super().__init__(hint, obj, name, exc)


class MissingAttribute(jinja2.UndefinedError):
    """`x.y` or `x['y']` of a value `x` that has no `y`."""


def native_type_name(value: object) -> str:
    """The builtin type a value is (a subclass of dict is a dict), as ansible-core names it."""
    return next((kind.__name__ for kind in type(value).__mro__ if kind.__module__ == "builtins" and kind is not object),
                type(value).__name__)


class ErrorMarker(ChainedUndefined):
    """A variable whose template failed (it refers to itself, a filter raised): as ansible-core
    2.19's captured-exception marker, the error is raised where the value is used, not where a
    template names it (`'x' if b else n1` with a broken `n1` and `b` true is 'x'). Unlike an
    undefined value, `is defined` and `default()` do not take it: they give it back, and using
    that raises the error."""

    def __init__(self, error: Exception):
        # Jinja raises `exc(message)` wherever an undefined value is used: here, the error itself
        super().__init__(hint=str(error), exc=lambda _message: error)  # type: ignore[arg-type]
        self.error = error


def _defined(value: Any) -> Any:
    return value if isinstance(value, ErrorMarker) else not isinstance(value, jinja2.Undefined)


def _undefined(value: Any) -> Any:
    return value if isinstance(value, ErrorMarker) else isinstance(value, jinja2.Undefined)


def _takes_no_error(function: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that takes an undefined value (`default`, `mandatory`) gives an ErrorMarker back."""
    @functools.wraps(function)
    def taking(*args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], ErrorMarker):
            return args[0]
        return function(*args, **kwargs)
    return taking


def make_env() -> jinja2.Environment:
    # trim_blocks as Ansible's templar: a template ported from Ansible renders byte for byte the same
    env = CountingEnvironment(undefined=ChainedUndefined, keep_trailing_newline=True, autoescape=False,
                              trim_blocks=True, finalize=printed)
    env.filters.update({name: _ansible_filter(name) for name in ANSIBLE_FILTERS})
    env.globals.update(lookup=_ansible_lookup, query=_ansible_query, q=_ansible_query, ansible_managed=ANSIBLE_MANAGED)
    DIRECT_CALLS[:] = [_ansible_lookup, _ansible_query]
    env.filters.update(
        bool=_to_bool,
        to_json=lambda v: json.dumps(v, default=str),  # as Ansible: in order; str: a value validate cannot know yet
        to_nice_json=lambda v: json.dumps(v, indent=4, sort_keys=True, default=str),  # as Ansible
        to_yaml=_to_yaml,
        quote=lambda v: shlex.quote(str(v)),
    )
    env.filters.update({name: _ansible_filter(name, "FILTERS", "core_filters") for name in CORE_FILTERS})
    env.filters["extract"] = _extract
    env.tests.update({name: _ansible_filter(name, "TESTS") for name in ANSIBLE_TESTS})
    env.tests.update({name: _ansible_filter(name, "TESTS", "core_filters") for name in CORE_TESTS})
    env.tests.update(defined=_defined, undefined=_undefined)   # they give an ErrorMarker back themselves
    for name, function in list(env.filters.items()):
        env.filters[name] = _takes_no_error(function) if name in UNDEFINED_TAKERS else _passes_undefined(function)
    tests: dict[str, Any] = env.tests
    for name, test in list(tests.items()):
        if name not in UNDEFINED_TESTS:
            tests[name] = _passes_undefined(test)
    bound_environment(env)  # output and CPU bounds (gpuconf/templating/bounds.py)
    return env


# The filters that are given an undefined value and say what it is; any other filter given one
# (as its input or an argument) is not called and gives back that undefined value, as in
# ansible-core 2.19 (its filters do not accept markers): `nope | trim | default('x')` is 'x', and
# using the undefined value itself still fails.
UNDEFINED_TAKERS = frozenset(("default", "d", "mandatory"))
# The same for tests: only these judge an undefined value (plugins/test/core.py, accept_args_markers);
# any other gives it back, so `nope is sequence` is an error where Jinja's own test says False.
UNDEFINED_TESTS = frozenset(("defined", "undefined", "vault_encrypted"))


def _passes_undefined(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)   # keeps Jinja's pass_environment/pass_context mark
    def filtered(*args: Any, **kwargs: Any) -> Any:
        if (undefined := first_undefined(args, kwargs)) is not None:
            return undefined
        return function(*args, **kwargs)
    return filtered
