"""More of ansible-core 2.19's filters and tests, as templates ported from Ansible use them: ternary,
mandatory, comment, the path filters, extract, subelements, regex_escape, from_json/from_yaml,
type_debug, zip, unique, the math ones, json_query; the tests match, search, regex, truthy,
falsy, subset, superset, contains, any, all, version (loose, strict, semver, pep440).

Each behaves as ansible-core's does (tests/ansible_fuzz compares them with it). Where a well-kept
library does the work it is used, imported at first use: jmespath (MIT) for json_query,
looseversion (PSF-2.0) for loose versions, semver (BSD-3-Clause) for semantic ones and
packaging (Apache-2.0/BSD) for PEP 440. ansible-core itself is GPL-3.0 and no dependency.
"""
from __future__ import annotations

import itertools
import json
import math
import ntpath
import operator
import os
import re
from typing import Any

import jinja2
import yaml

from gpuconf.errors import GpuconfError


def ternary(value: Any, true_val: Any, false_val: Any, none_val: Any = None) -> Any:
    if value is None and none_val is not None:
        return none_val
    return true_val if bool(value) else false_val


def mandatory(value: Any, msg: str | None = None) -> Any:
    if isinstance(value, jinja2.Undefined):
        if msg is not None:
            raise GpuconfError(str(msg))
        name = getattr(value, "_undefined_name", None)
        raise GpuconfError(f"Mandatory variable {repr(name) + ' ' if name else ''}not defined.")
    return value


_COMMENT_STYLES: dict[str, dict[str, str]] = {
    "plain": {"decoration": "# "}, "erlang": {"decoration": "% "}, "c": {"decoration": "// "},
    "cblock": {"beginning": "/*", "decoration": " * ", "end": " */"},
    "xml": {"beginning": "<!--", "decoration": " - ", "end": "-->"},
}


def comment(text: Any, style: str = "plain", **options: Any) -> str:
    """The text as a comment block of a style: a prefix line, each line decorated, a postfix line."""
    if style not in _COMMENT_STYLES:
        raise GpuconfError(f"comment: invalid style '{style}' (one of {', '.join(_COMMENT_STYLES)})")
    if not isinstance(text, str):   # Ansible's calls text.replace: a number is an error there
        raise TypeError(f"'{type(text).__name__}' object has no attribute 'replace'")
    shape = _COMMENT_STYLES[style]
    edge = options.get("decoration", shape["decoration"]).rstrip()
    p: dict[str, Any] = {"newline": "\n", "beginning": "", "prefix": edge, "prefix_count": 1, "decoration": "",
                         "postfix": edge, "postfix_count": 1, "end": "", **shape, **options}
    newline, decoration = p["newline"], p["decoration"]
    head = f"{p['beginning']}{newline}" if p["beginning"] else ""
    if p["prefix"]:
        head += (newline if p["prefix"] == newline else f"{p['prefix']}{newline}") * int(p["prefix_count"])
    body = (decoration + text.replace(newline, newline + decoration)).replace(
        decoration + newline, decoration.rstrip() + newline)
    tail = newline.join([""] + [p["postfix"]] * int(p["postfix_count"]))
    end = f"{newline}{p['end']}" if p["end"] else ""
    return str(head + body + tail + end)


@jinja2.pass_environment
def extract(environment: jinja2.Environment, item: Any, container: Any, morekeys: Any = None) -> Any:
    keys = [item] if morekeys is None else [item, *morekeys] if isinstance(morekeys, list) else [item, morekeys]
    value = container
    for key in keys:
        value = environment.getitem(value, key)
    return value


def subelements(obj: Any, key: Any, skip_missing: bool = False) -> list[tuple[Any, Any]]:
    if isinstance(obj, dict):
        elements = list(obj.values())
    elif isinstance(obj, list):
        elements = list(obj)
    else:
        raise GpuconfError("subelements: obj must be a list of dicts or a nested dict")
    path = list(key) if isinstance(key, list) else str(key).split(".")
    found = []
    for element in elements:
        values = element
        for part in path:
            try:
                values = values[part]
            except KeyError:
                if skip_missing:
                    values = []
                    break
                raise GpuconfError(f"could not find {part!r} key in iterated item {values!r}") from None
            except TypeError:
                raise GpuconfError(f"the key {part} should point to a dictionary, got '{values}'") from None
        if not isinstance(values, list):
            raise GpuconfError(f"the key {key!r} should point to a list, got {values!r}")
        found += [(element, value) for value in values]
    return found


def regex_escape(text: Any, re_type: str = "python") -> str:
    if re_type == "python":
        return re.escape(str(text))
    if re_type == "posix_basic":
        return re.sub(r"([].[^$*\\])", r"\\\1", str(text))
    raise GpuconfError(f"regex_escape: regex type '{re_type}' is not supported (python, posix_basic)")


def from_yaml(data: Any) -> Any:
    return yaml.safe_load(data) if isinstance(data, str) else data


def from_json(data: Any, **options: Any) -> Any:
    return json.loads(data, **options)


def type_debug(value: Any) -> str:
    return type(value).__name__


def unique(values: Any, case_sensitive: bool = True, attribute: str | None = None) -> list[Any]:
    found: list[Any] = []
    seen: list[Any] = []
    for value in values:
        key = value[attribute] if attribute is not None else value
        if not case_sensitive and isinstance(key, str):
            key = key.lower()
        if key not in seen:
            seen.append(key)
            found.append(value)
    return found


def logarithm(x: Any, base: float = math.e) -> float:
    return math.log10(x) if base == 10 else math.log(x, base)


def human_to_bytes(size: Any, default_unit: str | None = None, isbits: bool = False) -> int:
    match = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([KMGTPEZY]?)(i?)([Bb]?)\s*", str(size) + (default_unit or ""))
    if match is None:
        raise GpuconfError(f"human_to_bytes() can't interpret the value {size!r}")
    number, prefix = float(match.group(1)), match.group(2)
    return int(round(number * 1024 ** " KMGTPEZY".index(prefix or " ")))


def json_query(data: Any, expression: str) -> Any:
    try:
        import jmespath
    except ImportError:
        raise GpuconfError("json_query needs jmespath (pip install jmespath)") from None
    try:
        return jmespath.search(expression, data)
    except jmespath.exceptions.JMESPathError as exc:
        raise GpuconfError(f"json_query: {exc}") from None


def _path(name: str, func: Any) -> Any:
    """A path filter as ansible-core's: os.path's function on the value as it is, so that a number,
    a list or None fails the task ("expected str, bytes or os.PathLike object") and is never made
    a path by str()."""
    def path_filter(value: Any, *args: Any) -> Any:
        try:
            result = func(value, *args)
        except TypeError as exc:
            raise GpuconfError(f"The filter plugin '{name}' failed: {exc}") from None
        return list(result) if isinstance(result, tuple) else result
    return path_filter


def path_join(paths: Any) -> str:
    """ansible-core's: a string, or a sequence (not a mapping) of strings."""
    if isinstance(paths, str):
        return paths
    if not isinstance(paths, (list, tuple)):
        raise GpuconfError(f"|path_join expects string or sequence, got {type(paths)} instead.")
    try:
        return os.path.join(*paths)
    except TypeError as exc:
        raise GpuconfError(f"The filter plugin 'path_join' failed: {exc}") from None


_PATH_FILTERS = {"basename": os.path.basename, "dirname": os.path.dirname, "expanduser": os.path.expanduser,
                 "expandvars": os.path.expandvars, "realpath": os.path.realpath, "relpath": os.path.relpath,
                 "splitext": os.path.splitext, "normpath": os.path.normpath, "win_basename": ntpath.basename,
                 "win_dirname": ntpath.dirname}


FILTERS: dict[str, Any] = {
    "ternary": ternary, "mandatory": mandatory, "comment": comment, "extract": extract, "subelements": subelements,
    "regex_escape": regex_escape, "from_yaml": from_yaml, "from_json": from_json, "type_debug": type_debug,
    **{name: _path(name, func) for name, func in _PATH_FILTERS.items()}, "path_join": path_join,
    "zip": lambda *lists: [list(t) for t in zip(*lists)],
    "zip_longest": lambda *lists, fillvalue=None: [list(t) for t in itertools.zip_longest(*lists,
                                                                                           fillvalue=fillvalue)],
    "combinations": lambda values, r: [list(t) for t in itertools.combinations(values, r)],
    "permutations": lambda values, r=None: [list(t) for t in itertools.permutations(values, r)],
    "unique": unique, "log": logarithm, "pow": lambda x, y: math.pow(x, y), "root": lambda x, base=2: (
        math.sqrt(x) if base == 2 else math.pow(x, 1.0 / base)),
    "human_to_bytes": human_to_bytes, "json_query": json_query,
}


# -- tests ----------------------------------------------------------------------------------

def regex(value: Any = "", pattern: str = "", ignorecase: bool = False, multiline: bool = False,
          match_type: str = "search") -> bool:
    flags = (re.I if ignorecase else 0) | (re.M if multiline else 0)
    return bool(getattr(re.compile(pattern, flags), match_type)(str(value)))


_BOOLEAN_WORDS = {"yes": True, "on": True, "1": True, "true": True, "y": True, "t": True,
                  "no": False, "off": False, "0": False, "false": False, "n": False, "f": False}


def truthy(value: Any, convert_bool: bool = False) -> bool:
    if convert_bool and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        value = _BOOLEAN_WORDS.get(str(value).strip().lower(), value)
    return bool(value)


def issubset(a: Any, b: Any) -> bool:
    """Ansible's (plugins/test/mathstuff.py): sets of the items, so a dict or list item is an error."""
    return set(a) <= set(b)


_OPERATORS = {"==": "eq", "=": "eq", "eq": "eq", "<": "lt", "lt": "lt", "<=": "le", "le": "le", ">": "gt",
              "gt": "gt", ">=": "ge", "ge": "ge", "!=": "ne", "<>": "ne", "ne": "ne"}


def version(value: Any, other: Any, op: str = "eq", strict: bool | None = None,
            version_type: str | None = None) -> bool:
    """Ansible's version test: loose by default; strict, semver (semantic) or pep440 when asked."""
    if not value:
        raise GpuconfError("Input version value cannot be empty")
    if not other:
        raise GpuconfError("Version parameter to compare against cannot be empty")
    if strict is not None and version_type is not None:
        raise GpuconfError("Cannot specify both 'strict' and 'version_type'")
    kind = "strict" if strict else (version_type or "loose")
    if op not in _OPERATORS:
        raise GpuconfError(f"Invalid operator type ({op}). Must be one of {', '.join(map(repr, _OPERATORS))}")
    parse = _VERSION_TYPES.get(kind)
    if parse is None:
        raise GpuconfError(f"Invalid version type ({kind}). Must be one of "
                           f"{', '.join(map(repr, ['loose', 'strict', 'semver', 'semantic', 'pep440']))}")
    try:
        return bool(getattr(operator, _OPERATORS[op])(parse(str(value)), parse(str(other))))
    except GpuconfError:
        raise
    except Exception as exc:  # noqa: BLE001 - the libraries' own parse errors
        raise GpuconfError(f"Version comparison failed: {exc}") from None


def _loose(text: str) -> Any:
    from looseversion import LooseVersion

    return LooseVersion(text)


def _strict(text: str) -> tuple[Any, ...]:
    match = re.fullmatch(r"(\d+)\.(\d+)(\.(\d+))?([ab](\d+))?", text)
    if match is None:
        raise GpuconfError(f"invalid version number '{text}'")
    numbers = (int(match.group(1)), int(match.group(2)), int(match.group(4) or 0))
    pre = (match.group(5)[0], int(match.group(6))) if match.group(5) else ("z", 0)  # a final release sorts last
    return (*numbers, *pre)


def _semver(text: str) -> Any:
    import semver

    return semver.Version.parse(text)


def _pep440(text: str) -> Any:
    from packaging.version import Version

    return Version(text)


_VERSION_TYPES = {"loose": _loose, "strict": _strict, "semver": _semver, "semantic": _semver, "pep440": _pep440}

TESTS: dict[str, Any] = {
    "match": lambda value, pattern="", ignorecase=False, multiline=False: regex(value, pattern, ignorecase,
                                                                                multiline, "match"),
    "search": lambda value, pattern="", ignorecase=False, multiline=False: regex(value, pattern, ignorecase,
                                                                                 multiline, "search"),
    "regex": regex, "truthy": truthy, "falsy": lambda value, convert_bool=False: not truthy(value, convert_bool),
    "subset": issubset, "issubset": issubset, "superset": lambda a, b: issubset(b, a),
    "issuperset": lambda a, b: issubset(b, a), "contains": lambda seq, value: value in seq,
    "any": lambda values: any(values), "all": lambda values: all(values),
    "version": version, "version_compare": version,
    "nan": lambda value: isinstance(value, float) and math.isnan(value),
}
