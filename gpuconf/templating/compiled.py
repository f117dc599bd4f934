"""The one Jinja2 environment (and its marking twin, for renders that read a secret), and its
templates compiled once per run: each text once, whatever the host count; the plain references
(`{{ name }}`, `when: facts.x`) looked up without Jinja at all."""
from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jinja2

from gpuconf.templating.ansible_lexer import COMPILING
from gpuconf.templating.bounds import bound_environment, bound_template
from gpuconf.templating.environment import make_env
from gpuconf.templating.secret_marks import MarkingEnvironment

ENV = make_env()
MARKING = MarkingEnvironment(ENV)  # a render that read a secret runs again here (gpuconf/templating/secret_marks.py)
bound_environment(MARKING)  # under the same bounds,
MARKING.mark_filters(ENV.filters)  # and the marks outside them


def run_template(template: jinja2.Template, variables: Mapping[str, Any]) -> jinja2.runtime.Context:
    # shared=True makes `variables` the context's parent as is, so lookups stay
    # lazy; Jinja's globals (range, dict, ...) are then provided by a layer.
    context = template.new_context(vars=_WithGlobals(variables), shared=True)  # type: ignore[arg-type]  # a Mapping
    return context


class _WithGlobals(Mapping[str, Any]):
    def __init__(self, base: Mapping[str, Any]):
        self.base = base

    def __getitem__(self, key: str) -> Any:
        if key in self.base:
            return self.base[key]
        return ENV.globals[key]

    def __contains__(self, key: object) -> bool:
        return key in self.base or key in ENV.globals

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


_COMPILED: dict[tuple[str, ...], Any] = {}
COMPILE_LOCK = threading.Lock()


def compile_once(key: tuple[str, ...], compile_: Callable[[], Any]) -> Any:
    """Each template is compiled once per run, not once per host. Hosts run in threads that reach
    the same template at the same moment (50 at once with the default forks), and compiling it
    (lexer, parser, optimizer, code generator) costs far more than rendering: the lock makes them
    wait for the one compile. A template that does not compile is not kept: each host gets its error."""
    found = _COMPILED.get(key)
    if found is None:
        with COMPILE_LOCK:
            found = _COMPILED.get(key)
            if found is None:
                found = _COMPILED[key] = bound_template(compile_())
    return found


def compiled(kind: str, text: str, env: jinja2.Environment | None = None, escape: bool = False) -> Any:
    """`text` compiled once; `escape`: it was written in YAML, its string constants' backslashes
    are literal (Ansible's escape_backslashes: templating/ansible_lexer.py)."""
    env = env or ENV
    key = (kind, text, "escaped" if escape else "") if env is ENV else ("marked " + kind, text, "escaped" if escape
                                                                         else "")

    def compile_() -> Any:
        COMPILING.escape = ("expression" if kind == "expr" else "template") if escape else ""
        try:
            if kind == "expr":
                return env.compile_expression(text, undefined_to_none=False)._template
            return env.from_string(text)
        finally:
            COMPILING.escape = ""
    return compile_once(key, compile_)


# Most templates in playbooks are plain references (`{{ name }}`, `when: facts.nvswitch`,
# `nvidia-driver-{{ branch }}`). They are looked up directly, with the same lookups Jinja's
# compiled code makes (the variable, else a Jinja global, then `ENV.getattr` for each dotted
# part), so the result and the errors are the same, without building a Jinja context per call:
# that made planning 10,000 hosts take seconds (bench/big_inventory.py).
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_REFERENCE = re.compile(rf"^\s*({_NAME}(?:\.{_NAME})*)\s*$")
_INTERPOLATION = re.compile(rf"\{{\{{\s*({_NAME}(?:\.{_NAME})*)\s*\}}\}}")
_KEYWORDS = frozenset("true false none True False None and or not in is if else elif for recursive "
                      "block extends include import from with without context set endset macro call "
                      "filter raw".split())
_REFERENCES: dict[str, tuple[str, ...] | None] = {}
Segments = list[str | tuple[str, ...]]  # literal text and dotted references, alternating
_SEGMENTS: dict[str, Segments | None] = {}


def reference(expression: str) -> tuple[str, ...] | None:
    """The dotted name an expression is made of, or None if it is anything more."""
    if expression not in _REFERENCES:
        match = _REFERENCE.match(expression)
        parts = tuple(match.group(1).split(".")) if match else None
        _REFERENCES[expression] = None if parts is None or _KEYWORDS.intersection(parts) else parts
    return _REFERENCES[expression]


def segments(text: str) -> Segments | None:
    """Literal text and references, alternating, when that is all the template is."""
    if text not in _SEGMENTS:
        pieces: Segments = []
        position, simple = 0, True
        for match in _INTERPOLATION.finditer(text):
            parts = reference(match.group(1))
            if parts is None:
                simple = False
                break
            pieces += [text[position:match.start()], parts]
            position = match.end()
        literal = text[position:]
        pieces.append(literal)
        if simple and any(marker in piece for piece in pieces if isinstance(piece, str)
                          for marker in ("{{", "{%", "{#")):
            simple = False
        _SEGMENTS[text] = pieces if simple else None
    return _SEGMENTS[text]


def lookup_reference(parts: tuple[str, ...], variables: Mapping[str, Any]) -> Any:
    name = parts[0]
    try:
        value = variables[name]
    except KeyError:  # Vars raises KeyError only for a missing name: errors inside a value are TemplateErrors
        if name not in ENV.globals:
            raise jinja2.UndefinedError(f"'{name}' is undefined") from None
        value = ENV.globals[name]
    for attribute in parts[1:]:
        value = ENV.getattr(value, attribute)
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()
    return value
