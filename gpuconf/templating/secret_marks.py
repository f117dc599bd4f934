"""Secrets followed through templating: the value is marked, not the string.

A secret is a `Secret` (a `str` subclass: `!secret`, a vault value, a variable named in
`secret_vars`). Redacting known strings is not enough: `{{ token | upper }}`, `{{ token[2:] }}`
or `{{ token | reverse | join }}` make new strings. So templating works in two steps:

- Every render counts, per thread, the secrets it reads (`touch`): a variable whose value
  is or holds a secret, or an attribute or item that is one. A render that read none costs two
  reads of a counter, nothing more.
- A render that read one is done again in `MARKING`, an environment whose filters, operators,
  `~`, slices and method calls mark what they make from a marked value, and whose `finalize`
  collects each marked value the template printed. The rendered string is marked as a whole,
  and each printed piece is told to the run's set of secret strings, which every output redacts
  (gpuconf/engine/secrets.py): so `echo host {{ token | upper }}` shows as `echo host ********`,
  and the host's own echo of the upper-cased token is hidden as well.

Where a template could lose the mark (a `{% for %}` over a secret's characters, a
`{% filter %}` block), its whole output counts as secret too.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ParamSpec

import jinja2
import jinja2.sandbox
from jinja2 import nodes
from jinja2.compiler import CodeGenerator

from gpuconf.files.yamlsrc import Secret
from gpuconf.templating.ansible_lexer import escaping_lexer, printed

Arguments = ParamSpec("Arguments")  # a wrapped filter's or method's own parameters


class _State(threading.local):
    """Per thread (hosts run in threads): how many secrets were read, and, while a render is
    being marked, the marked values it printed."""

    def __init__(self) -> None:
        self.reads = 0
        self.pieces: list[Any] | None = None


STATE = _State()


def touch() -> None:
    """A secret was read: the render under way must be marked."""
    STATE.reads += 1


def holds_secret(value: Any, depth: int = 0) -> bool:
    """Whether `value` is a secret or a list or mapping with one inside."""
    if isinstance(value, Secret):
        return True
    if depth > 16:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds_secret(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return any(holds_secret(item, depth + 1) for item in value.values())
    return False


def mark(value: Any) -> Any:
    """`value` with every string in it marked: a string, or a copy of a list or mapping.
    Numbers stay numbers (and unmarked)."""
    if isinstance(value, Secret):
        return value
    if isinstance(value, str):
        return Secret(value)
    if isinstance(value, list):
        return [mark(item) for item in value]
    if isinstance(value, tuple):
        return tuple(mark(item) for item in value)
    if isinstance(value, dict):
        return {key: mark(item) for key, item in value.items()}
    return value


def secret_strings(value: Any) -> Iterator[str]:
    """The marked strings in `value`, as plain strings, for the run's set."""
    if isinstance(value, Secret):
        yield str(value)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from secret_strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from secret_strings(item)


def tell(sink: Any, values: Iterable[Any]) -> None:
    """Add each marked value to `sink` (the host's set of secret strings): a string itself; a
    number as text; a list or a mapping both as printed and each marked string in it."""
    if sink is None:
        return
    for value in values:
        if value is None or isinstance(value, bool):
            continue
        if not isinstance(value, str):  # a number listed in secret_vars too
            sink.add(str(value))
        for text in secret_strings(value):
            sink.add(text)


# -- the marking environment ----------------------------------------------------------------

_SANDBOX = jinja2.sandbox.ImmutableSandboxedEnvironment
# The callables that are given an undefined argument themselves (lookup, query: environment.py).
DIRECT_CALLS: list[object] = []


def first_undefined(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> jinja2.Undefined | None:
    """The first undefined value among a call's arguments (not inside them): what ansible-core
    2.19 gives back for a filter, test, lookup or call that does not accept markers."""
    return next((value for value in (*args, *kwargs.values()) if isinstance(value, jinja2.Undefined)), None)


class CountingEnvironment(_SANDBOX):
    """gpuconf's Jinja environment: an attribute or item that is a secret counts as read (a
    loop item's field, a registered output). Every `a.b` of every template comes here: the
    sandbox's own method is called directly, without super()'s lookup."""

    @property
    def lexer(self) -> Any:
        """Jinja's lexer, escaping backslashes as Ansible's templar does (templating/ansible_lexer.py)."""
        return escaping_lexer(self)

    def call(__self, __context: Any, __obj: Any, *args: object, **kwargs: object) -> Any:  # noqa: N805 - Jinja's own
        """A call given an undefined value gives it back uncalled, as ansible-core 2.19's
        (`'{0}'.format(nope) | default('x')` is 'x'); a macro, lookup() and query() see it."""
        if not isinstance(__obj, jinja2.runtime.Macro) and not any(__obj is call for call in DIRECT_CALLS):
            if (undefined := first_undefined(args, kwargs)) is not None:
                return undefined
        return _SANDBOX.call(__self, __context, __obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        value = _SANDBOX.getattr(self, obj, attribute)
        if value.__class__ is Secret:
            STATE.reads += 1
        return value

    def getitem(self, obj: Any, argument: Any) -> Any:
        value = _SANDBOX.getitem(self, obj, argument)
        if value.__class__ is Secret:
            STATE.reads += 1
        return value


def _marked_result(func: Callable[Arguments, Any]) -> Callable[Arguments, Any]:
    """`func` (a filter, or a method of a secret), its result marked when an argument is."""

    @functools.wraps(func)  # keeps jinja_pass_arg: a filter that takes the context still gets it
    def marking(*args: Arguments.args, **kwargs: Arguments.kwargs) -> Any:
        result = func(*args, **kwargs)
        if holds_secret(args) or holds_secret(kwargs):
            if isinstance(result, Iterator):  # map, select, reverse of a list: a generator
                result = list(result)
            return mark(result)
        return result
    return marking


def _marked_method(method: Callable[Arguments, Any]) -> Callable[Arguments, Any]:
    """A method of a secret: what it returns is made from the secret."""

    def marking(*args: Arguments.args, **kwargs: Arguments.kwargs) -> Any:
        result = method(*args, **kwargs)
        return mark(list(result) if isinstance(result, Iterator) else result)
    return marking


class _MarkingCodeGenerator(CodeGenerator):
    def visit_Concat(self, node: nodes.Concat, frame: Any) -> None:
        """`a ~ b`: through the environment, which marks the result when a part is marked."""
        self.write("environment.join_marked((")
        for part in node.nodes:
            self.visit(part, frame)
            self.write(", ")
        self.write("))")


def _collect(value: Any) -> Any:
    """finalize: each printed value that is marked is a piece the run must hide."""
    pieces = STATE.pieces
    if pieces is not None and holds_secret(value):
        pieces.append(value)
    return printed(value)


class MarkingEnvironment(CountingEnvironment):
    """The environment a render that read a secret runs in again: what it makes from a
    marked value is marked, and what it prints marked is collected (`STATE.pieces`)."""

    code_generator_class = _MarkingCodeGenerator
    intercepted_binops = frozenset(["+", "-", "*", "/", "//", "%", "**"])

    def __init__(self, base: jinja2.Environment):
        super().__init__(undefined=base.undefined, keep_trailing_newline=True, autoescape=False,
                         finalize=_collect)
        self.mark_filters(base.filters)
        self.tests = dict(base.tests)
        self.globals.update(base.globals)

    def mark_filters(self, filters: dict[str, Any]) -> None:
        """`filters`, each marking its result. Called again after bounds are installed
        (gpuconf/templating/bounds.py), so that marking is outermost: a bound that copies its
        input (join's list of a string's characters) would drop the mark."""
        self.filters = {name: _marked_result(func) for name, func in filters.items()}

    def join_marked(self, parts: tuple[Any, ...]) -> str:
        text = "".join(str(part) for part in parts)
        return Secret(text) if holds_secret(parts) else text

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        result = super().call_binop(context, operator, left, right)
        return mark(result) if holds_secret(left) or holds_secret(right) else result

    def getattr(self, obj: Any, attribute: str) -> Any:
        value = super().getattr(obj, attribute)
        if isinstance(obj, Secret) and callable(value):  # `token.upper()`, `token.split('-')`
            return _marked_method(value)
        return value

    def getitem(self, obj: Any, argument: Any) -> Any:
        value = super().getitem(obj, argument)
        if isinstance(obj, Secret) and isinstance(value, str):  # a slice or a character
            return Secret(value)
        return value

    def call(__self, __context: Any, __obj: Any, *args: object, **kwargs: object) -> Any:  # noqa: N805 - Jinja's own
        result = super().call(__context, __obj, *args, **kwargs)
        if holds_secret(args) or holds_secret(kwargs):  # `'{}'.format(token)`, `dict(key=token)`
            return mark(result)
        return result


# -- what a render that read a secret gives back ------------------------------------------------

# Names of `Vars.reads` that no variable can have. SECRET_READ: the result used a secret, so it is
# never shared with another host (gpuconf/engine/plancache.py): that host's set of secret strings
# must learn what the render made. SECRET_NAMES: the names `secret_vars` lists, in every layer.
SECRET_READ = "\0a secret"
SECRET_NAMES = "\0secret_vars"
_NAME_SETS: dict[frozenset[str], frozenset[str]] = {}
_NO_NAMES: frozenset[str] = frozenset()  # one object per set of names: the cache compares with `is`


def listed_names(layers: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The variables `secret_vars` lists in any of `layers`, as one shared object per set."""
    names: set[str] = set()
    for layer in layers:
        if "secret_vars" in layer:
            listed = layer["secret_vars"]
            if isinstance(listed, (list, tuple)):
                names.update(str(name) for name in listed)
    if not names:
        return _NO_NAMES
    found = frozenset(names)
    return _NAME_SETS.setdefault(found, found)


def secret_seen(variables: Any) -> None:
    """The render under way read a secret: it is never shared with another host (`SECRET_READ`)."""
    reads = getattr(variables, "reads", None)
    if reads is not None:
        reads[SECRET_READ] = (None, False)


@contextlib.contextmanager
def collecting() -> Iterator[list[Any]]:
    """The marked values a render in MarkingEnvironment prints, in order."""
    pieces: list[Any] = []
    saved, STATE.pieces = STATE.pieces, pieces
    try:
        yield pieces
    finally:
        STATE.pieces = saved


def marked_output(result: Any, pieces: list[Any], may_lose: bool, variables: Any) -> Any:
    """The result of a render that read a secret: marked, and its marked pieces told to the host's
    set of secret strings (`variables.secrets`), when it printed one; marked and told whole when
    it may have printed one unmarked (`may_lose`); else as it is (a secret only compared, say)."""
    sink = getattr(variables, "secrets", None)
    printed = any(holds_secret(piece) for piece in pieces)
    if printed:
        tell(sink, pieces)
    if (printed or may_lose) and type(result) is str:
        result = Secret(result)
    if may_lose and isinstance(result, str):  # a loop may have printed it a character at a time
        tell(sink, [result])
    return result


# Template statements through which a value can be printed without its mark: a loop over a
# secret's characters, a {% filter %} or {% set %} block, a macro's output.
_MAY_LOSE = (nodes.For, nodes.FilterBlock, nodes.AssignBlock, nodes.Macro, nodes.CallBlock)
_LOSING: dict[str, bool] = {}


def may_lose(text: str, env: jinja2.Environment) -> bool:
    """Whether template `text` has a statement through which a value prints without its mark."""
    if text not in _LOSING:
        _LOSING[text] = any(True for _ in env.parse(text).find_all(_MAY_LOSE))
    return _LOSING[text]
