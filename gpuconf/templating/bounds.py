"""Bounds on what a template may cost: its output and its CPU time.

Jinja's sandbox bounds `range` (100,000 items) and nothing else: `{{ lipsum(10**6) }}`,
`{{ 'x' * 10**9 }}` or two nested loops of 100,000 made validate and check hang or die of
memory. Here every way a template can make a large value from a small one is checked before
the value is made (string and list repetition, powers, printf and format widths, `center`,
`indent`, `join`, `replace`, `batch`, `slice`, `lipsum`, str's padding methods), the text a
template writes is counted as it streams, and each `{% for %}` loop, call and operator checks
the CPU time the render has used. A template that goes beyond either bound is a TemplateError,
with the template's place, never a hang.
"""
from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.utils import _PassArg

from gpuconf.errors import TemplateError

MAX_OUTPUT = 16 * 1024 * 1024  # characters one render may produce (and the most gpuconf reads from a file)
CPU_SECONDS = 10.0  # of this thread's CPU, for one render and the renders it starts; not wall time: 50
# hosts' threads waiting for the GIL do not spend it
MAX_POWER_BITS = 1 << 16  # `a ** b`: a 65,536-bit integer (19,729 digits) is already absurd in a config
_MIB = MAX_OUTPUT // (1024 * 1024)
_LOOP = "gpuconf_bounded_loop"  # the filter every `{% for %}` iterates through
_PRINTF_WIDTH = re.compile(r"%[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_FORMAT_WIDTH = re.compile(r"\{[^{}]*:[^{}]*?(\d+)[^{}]*\}")


class _Budget(threading.local):
    def __init__(self) -> None:
        self.deadline: float | None = None  # thread CPU time; None outside a render


_BUDGET = _Budget()


def check_time() -> None:
    deadline = _BUDGET.deadline
    if deadline is not None and time.thread_time() > deadline:
        raise TemplateError(f"the template used more than {CPU_SECONDS:g} s of CPU, the most one render may "
                            "use: is there a loop that never ends, or one nested too deep?")


def _too_big(what: str, size: int) -> TemplateError:
    return TemplateError(f"{what} would make {size:,} characters or items, more than the {_MIB} MiB a template "
                         "may produce")


def _check_size(what: str, size: int) -> None:
    if size > MAX_OUTPUT:
        raise _too_big(what, size)


# -- operators ------------------------------------------------------------------------------

def _check_binop(operator: str, left: Any, right: Any) -> None:
    if operator == "*":
        for sequence, count in ((left, right), (right, left)):
            if isinstance(sequence, (str, list, tuple)) and isinstance(count, int) and count > 0:
                _check_size(f"{type(sequence).__name__} * {count}", len(sequence) * count)
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        if abs(left) > 1 and right * abs(left).bit_length() > MAX_POWER_BITS:
            raise TemplateError(f"{left} ** {right} is too large a number (more than {MAX_POWER_BITS:,} bits)")
    elif operator == "%" and isinstance(left, str):
        _check_printf(left, right if isinstance(right, tuple) else (right,))


def _check_printf(text: str, values: tuple[Any, ...]) -> None:
    """`'%0999999999d' % 1` and `'%*d' % (10**9, 1)`: the widths, before Python pads."""
    for match in _PRINTF_WIDTH.finditer(text):
        for part in match.groups():
            if part and part.isdigit():
                _check_size(f"the format width {part}", int(part))
            elif part == "*":
                _check_size("a '*' format width", max((v for v in values if isinstance(v, int)), default=0))


def _check_format(text: str) -> None:
    for match in _FORMAT_WIDTH.finditer(text):
        _check_size(f"the format width {match.group(1)}", int(match.group(1)))


# -- calls (str's methods) and filters ----------------------------------------------------------

def _check_method(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    obj = getattr(obj, "__wrapped__", obj)  # the sandbox hands str.format out wrapped
    owner, name = getattr(obj, "__self__", None), getattr(obj, "__name__", "")
    if not isinstance(owner, str):
        return
    values = list(args) + list(kwargs.values())
    if name in ("center", "ljust", "rjust", "zfill") and values and isinstance(values[0], int):
        _check_size(f"str.{name}({values[0]})", values[0])
    elif name == "expandtabs":
        size = values[0] if values and isinstance(values[0], int) else 8
        _check_size(f"str.expandtabs({size})", len(owner) + owner.count("\t") * size)
    elif name == "replace" and len(values) >= 2 and all(isinstance(v, str) for v in values[:2]):
        _check_size("str.replace", _replaced_size(owner, values[0], values[1]))
    elif name == "join" and values:
        items = values[0] if isinstance(values[0], (list, tuple, str)) else []
        _check_size("str.join", len(owner) * max(len(items) - 1, 0) + sum(len(str(i)) for i in items))
    elif name in ("format", "format_map"):
        _check_format(owner)


def _replaced_size(text: str, old: str, new: str, count: int | None = None) -> int:
    found = text.count(old) if old else len(text) + 1
    if count is not None and count >= 0:
        found = min(found, count)
    return len(text) + found * (len(new) - len(old))


def _bounded_filters(filters: dict[str, Any]) -> dict[str, Any]:
    """Jinja's filters that can make a large value from a small one, checked first."""
    def wrap(name: str, check: Callable[..., None]) -> Any:
        original = filters[name]
        passed = 1 if _PassArg.from_obj(original) else 0  # Jinja's eval context (or environment) first

        @functools.wraps(original)  # keeps that mark: Jinja still passes it
        def bounded(*args: object, **kwargs: object) -> Any:
            if not _any_undefined(args, kwargs):   # else the filter gives the undefined value back
                check(*args[passed:], **kwargs)
            return original(*args, **kwargs)
        return bounded

    def center(value: Any, width: int = 80) -> None:
        _check_size(f"center({width})", width if isinstance(width, int) else 0)

    def indent(value: Any, width: Any = 4, *args: object, **kwargs: object) -> None:
        per_line = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        _check_size(f"indent({width!r})", len(str(value)) + (str(value).count("\n") + 1) * per_line)

    def format_(value: Any, *args: object, **kwargs: object) -> None:
        _check_printf(str(value), args)


    def replace(s: Any, old: Any, new: Any, count: Any = None) -> None:
        _check_size("replace", _replaced_size(str(s), str(old), str(new), count if isinstance(count, int) else None))

    def batch(value: Any, linecount: int, fill_with: Any = None) -> None:
        if fill_with is not None and isinstance(linecount, int):
            _check_size(f"batch({linecount})", linecount)

    def slice_(value: Any, slices: int, fill_with: Any = None) -> None:
        _check_size(f"slice({slices})", slices if isinstance(slices, int) else 0)

    checks: dict[str, Callable[..., None]] = {"center": center, "indent": indent, "format": format_,
                                              "replace": replace, "batch": batch, "slice": slice_}
    bounded = {name: wrap(name, check) for name, check in checks.items() if name in filters}
    join = filters["join"]

    @functools.wraps(join)
    def bounded_join(eval_ctx: Any, value: Any, d: Any = "", attribute: Any = None) -> Any:
        if _any_undefined((value, d, attribute), {}):
            return join(eval_ctx, value, d, attribute)   # gives the undefined value back
        items = list(value)  # a generator (`map`'s) is counted too, and then joined
        text = sum(len(str(i)) for i in items) if attribute is None else 0
        _check_size("join", len(str(d)) * max(len(items) - 1, 0) + text)
        return join(eval_ctx, items, d, attribute)
    return {**bounded, "join": bounded_join}


def _any_undefined(args: tuple[object, ...], kwargs: dict[str, object]) -> bool:
    return any(isinstance(value, jinja2.Undefined) for value in (*args, *kwargs.values()))


def _lipsum(original: Any) -> Callable[..., str]:
    def lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002 - Jinja's names
        words = n * max if isinstance(n, int) and isinstance(max, int) else 0
        if words * 12 > MAX_OUTPUT:  # a word and its space, HTML and punctuation: under 12 characters
            raise TemplateError(f"lipsum({n}) would write more than the {_MIB} MiB a template may produce")
        return str(original(n, html, min, max))
    return lipsum


class _BoundedLoop:
    """What a `{% for %}` iterates: the sequence itself, with the CPU time checked every 256 items
    (its length is kept: `loop.length` costs nothing more)."""

    def __init__(self, sequence: Any):
        self.sequence = sequence

    def __len__(self) -> int:
        return len(self.sequence)

    def __iter__(self) -> Iterator[Any]:
        for index, item in enumerate(self.sequence):
            if not index & 255:
                check_time()
            yield item


def bound_environment(env: jinja2.sandbox.SandboxedEnvironment) -> None:
    """Install the bounds on `env` (before any environment copies its filters and globals). The
    environment's own `call`, `call_binop` and parser are wrapped, not replaced: a subclass's
    behaviour stays."""
    env.filters.update(_bounded_filters(env.filters))
    env.filters[_LOOP] = _BoundedLoop
    env.globals["lipsum"] = _lipsum(env.globals["lipsum"])
    # intercepted operators are also not folded at compile time: `'x' * 10**9` was built by the compiler
    env.intercepted_binops = frozenset(env.intercepted_binops | {"*", "**", "%"})
    call_binop, call = env.call_binop, env.call

    def bounded_binop(context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        check_time()
        return call_binop(context, operator, left, right)

    def bounded_call(context: Any, obj: Any, *args: object, **kwargs: object) -> Any:
        _check_method(obj, args, kwargs)
        check_time()
        return call(context, obj, *args, **kwargs)

    env.call_binop = bounded_binop  # type: ignore[method-assign]
    env.call = bounded_call  # type: ignore[method-assign]
    bound_parse(env)


def bound_parse(env: jinja2.Environment) -> None:
    """Every `{% for %}` of what `env` compiles iterates through the bounded loop. Its own, for an
    overlay too (templating/template_files.py): an overlay copies its base's attributes, and
    the parse must use the overlay's own settings (`#jinja2: trim_blocks: False`)."""
    parse: Callable[[str, str | None, str | None], nodes.Template] = type(env)._parse.__get__(env)

    def bounded_parse(source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, _LOOP, [], [], None, None, lineno=loop.iter.lineno)
        return tree

    env._parse = bounded_parse  # type: ignore[method-assign]


def bound_template(template: Any) -> Any:
    """A compiled template whose render streams through the bounds: the text it writes is counted
    as it comes (a runaway render stops at the limit, not after building a gigabyte), and the CPU
    budget starts with the outermost render of this thread."""
    render = template.root_render_func

    def bounded(context: Any) -> Iterator[str]:
        outermost = _BUDGET.deadline is None
        if outermost:
            _BUDGET.deadline = time.thread_time() + CPU_SECONDS
        try:
            written = 0
            for count, chunk in enumerate(render(context)):
                written += len(chunk)
                if written > MAX_OUTPUT:
                    raise _too_big("the template's output", written)
                if not count & 255:
                    check_time()
                yield chunk
            check_time()
        finally:
            if outermost:
                _BUDGET.deadline = None

    template.root_render_func = bounded
    return template
