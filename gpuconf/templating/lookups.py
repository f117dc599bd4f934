"""Ansible's lookups: `lookup()`/`query()` in templates, and the `with_NAME:` loops (a task's
items are lookup NAME of its terms). Each returns what ansible-core 2.19's plugin returns
(tests/ansible_fuzz compares them): items, list, flattened, dict, subelements, nested,
together, indexed_items, sequence, file, env, vars, template, first_found, config."""
from __future__ import annotations

import copy
import itertools
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gpuconf.errors import GpuconfError
from gpuconf.templating.bounds import bound_parse
from gpuconf.templating.template_vars import template_vars

LOOKUPS = ("items", "list", "flattened", "dict", "subelements", "nested", "together", "indexed_items", "sequence",
           "file", "env", "vars", "template", "first_found", "config")
# lookup('config', NAME): Ansible's settings whose value gpuconf has fixed, as gpuconf behaves
CONFIG = {
    "DEFAULT_PRIVATE_ROLE_VARS": False,   # a role's vars are the play's after it (roles:, import_role)
    "DEFAULT_HASH_BEHAVIOUR": "replace",  # a variable set again replaces the dict it was
    "ERROR_ON_MISSING_HANDLER": True,     # a notify that finds no handler is an error
    "INJECT_FACTS_AS_VARS": True,         # ansible_hostname and the other facts' names
}


def flatten_once(terms: list[Any]) -> list[Any]:
    found: list[Any] = []
    for term in terms:
        found.extend(term) if isinstance(term, (list, tuple)) else found.append(term)
    return found


def flatten_deep(terms: Any) -> list[Any]:
    found: list[Any] = []
    for term in terms if isinstance(terms, (list, tuple)) else [terms]:
        if isinstance(term, (list, tuple)):
            found.extend(flatten_deep(term))
        elif term is not None:
            found.append(term)
    return found


def loop_lookup(name: str, terms: Any, searched: list[Path]) -> list[Any]:
    """The items of `with_NAME: TERMS` (terms already templated), as Ansible's loop makes them."""
    if name != "dict" and not isinstance(terms, list):
        terms = [terms]  # Ansible's listify_lookup_plugin_terms
    return run(searched, name, terms, {}, None)


def query(searched: list[Path], name: str, *terms: Any, variables: Mapping[str, Any] | None = None,
          environment: Any = None, **options: Any) -> list[Any]:
    return run(searched, name, list(terms), options, variables, environment)


def lookup(searched: list[Path], name: str, *terms: Any, wantlist: bool = False,
           variables: Mapping[str, Any] | None = None, environment: Any = None, **options: Any) -> Any:
    """`lookup()`: the values joined by commas, as Ansible's, unless wantlist (or items/list)."""
    values = run(searched, name, list(terms), options, variables, environment)
    if wantlist or name in ("items", "list"):
        return values
    if all(isinstance(v, str) for v in values):
        return ",".join(values)
    return values[0] if len(values) == 1 else values   # as Ansible's, where the values are no text to join


def run(searched: list[Path], name: str, terms: Any, options: dict[str, Any],
        variables: Mapping[str, Any] | None, environment: Any = None) -> list[Any]:
    if name == "items":
        return flatten_once(terms)
    if name == "list":
        return list(terms)
    if name == "flattened":
        return flatten_deep(terms)
    if name == "dict":
        return [{"key": k, "value": v} for term in (terms if isinstance(terms, list) else [terms])
                for k, v in _mapping(term).items()]
    if name == "subelements":
        return subelements(*terms)
    if name == "nested":
        return [list(combination) for combination in itertools.product(*[_as_list(t) for t in terms])]
    if name == "together":
        return [list(group) for group in itertools.zip_longest(*[_as_list(t) for t in terms])]
    if name == "indexed_items":
        return [[index, item] for index, item in enumerate(terms)]
    if name == "sequence":
        return [value for term in terms for value in sequence(str(term), options)]
    if name == "env":
        return [os.environ.get(str(term), options.get("default", "")) for term in terms]
    if name == "vars":
        return [_variable(variables, str(term), options) for term in terms]
    if name == "file":
        return [_file(searched, term, options) for term in terms]
    if name == "template":
        return [_template(searched, term, options, variables, environment) for term in terms]
    if name == "first_found":
        return first_found(searched, terms, options)
    if name == "config":
        return [_config(str(term), options) for term in terms]
    raise GpuconfError(f"lookup plugin '{name}' is not supported (gpuconf has {', '.join(LOOKUPS)})")


def _as_list(term: Any) -> list[Any]:
    if not isinstance(term, (list, tuple)):
        raise GpuconfError(f"expected a list, got {type(term).__name__}")
    return list(term)


def _mapping(term: Any) -> Mapping[str, Any]:
    if not isinstance(term, Mapping):
        raise GpuconfError(f"with_dict expects a dict, got {type(term).__name__}")
    return term


def _variable(variables: Mapping[str, Any] | None, name: str, options: dict[str, Any]) -> Any:
    if variables is not None and name in variables:
        return variables[name]
    if "default" in options:
        return options["default"]
    raise GpuconfError(f"No variable named '{name}' was found")


def _file(searched: list[Path], term: Any, options: dict[str, Any]) -> str:
    path = Path(str(term))
    candidates = [path] if path.is_absolute() else [base / path for base in searched]
    match = next((c for c in candidates if c.is_file()), None)
    if match is None:
        raise GpuconfError(f"lookup('file'): '{term}' not found (looked in "
                           f"{', '.join(str(c.parent) for c in candidates)})")
    text = match.read_text()
    return text.rstrip("\n") if options.get("rstrip", True) else text


def subelements(items: Any, key: str, flags: Mapping[str, Any] | None = None) -> list[list[Any]]:
    """`subelements`: each item paired with each element of its `key` list (dotted for nested). As
    Ansible's lookup (not its filter), the item is given without that list: the key is taken out of
    (a copy of) the item; an item or a registered result that was skipped gives nothing."""
    skip_missing = bool((flags or {}).get("skip_missing", False))
    if isinstance(items, Mapping) and items.get("skipped", False) is not False:
        return []
    found = []
    for original in items.values() if isinstance(items, Mapping) else items:
        if isinstance(original, Mapping) and original.get("skipped", False) is not False:
            continue
        item = copy.deepcopy(original)
        holder: Any = None
        value: Any = item
        parts = key.split(".")
        for part in parts:
            if isinstance(value, Mapping) and part in value:
                holder, value = value, value[part]
            elif skip_missing:
                value = None
                break
            else:
                raise GpuconfError(f"could not find '{key}' key in iterated item '{original}'")
        if value is None:
            continue
        if not isinstance(value, list):
            raise GpuconfError(f"the key {key} should point to a list, got '{value}'")
        if isinstance(holder, dict):
            holder.pop(parts[-1], None)
        found += [[item, sub] for sub in value]
    return found


_SEQUENCE = re.compile(r"^(?:(?P<start>-?\w+)-)?(?P<end>-?\w+)(?:/(?P<stride>-?\w+))?(?::(?P<format>.+))?$")


def sequence(term: str, options: dict[str, Any]) -> list[str]:
    """`with_sequence: start=1 end=4 format=gpu%02d` (or `count=`, or the short `1-4/2:fmt`)."""
    values: dict[str, Any] = {"start": 1, "stride": 1, "format": "%d", **options}
    words = term.split()
    if words and "=" not in words[0]:
        short = _SEQUENCE.match(words.pop(0))
        if short is None:
            raise GpuconfError(f"can't parse the sequence '{term}'")
        values.update({k: v for k, v in short.groupdict().items() if v is not None})
    for word in words:
        key, _, value = word.partition("=")
        values[key] = value
    start, stride = int(str(values["start"]), 0), int(str(values["stride"]), 0)
    if "count" in values:
        end = start + (int(str(values["count"]), 0) - 1) * stride
    elif "end" in values:
        end = int(str(values["end"]), 0)
    else:
        raise GpuconfError("must specify count or end in with_sequence")
    if stride == 0:
        return []
    step = 1 if stride > 0 else -1
    return [str(values["format"]) % number for number in range(start, end + step, stride)]


def _in_subfolder(searched: list[Path], subfolder: str) -> list[Path]:
    """The lookup's search path with `subfolder` where lookup('file') has files/."""
    return [folder.parent / subfolder if folder.name == "files" else folder for folder in searched]


def _template(searched: list[Path], term: Any, options: dict[str, Any], variables: Mapping[str, Any] | None,
              environment: Any) -> str:
    """lookup('template', NAME): the file (in templates/ folders) rendered with the task's variables
    and `template_vars` over them, in the calling template's Jinja environment ({% include %} finds
    templates beside it and in the other templates/ folders)."""
    import jinja2

    if environment is None:
        raise GpuconfError("lookup('template') is available in a template only")
    folders = _in_subfolder(searched, "templates")
    path = Path(str(term))
    candidates = [path] if path.is_absolute() else [base / path for base in folders]
    match = next((c for c in candidates if c.is_file()), None)
    if match is None:
        raise GpuconfError(f"lookup('template'): '{term}' not found (looked in "
                           f"{', '.join(str(c.parent) for c in candidates)})")
    extra = options.get("template_vars") or {}
    if not isinstance(extra, Mapping):
        raise GpuconfError(f"lookup('template'): template_vars must be a mapping, got {type(extra).__name__}")
    search = list(dict.fromkeys([str(match.parent), *(str(f) for f in folders if f.is_dir())]))
    # as Ansible's templar: an included template's last line break is dropped, the file's own kept
    env = environment.overlay(loader=jinja2.FileSystemLoader(search), keep_trailing_newline=False)
    bound_parse(env)   # its own parse, with its settings, its loops bounded
    text = match.read_text()
    template = env.from_string(text)
    own = {**template_vars(str(term), match.resolve()), **extra}   # as Ansible's: template_path, ... then these
    scope = _Over(own, _Over({} if variables is None else variables, env.globals))
    rendered = "".join(template.root_render_func(template.new_context(vars=scope, shared=True)))
    return rendered + "\n" if text.endswith("\n") else rendered


class _Over(Mapping[str, Any]):
    """`top` over `base`, read lazily (the base is the template's own variables)."""

    def __init__(self, top: Mapping[str, Any], base: Mapping[str, Any]):
        self.top, self.base = top, base

    def __getitem__(self, key: str) -> Any:
        return self.top[key] if key in self.top else self.base[key]

    def __contains__(self, key: object) -> bool:
        return key in self.top or key in self.base

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self.base), **dict.fromkeys(self.top)})

    def __len__(self) -> int:
        return len(set(self.top) | set(self.base))


def first_found(searched: list[Path], terms: Any, options: dict[str, Any]) -> list[str]:
    """lookup('first_found', NAMES): the path of the first of the files that exists (names, lists of
    names, or {files: ..., paths: ...}); none is an error unless `skip`."""
    names: list[str] = []
    paths: list[str] = []
    for term in [*terms, *([{"files": options["files"], "paths": options.get("paths", [])}]
                           if "files" in options else [])]:
        if isinstance(term, Mapping):
            files, where = term.get("files", []), term.get("paths", [])
            names += [files] if isinstance(files, str) else list(files)
            paths += [where] if isinstance(where, str) else list(where)
        elif isinstance(term, (list, tuple)):
            names += [str(t) for t in term]
        else:
            names.append(str(term))
    paths += [options["paths"]] if isinstance(options.get("paths"), str) else list(options.get("paths") or [])
    for name in names:
        candidates = [Path(name)] if Path(name).is_absolute() else \
            [Path(p) / name for p in paths] if paths else [base / name for base in searched]
        match = next((c for c in candidates if c.is_file()), None)
        if match is not None:
            return [str(match)]
    if options.get("skip") in (True, "yes", "true", "True"):
        return []
    raise GpuconfError("No file was found when using first_found.")


def _config(name: str, options: dict[str, Any]) -> Any:
    """An Ansible setting gpuconf has a fixed value for; any other is an error (or skipped, or the
    default given, as Ansible's on_missing and default say)."""
    if name in CONFIG:
        return CONFIG[name]
    if "default" in options:
        return options["default"]
    if options.get("on_missing") in ("skip", "warn"):
        return None
    raise GpuconfError(f"lookup('config'): gpuconf has no setting '{name}' (it answers for "
                       f"{', '.join(sorted(CONFIG))})")
