"""Typed Jinja expressions and YAML values for the generated programs.

Every variable a program uses comes from one catalog (`CATALOG`): its name says its type, so an
expression stays well typed whichever layer (inventory, group_vars, play vars, set_fact, -e, ...)
defines it. `Expressions.of(kind)` draws an expression of that kind over the catalog and the
filters, tests and lookups both tools claim (docs/ansible.md).
"""
from __future__ import annotations

import json
import random
from typing import Any

CATALOG = {
    "int": ["n1", "n2", "n3"],
    "str": ["s1", "s2", "s3"],
    "bool": ["b1", "b2"],
    "list": ["l1", "l2"],          # l1: strings, l2: ints
    "dict": ["d1", "d2"],          # d1: str -> int, d2: str -> str
    "nested": ["ll"],              # a list of lists (with_items flattens one level)
    "records": ["recs"],           # a list of dicts {name, port, tags: [..]}
}
TYPE_OF = {name: kind for kind, names in CATALOG.items() for name in names}
WORDS = ["alpha", "beta", "gpu0", "a-b", "x y", "n\u00e9e", "yes", "0", "", "CamelCase", "a.b.c", "/etc/gpu.conf",
         "10.0.0.1", "1.2.10", "line1\nline2", "  pad  ", "a,b", "off", "True", "none"]
KEYS = ["a", "b", "gpu", "k1", "x_y", "mem"]


def literal(value: Any) -> str:
    """A Jinja literal for a plain value."""
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


class Values:
    """Plain YAML values of each kind."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def word(self) -> str:
        return self.rng.choice(WORDS)

    def of(self, kind: str) -> Any:
        r = self.rng
        if kind == "int":
            return r.choice([0, 1, 2, 3, 7, 10, 42, -1, 100])
        if kind == "str":
            return self.word()
        if kind == "bool":
            return r.choice([True, False])
        if kind == "list":  # l1's strings or l2's ints: the name decides, see `for_name`
            return [self.word() for _ in range(r.randint(0, 3))]
        if kind == "dict":
            return {r.choice(KEYS): r.randint(0, 9) for _ in range(r.randint(0, 3))}
        if kind == "nested":
            return [r.choice([r.randint(0, 5), [r.randint(0, 5) for _ in range(r.randint(0, 2))]])
                    for _ in range(r.randint(0, 3))]
        if kind == "records":
            return [{"name": self.rng.choice(["gpu", "ib", "nvme"]) + str(i), "port": r.randint(1, 9),
                     "tags": [r.choice(["x", "y", "z"]) for _ in range(r.randint(0, 2))]}
                    for i in range(r.randint(0, 3))]
        raise ValueError(kind)

    def for_name(self, name: str) -> Any:
        kind = TYPE_OF[name]
        if name == "l2":
            return [self.rng.randint(0, 9) for _ in range(self.rng.randint(0, 3))]
        if name == "d2":
            return {self.rng.choice(KEYS): self.word() for _ in range(self.rng.randint(0, 3))}
        return self.of(kind)


class Expressions:
    """Jinja expressions of a kind: int, str, bool, list, dict, any."""

    def __init__(self, rng: random.Random, values: Values, registered: list[str] | None = None):
        self.rng, self.values = rng, values
        self.registered = registered if registered is not None else []  # names registered so far

    def pick(self, options: list[Any]) -> Any:
        return self.rng.choice(options)

    def var(self, kind: str) -> str:
        return self.pick(CATALOG[kind])

    def of(self, kind: str, depth: int = 0) -> str:
        if kind == "any":
            kind = self.pick(["int", "str", "str", "bool", "list", "dict"])
        if depth > 2 or self.rng.random() < 0.3:
            return self.leaf(kind)
        return getattr(self, f"_{kind}")(depth + 1)

    def leaf(self, kind: str) -> str:
        if self.rng.random() < 0.35:
            return literal(self.values.of(kind))
        if kind == "list":
            return self.pick(["l1", "l2"])
        if kind == "dict":
            return self.pick(["d1", "d2"])
        return self.var(kind)

    def _int(self, d: int) -> str:
        e = self.of
        return self.pick([
            f"{e('int', d)} + {e('int', d)}", f"({e('int', d)} * 3) % 7", f"{e('str', d)} | length",
            f"{e('list', d)} | length", f"{self.var('dict')} | length", "l2 | sum", "[n1, n2] | max",
            f"'{self.rng.randint(0, 99)}' | int", f"{e('str', d)} | int", "n1 // 2", f"{e('bool', d)} | ternary(1, 2)",
            f"n1 if {e('bool', d)} else n2", "l2 | min | default(0)", "ll | flatten | length",
            "recs | map(attribute='port') | sum", f"{self.var('str')} | wordcount", f"{e('int', d)} | abs",
            f"{e('list', d)} | unique | length", "(n1 ~ '5') | int", "range(n1 % 5) | list | length",
            f"{self.reg()}.rc | default(-1)", f"{self.reg()}.results | default([]) | length",
        ])

    def _str(self, d: int) -> str:
        e = self.of
        s = lambda: e("str", d)  # noqa: E731
        return self.pick([
            f"{s()} | upper", f"{s()} | lower", f"{s()} | title", f"{s()} | capitalize", f"{s()} | trim",
            f"{s()} ~ '-' ~ {e('int', d)}", f"{s()} | replace('a', 'o')", f"{e('list', d)} | join(',')",
            f"{s()} | regex_replace('([a-z])([a-z]*)', '\\\\2\\\\1')", f"{s()} | regex_replace('^(.)', '<\\\\1>')",
            f"{s()} | b64encode", f"{s()} | hash('sha1')", f"{s()} | checksum", f"{e('int', d)} | string",
            f"undefined_thing | default({s()})", f"{s()} | default('empty', true)", f"{s()} | basename",
            f"{s()} | dirname", f"'%s=%d' | format({s()}, {e('int', d)})", f"{e('any', d)} | to_json",
            f"{e('any', d)} | to_yaml", f"{e('any', d)} | to_nice_json", f"{e('any', d)} | to_nice_yaml",
            f"{s()} | comment", f"{s()} | quote", f"{s()} | reverse | join('')", f"{s()}[:3]",
            f"{s()} | regex_search('[a-z]+') | default('no match', true)", f"{e('bool', d)} | ternary('yes', 'no')",
            f"{e('list', d)} | first | default('none') | string", f"{s()} | splitext | first",
            f"{s()} | center(9)", f"{s()} | truncate(5, true, '') ", f"'{{0}}-{{1}}'.format({s()}, {e('int', d)})",
            f"{e('dict', d)} | dict2items | map(attribute='key') | join('+')", f"{s()} | mandatory",
            f"{s()} | split(',') | last", f"{s()} | b64encode | b64decode", f"{self.reg()}.stdout | default('')",
            f"{self.reg()}.msg | default('') | string", f"{s()} | indent(2)", f"{s()} if {e('bool', d)} else 'else'",
            "lookup('vars', 's1')", f"{s()} | lower | regex_findall('[aeiou]') | join",
        ])

    def _bool(self, d: int) -> str:
        e = self.of
        return self.pick([
            f"{e('int', d)} > {e('int', d)}", f"{e('str', d)} == {e('str', d)}", f"{e('str', d)} in {e('list', d)}",
            f"'a' in {e('str', d)}", f"{e('bool', d)} and {e('bool', d)}", f"{e('bool', d)} or {e('bool', d)}",
            f"not {e('bool', d)}", f"{e('str', d)} is match('[a-g]')", f"{e('str', d)} is search('a')",
            f"{e('str', d)} is regex('^[a-z]+$')", f"{self.var('str')} is defined", "nothing_here is undefined",
            f"{e('str', d)} | bool", f"{literal(self.pick(['y', 'yes', 'no', 'on', '1', 'true', 'x']))} | bool",
            f"{e('int', d)} is even", f"{e('int', d)} is divisibleby(3)", f"{e('list', d)} | length > 1",
            f"{e('dict', d)} is mapping", f"{e('str', d)} is string", f"{e('any', d)} is sequence",
            f"{e('str', d)} is version('1.2', '>=')", f"{e('bool', d)} | bool", f"{self.reg()} is changed",
            f"{self.reg()} is skipped", f"{self.reg()} is failed", f"{self.reg()} is succeeded",
            f"{self.reg()}.rc | default(0) == 0", f"{self.reg()}.rc is defined", f"{e('int', d)} is number",
            f"{e('list', d)} is subset({e('list', d)})", f"{e('any', d)} is truthy",
        ])

    def _list(self, d: int) -> str:
        e = self.of
        ls = lambda: e("list", d)  # noqa: E731
        return self.pick([
            f"{ls()} | map('string') | map('upper') | list", "l1 | select('match', 'a') | list",
            "l1 | reject('search', 'a') | list", f"{ls()} | map('string') | sort", f"{ls()} | unique",
            # the set filters' order of strings is Python's set order, which differs run to run in
            # ansible-core itself (hash randomisation): sorted as text, so that it can be compared
            f"{ls()} | reverse | list", f"{ls()} + {ls()}", f"{ls()} | difference({ls()}) | map('string') | sort",
            f"{ls()} | union({ls()}) | map('string') | sort", f"{ls()} | intersect({ls()}) | map('string') | sort", "ll | flatten", "ll | flatten(1)",
            f"{e('dict', d)} | dict2items", f"{e('dict', d)} | list", f"range({e('int', d)} % 4) | list",
            f"{ls()} | zip({ls()}) | list", f"{e('str', d)} | split('a')", "recs | map(attribute='name') | list",
            "recs | selectattr('port', 'gt', 4) | map(attribute='name') | list",
            "recs | subelements('tags') | map('last') | list", "['a', 'b'] | map('extract', {'a': 1, 'b': 2}) | list",
            f"[{e('any', d)}, {e('any', d)}]",
            f"{ls()} | product(['x']) | map('join', '-') | list", f"{e('str', d)} | regex_findall('[a-z]')",
            "query('items', l1, l2)", "lookup('list', l2, wantlist=True)", f"{ls()} | batch(2) | list",
            f"{ls()} | map('default', 'd') | list",
        ])

    def _dict(self, d: int) -> str:
        e = self.of
        return self.pick([
            f"{e('dict', d)} | combine({e('dict', d)})", f"{e('dict', d)} | combine({{'k': {e('any', d)}}})",
            f"dict(a={e('int', d)}, b={e('str', d)})", f"{{'x': {e('any', d)}}}",
            "recs | items2dict(key_name='name', value_name='port')", f"{e('dict', d)} | dict2items | items2dict",
            "d1 | combine(d2, recursive=true)", f"{{{e('str', d)}: {e('int', d)}}}",
        ])

    def reg(self) -> str:
        return self.pick(self.registered) if self.registered else "nothing_registered"

    def template(self, kind: str = "any") -> str:
        """A YAML value that is one template: `{{ expr }}`."""
        return "{{ " + self.of(kind) + " }}"

    def text(self) -> str:
        """A string with text around one or two templates."""
        parts = [self.pick(["v=", "", "x ", "[", "host "]), "{{ " + self.of("any") + " }}"]
        if self.rng.random() < 0.4:
            parts += [self.pick([" and ", "-", ", "]), "{{ " + self.of("any") + " }}"]
        if self.rng.random() < 0.5:
            parts.append(self.pick(["]", " end", "."]))
        return "".join(parts)
