"""The one Jinja2 environment, with StrictUndefined and native single expressions.

A value that is exactly one `{{ expression }}` keeps its native type
(`"{{ 8 }}"` is the int 8); anything else renders to a string, a trailing
newline included. Variables are
looked up lazily through `Vars`, so a variable may refer to another one, and
a cycle is reported instead of recursing forever.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import jinja2

from gpuconf.errors import TemplateError, UndefinedAttribute, UndefinedVariable
from gpuconf.files.yamlsrc import Secret, Unsafe
from gpuconf.templating import secret_marks as marks
from gpuconf.templating.ansible_lexer import defined_throughout
from gpuconf.templating.compiled import ENV, MARKING, compiled, lookup_reference, reference, run_template, segments
from gpuconf.templating.environment import ErrorMarker, MissingAttribute
from gpuconf.templating.secret_marks import STATE as MARKS
from gpuconf.templating.secret_marks import mark, tell, touch

# One expression and nothing else keeps its type, as in ansible-core 2.19: any text around it, a
# space or a line break, makes a string (`" {{ [1, 2] }}"` is " [1, 2]"; `content: |` with one
# `{{ x }}` line renders to "value\n", as a file's last line should).
SINGLE = re.compile(r"^\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}\Z", re.S)


_LONE: dict[str, str | None] = {}


def lone_expression(body: str) -> str | None:
    """The expression of a text that is one `{{ expression }}` and nothing else, or None. Jinja's
    lexer decides where the regex cannot: `{{ {'a': {'b': 1}} }}` is one, as Ansible parses it,
    though a `}}` is inside."""
    single = SINGLE.match(body)
    if single:
        return single.group("expr")
    if not (body.startswith("{{") and body.endswith("}}")) or body.startswith(("{{-", "{{+")) or \
            body.endswith(("-}}", "+}}")):
        return None
    if body not in _LONE:
        try:
            kinds = [kind for _, kind, _ in ENV.lexer.tokeniter(body, None)]
        except jinja2.TemplateSyntaxError:
            kinds = []
        lone = kinds.count("variable_begin") == 1 and kinds.count("variable_end") == 1 and \
            kinds[-1] == "variable_end" and not {"data", "block_begin", "comment_begin"} & set(kinds)
        _LONE[body] = body[2:-2] if lone else None
    return _LONE[body]


def is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value) and not isinstance(value, Unsafe)


def undefined_name(exc: Exception) -> str:
    match = re.search(r"'([^']+)' is undefined", str(exc))
    return match.group(1) if match else ""


class Verbatim(Mapping[str, Any]):
    """A layer of data that is never rendered: facts and registered results come
    from the host, and a `{{` in a command's output is text, not a template."""

    def __init__(self, data: Mapping[str, Any]):
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


MISSING = object()  # what `Vars.lookup_raw` finds for a name that no layer has


class Omit(str):
    """Ansible's `omit`: a parameter (or list item) whose value renders to it is left out."""


OMIT = Omit("__omit_place_holder__gpuconf")


class Vars(Mapping[str, Any]):
    """Layered variables, highest precedence first, rendered on first lookup
    (except `Verbatim` layers)."""

    def __init__(self, *layers: Mapping[str, Any], secrets: Any = None):
        self.layers = [layer for layer in layers if layer]
        self._rendered: dict[str, Any] = {}
        self._active: list[str] = []
        # When set (by gpuconf.engine.plancache), every lookup is recorded here:
        # name -> (the raw value found or MISSING, whether its layer is verbatim).
        self.reads: dict[str, tuple[Any, bool]] | None = None
        self.secrets = secrets  # the host's set of secret strings (engine/secrets.py), told what renders make
        self._secret_keys: set[str] = set()  # rendered variables that are, hold or were made from a secret
        self._names: frozenset[str] | None = None

    def secret_names(self) -> frozenset[str]:
        """The variables `secret_vars` lists, at any level."""
        if self._names is None:
            self._names = marks.listed_names([layer for layer in self.layers if layer.__class__ is not Verbatim])
        return self._names

    def lookup_raw(self, key: str) -> tuple[Any, bool]:
        """The raw value `key` resolves to and whether it is verbatim; (MISSING, False) if none."""
        if key == marks.SECRET_NAMES:
            return self.secret_names(), False
        for layer in self.layers:
            if key in layer:
                return layer[key], isinstance(layer, Verbatim)
        return MISSING, False

    def _find(self, key: str) -> tuple[Mapping[str, Any], Any]:
        for layer in self.layers:
            if key in layer:
                if self.reads is not None:
                    self.reads[key] = (layer[key], isinstance(layer, Verbatim))
                return layer, layer[key]
        if self.reads is not None:
            self.reads[key] = (MISSING, False)
        raise KeyError(key)

    def raw(self, key: str) -> Any:
        return self._find(key)[1]

    def __getitem__(self, key: str) -> Any:
        if key in self._rendered:
            if key in self._secret_keys:
                touch()
            return self._rendered[key]
        layer, value = self._find(key)
        if isinstance(layer, Verbatim):
            if isinstance(value, Secret):  # a loop's item from a secret list, say
                touch()
            return value
        if key in self._active:
            raise TemplateError(f"variable '{key}' refers to itself: {' -> '.join(self._active + [key])}")
        names = self._names if self._names is not None else self.secret_names()
        if self.reads is not None:
            self.reads[marks.SECRET_NAMES] = (names, False)
        before = MARKS.reads
        self._active.append(key)
        try:
            value = render(value, self)
        except UndefinedVariable as exc:   # as in ansible-core 2.19: undefined where it is used, not here
            value = ENV.undefined(name=exc.name)   # (`x is undefined`, `x | default(...)`; a use names exc.name)
        except TemplateError as exc:   # any other error (it refers to itself, a filter raised), as 2.19's
            value = ErrorMarker(exc)   # captured-exception marker: raised where it is used, `is defined` too
        finally:
            self._active.pop()
        if MARKS.reads != before or key in names:
            value = self._secret(key, value, key in names)
        self._rendered[key] = value
        return value

    def _secret(self, key: str, value: Any, listed: bool) -> Any:
        """A variable that is, holds or was made from a secret: each later lookup reads a secret."""
        if listed:  # named in secret_vars: its value is marked here, its numbers hidden as text
            value = mark(value)
            tell(self.secrets, [value])
        self._secret_keys.add(key)
        touch()
        return value

    def __contains__(self, key: object) -> bool:
        if self.reads is not None:
            found = self.lookup_raw(key)  # type: ignore[arg-type]
            self.reads[key] = found  # type: ignore[index]
            return found[0] is not MISSING
        for layer in self.layers:
            if key in layer:
                return True
        return False

    def __iter__(self) -> Iterator[str]:
        if self.reads is not None:  # depends on every name: a read that no other lookup can match
            self.reads["\0every name"] = (object(), False)
        seen: set[str] = set()
        for layer in self.layers:
            for key in layer:
                if key not in seen:
                    seen.add(key)
                    yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def child(self, *layers: Mapping[str, Any]) -> Vars:
        """A new Vars with extra layers above this one's."""
        return Vars(*layers, *self.layers, secrets=self.secrets)


def evaluate(expression: str, variables: Mapping[str, Any]) -> Any:
    """Evaluate a bare Jinja2 expression (as in `when:`), natively typed."""
    before = MARKS.reads
    result = _guard(expression, lambda: _evaluate(expression, variables))
    if MARKS.reads == before:
        return result
    marks.secret_seen(variables)
    result = _guard(expression, lambda: _evaluate(expression, variables, MARKING))
    return marks.marked_output(result, [result], False, variables)


def _evaluate(expression: str, variables: Mapping[str, Any], env: jinja2.Environment | None = None,
              escape: bool = False) -> Any:
    parts = reference(expression)
    if parts is not None:
        return lookup_reference(parts, variables)
    template = compiled("expr", expression.strip(), env, escape)
    context = run_template(template, variables)
    for _ in template.root_render_func(context):
        pass
    result = context.vars["result"]
    if isinstance(result, jinja2.Undefined):
        result._fail_with_undefined_error()
    defined_throughout(result)
    return result


def render_string(text: str, variables: Mapping[str, Any]) -> Any:
    """Render one string as Ansible's templar does: its last line break is set aside (Jinja's
    keep_trailing_newline off), a lone `{{ expr }}` then keeps its native type, and a string
    result gets back the line breaks the text ended with (`"{{ n }}\n"` is the int n; `"x {{ n }}\n"`
    is "x 8\n"). A render that read a secret is done again, marked (`_render_marked`)."""
    before = MARKS.reads
    body = without_last_newline(text)
    single = lone_expression(body)
    if single is not None:
        result = _guard(text, lambda: _evaluate(single, variables, escape=True))
    else:
        pieces = segments(body)
        if pieces is not None:
            result = _guard(text, lambda: "".join(piece if isinstance(piece, str) else
                                                  _text(lookup_reference(piece, variables)) for piece in pieces))
        else:
            def full() -> str:
                template = compiled("template", body, escape=True)
                return "".join(template.root_render_func(run_template(template, variables)))

            result = _guard(text, full)
    if MARKS.reads == before:
        return with_newlines(text, result)
    return _render_marked(text, body, variables)


def without_last_newline(text: str) -> str:
    for ending in ("\r\n", "\n", "\r"):
        if text.endswith(ending):
            return text[:-len(ending)]
    return text


def _newlines(text: str) -> int:
    return len(text) - len(text.rstrip("\r\n"))


def with_newlines(text: str, result: Any) -> Any:
    """A string result ends with as many line breaks as its template did (Ansible's templar)."""
    if isinstance(result, str) and text.endswith(("\n", "\r")):
        missing = _newlines(text) - _newlines(result)
        if missing > 0:
            return result + "\n" * missing
    return result


def _render_marked(text: str, body: str, variables: Mapping[str, Any]) -> Any:
    """`text` rendered in the marking environment (gpuconf/templating/secret_marks.py): the result is
    marked when it printed something made from a secret, and each such piece is told to the
    host's set of secret strings."""
    marks.secret_seen(variables)
    single = lone_expression(body)
    if single is not None:
        result = _guard(text, lambda: _evaluate(single, variables, MARKING, escape=True))
        return marks.marked_output(with_newlines(text, result), [result], False, variables)
    template = compiled("template", body, MARKING, escape=True)
    with marks.collecting() as pieces:
        result = _guard(text, lambda: "".join(template.root_render_func(run_template(template, variables))))
    return marks.marked_output(with_newlines(text, result), pieces, marks.may_lose(text, ENV), variables)


def _text(value: Any) -> str:
    """A value printed in text: None prints nothing (Ansible's templar)."""
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()
    defined_throughout(value)
    return "" if value is None else str(value)


def undefined_hint(name: str) -> str:
    """A pointer for an Ansible fact name gpuconf does not have."""
    if name.startswith("ansible_"):
        return (" (gpuconf's facts are facts.* (also ansible_facts.*): `gpuconf facts HOST` lists them; "
                "ansible_hostname, ansible_kernel, ansible_distribution and a few more are set too)")
    return ""


def _guard(text: str, func: Any) -> Any:
    try:
        return func()
    except MissingAttribute as exc:
        raise UndefinedAttribute(str(exc), f"template error: {exc}") from None
    except jinja2.UndefinedError as exc:
        name = undefined_name(exc)
        if name:
            raise UndefinedVariable(name, f"'{name}' is undefined{undefined_hint(name)}") from None
        raise TemplateError(f"template error: {exc}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error in '{text.strip()}': {exc.message}") from None
    except TemplateError:
        raise
    except Exception as exc:  # a filter or test raising on bad data
        raise TemplateError(f"template '{text.strip()}' failed: {type(exc).__name__}: {exc}") from None


def render(value: Any, variables: Mapping[str, Any]) -> Any:
    """Render strings inside any structure of dicts and lists."""
    kind = type(value)  # exact types first: this runs for every value of every task on every host
    if kind is str:
        return render_string(value, variables) if "{{" in value or "{%" in value else value
    if kind is int or kind is bool or kind is float or value is None:
        return value
    if isinstance(value, str):
        if isinstance(value, Secret):
            return _literal_secret(value, variables)
        if isinstance(value, Unsafe):  # `!unsafe`: text, never a template
            return value
        return render_string(value, variables) if is_template(value) else value
    if isinstance(value, dict):  # a value that is `omit` (`x | default(omit)`) leaves no key, as in Ansible
        return {k: rendered for k, v in value.items() if (rendered := render(v, variables)) is not OMIT}
    if isinstance(value, list):
        return [rendered for v in value if (rendered := render(v, variables)) is not OMIT]
    return value


def _literal_secret(value: Secret, variables: Mapping[str, Any]) -> Any:
    """A `!secret` or vault value met while rendering (in a variable, in a task's params)."""
    touch()
    marks.secret_seen(variables)
    if is_template(value):
        value = mark(render_string(value, variables))
    tell(getattr(variables, "secrets", None), [value])
    return value
