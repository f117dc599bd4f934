"""Ansible's filters, tests and lookups that templates ported from Ansible use.

Imported only when a template calls one (gpuconf/templating/render.py registers thin stand-ins), so
a check that uses none starts no slower. Each one behaves as ansible-core 2.19's does, which the
differential suite (tests/ansible_diff) checks against ansible-core itself. The work is done by
the standard library and PyYAML; password_hash by the C library's crypt(3) (Python's crypt
module), or passlib where that is gone (Python 3.13), as Ansible does. ansible-core itself is
no dependency (GPL-3.0 and a large import), nor is jinja2-ansible-filters (its GPL-3.0 copy, not
released since 2022).
"""
from __future__ import annotations

import base64
import hashlib
import itertools
import os
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from gpuconf.errors import GpuconfError

ANSIBLE_MANAGED = "Ansible managed"   # Ansible's default: a ported template renders the same line


def combine(*dicts: Any, recursive: bool = False, list_merge: str = "replace") -> dict[str, Any]:
    if list_merge != "replace":
        raise GpuconfError(f"combine: list_merge='{list_merge}' is not supported (only 'replace')")
    result: dict[str, Any] = {}
    for item in dicts:
        for one in (item if isinstance(item, list) else [item]):
            result = _merge(result, one, recursive)
    return result


def _merge(base: dict[str, Any], other: Mapping[str, Any], recursive: bool) -> dict[str, Any]:
    merged = dict(base)
    for key, value in other.items():
        if recursive and isinstance(merged.get(key), Mapping) and isinstance(value, Mapping):
            merged[key] = _merge(dict(merged[key]), value, True)
        else:
            merged[key] = value
    return merged


def dict2items(value: Mapping[str, Any], key_name: str = "key", value_name: str = "value") -> list[dict[str, Any]]:
    if not isinstance(value, Mapping):
        raise GpuconfError(f"dict2items expects a dictionary, got {type(value).__name__}")
    return [{key_name: key, value_name: item} for key, item in value.items()]


def items2dict(value: list[Mapping[str, Any]], key_name: str = "key", value_name: str = "value") -> dict[str, Any]:
    return {item[key_name]: item[value_name] for item in value}


def to_nice_yaml(value: Any, indent: int = 4, *_args: Any, default_flow_style: bool = False, **kwargs: Any) -> str:
    """Ansible's to_nice_yaml: its to_yaml, block style, indent 4."""
    from gpuconf.templating.environment import AnsibleDumper

    return str(yaml.dump(value, Dumper=AnsibleDumper, indent=indent, allow_unicode=True,
                         default_flow_style=default_flow_style, **kwargs))


def b64encode(value: Any, encoding: str = "utf-8") -> str:
    return base64.b64encode(str(value).encode(encoding)).decode("ascii")


def b64decode(value: Any, encoding: str = "utf-8") -> str:
    return base64.b64decode(str(value)).decode(encoding)


def split(value: Any, separator: str | None = None, maxsplit: int = -1) -> list[str]:
    """ansible-core's: str.split of the value itself, so that a number fails (never split as text)."""
    try:
        return str.split(value, separator, maxsplit)
    except TypeError as exc:
        raise GpuconfError(f"The filter plugin 'split' failed: {exc}") from None


def flatten(value: Any, levels: int | None = None, skip_nulls: bool = True) -> list[Any]:
    result: list[Any] = []
    for item in value:
        if skip_nulls and item in (None, "None", "null"):
            continue
        if isinstance(item, (list, tuple)) and (levels is None or levels > 0):
            result.extend(flatten(item, None if levels is None else levels - 1, skip_nulls))
        else:
            result.append(item)
    return result


def hash_filter(value: Any, name: str = "sha1") -> str:
    try:
        digest = hashlib.new(name)
    except ValueError:
        raise GpuconfError(f"hash: unknown algorithm '{name}'") from None
    digest.update(str(value).encode("utf-8"))
    return digest.hexdigest()


_CRYPT_PREFIX = {"sha512": "$6$", "sha512_crypt": "$6$", "sha256": "$5$", "sha256_crypt": "$5$", "md5": "$1$",
                 "md5_crypt": "$1$"}


# Ansible's (passlib's) default rounds, so that the same salt gives the same hash
_DEFAULT_ROUNDS = {"sha512": 656000, "sha512_crypt": 656000, "sha256": 535000, "sha256_crypt": 535000}


def password_hash(value: Any, scheme: str = "sha512", salt: str | None = None, rounds: int | None = None) -> str:
    if scheme not in _CRYPT_PREFIX:
        raise GpuconfError(f"password_hash: scheme '{scheme}' is not supported "
                           f"(one of {', '.join(sorted(_CRYPT_PREFIX))})")
    if salt is None:
        salt = base64.b64encode(os.urandom(12), b"./").decode("ascii")[:16]
    rounds = rounds if rounds is not None else _DEFAULT_ROUNDS.get(scheme)
    prefix = _CRYPT_PREFIX[scheme] + (f"rounds={rounds}$" if rounds else "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt
        except ImportError:
            crypt = None  # type: ignore[assignment]
    if crypt is not None:
        return str(crypt.crypt(str(value), prefix + salt))
    try:
        from passlib import hash as passlib_hash
    except ImportError:
        raise GpuconfError("password_hash needs crypt(3) (Python's crypt module) or passlib "
                           "(pip install passlib)") from None
    scheme_name = scheme if scheme.endswith("_crypt") else f"{scheme}_crypt"
    options: dict[str, Any] = {"salt": salt, **({"rounds": rounds} if rounds else {})}
    return str(getattr(passlib_hash, scheme_name).using(**options).hash(str(value)))


def regex_search(value: Any, pattern: str, *groups: str, ignorecase: bool = False,
                 multiline: bool = False) -> Any:
    flags = (re.I if ignorecase else 0) | (re.M if multiline else 0)
    match = re.search(pattern, str(value), flags)
    if not match:
        return None
    if not groups:
        return match.group(0)
    found = []
    for group in groups:
        if group.startswith("\\g<"):
            found.append(match.group(group[3:-1]))
        elif group.startswith("\\"):
            found.append(match.group(int(group[1:])))
        else:
            raise GpuconfError(f"regex_search: unknown group '{group}' (write '\\\\1' or '\\\\g<name>')")
    return found


def regex_findall(value: Any, pattern: str, ignorecase: bool = False, multiline: bool = False) -> list[Any]:
    flags = (re.I if ignorecase else 0) | (re.M if multiline else 0)
    return re.findall(pattern, str(value), flags)


def regex_replace(value: Any, pattern: str = "", replacement: str = "", ignorecase: bool = False,
                  multiline: bool = False, count: int = 0) -> str:
    flags = (re.I if ignorecase else 0) | (re.M if multiline else 0)
    return re.sub(pattern, replacement, str(value), count=count, flags=flags)


def _unique(values: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _fixed_hash(value: Any) -> bool:
    """Whether the value hashes alike in every process (a number, None, a tuple of them); a string's
    hash changes from process to process (PYTHONHASHSEED)."""
    if value is None or isinstance(value, (bool, int, float)):
        return True
    return isinstance(value, tuple) and all(_fixed_hash(item) for item in value)


def _set_filter(a: Any, b: Any, operation: Callable[[set[Any], set[Any]], set[Any]],
                first_seen: Callable[[], list[Any]]) -> list[Any]:
    """ansible-core's set filters (plugins/filter/mathstuff.py): list(set(a) OP set(b)), in the order
    Python's set gives, and the first-seen order where a value cannot be in a set. Where a value's
    hash changes from process to process (a string), so does Ansible's order, run to run: gpuconf
    keeps the first-seen order there (docs/ansible.md, supported differently)."""
    if all(_fixed_hash(value) for value in [*a, *b]):
        return list(operation(set(a), set(b)))
    return first_seen()


def difference(a: list[Any], b: list[Any]) -> list[Any]:
    return _set_filter(a, b, lambda x, y: x - y, lambda: _unique([x for x in a if x not in b]))


def union(a: list[Any], b: list[Any]) -> list[Any]:
    return _set_filter(a, b, lambda x, y: x | y, lambda: _unique(list(a) + list(b)))


def intersect(a: list[Any], b: list[Any]) -> list[Any]:
    return _set_filter(a, b, lambda x, y: x & y, lambda: _unique([x for x in a if x in b]))


def symmetric_difference(a: list[Any], b: list[Any]) -> list[Any]:
    return _set_filter(a, b, lambda x, y: x ^ y,
                       lambda: _unique([x for x in union(a, b) if x not in intersect(a, b)]))


def checksum(value: Any) -> str:
    return hash_filter(value, "sha1")


def product(*lists: Any) -> list[list[Any]]:
    return [list(item) for item in itertools.product(*lists)]


FILTERS = {
    "combine": combine, "dict2items": dict2items, "items2dict": items2dict, "to_nice_yaml": to_nice_yaml,
    "b64encode": b64encode, "b64decode": b64decode, "split": split, "flatten": flatten, "hash": hash_filter,
    "password_hash": password_hash, "regex_search": regex_search, "regex_findall": regex_findall,
    "regex_replace": regex_replace, "difference": difference, "union": union, "intersect": intersect,
    "symmetric_difference": symmetric_difference, "checksum": checksum, "sha1": checksum, "product": product,
    "md5": lambda value: hash_filter(value, "md5"),
}


def _result_flag(value: Any, key: str) -> bool:
    if not isinstance(value, Mapping):
        raise GpuconfError(f"the '{key}' test expects a registered result (a dictionary), got {type(value).__name__}")
    return bool(value.get(key, False))


# Ansible's tests of a registered result: `when: r is changed`
TESTS = {
    "changed": lambda value: _result_flag(value, "changed"),
    "change": lambda value: _result_flag(value, "changed"),
    "failed": lambda value: _result_flag(value, "failed"),
    "failure": lambda value: _result_flag(value, "failed"),
    "succeeded": lambda value: not _result_flag(value, "failed"),
    "success": lambda value: not _result_flag(value, "failed"),
    "successful": lambda value: not _result_flag(value, "failed"),
    "skipped": lambda value: _result_flag(value, "skipped"),
    "skip": lambda value: _result_flag(value, "skipped"),
}
