"""The one Jinja2 environment, with StrictUndefined and native single expressions.

A value that is exactly one `{{ expression }}` keeps its native type
(`"{{ 8 }}"` is the int 8); anything else renders to a string, a trailing
newline included. Variables are
looked up lazily through `Vars`, so a variable may refer to another one, and
a cycle is reported instead of recursing forever.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jinja2

from gpuconf.errors import Location, TemplateError
from gpuconf.files.yamlsrc import Secret
from gpuconf.templating import secret_marks as marks
from gpuconf.templating.bounds import bound_environment, bound_template
from gpuconf.templating.environment import make_env
from gpuconf.templating.secret_marks import STATE as MARKS
from gpuconf.templating.secret_marks import MarkingEnvironment, mark, tell, touch

# One expression, with spaces around it at most: a line break around it is text, and kept
# (`content: |` with one `{{ x }}` line renders to "value\n", as a file's last line should).
_SINGLE = re.compile(r"^[ \t]*\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}[ \t]*\Z", re.S)


def _truthy(value: Any) -> bool:
    """Python truth, except that the strings of a YAML false are false."""
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false", "no", "off", "0", "n")
    return bool(value)


ENV = make_env()
MARKING = MarkingEnvironment(ENV)  # a render that read a secret runs again here (gpuconf/templating/secret_marks.py)
bound_environment(MARKING)  # under the same bounds,
MARKING.mark_filters(ENV.filters)  # and the marks outside them


def is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _undefined_name(exc: Exception) -> str:
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


def _run(template: jinja2.Template, variables: Mapping[str, Any]) -> jinja2.runtime.Context:
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
_COMPILE_LOCK = threading.Lock()


def _once(key: tuple[str, ...], compile_: Callable[[], Any]) -> Any:
    """Each template is compiled once per run, not once per host. Hosts run in threads that reach
    the same template at the same moment (50 at once with the default forks), and compiling it
    (lexer, parser, optimizer, code generator) costs far more than rendering: the lock makes them
    wait for the one compile. A template that does not compile is not kept: each host gets its error."""
    found = _COMPILED.get(key)
    if found is None:
        with _COMPILE_LOCK:
            found = _COMPILED.get(key)
            if found is None:
                found = _COMPILED[key] = bound_template(compile_())
    return found


def _compiled(kind: str, text: str, env: jinja2.Environment | None = None) -> Any:
    env = env or ENV
    key = (kind, text) if env is ENV else ("marked " + kind, text)
    if kind == "expr":
        return _once(key, lambda: env.compile_expression(text, undefined_to_none=False)._template)
    return _once(key, lambda: env.from_string(text))


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


def _reference(expression: str) -> tuple[str, ...] | None:
    """The dotted name an expression is made of, or None if it is anything more."""
    if expression not in _REFERENCES:
        match = _REFERENCE.match(expression)
        parts = tuple(match.group(1).split(".")) if match else None
        _REFERENCES[expression] = None if parts is None or _KEYWORDS.intersection(parts) else parts
    return _REFERENCES[expression]


def _segments(text: str) -> Segments | None:
    """Literal text and references, alternating, when that is all the template is."""
    if text not in _SEGMENTS:
        pieces: Segments = []
        position, simple = 0, True
        for match in _INTERPOLATION.finditer(text):
            parts = _reference(match.group(1))
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


def _lookup(parts: tuple[str, ...], variables: Mapping[str, Any]) -> Any:
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


def evaluate(expression: str, variables: Mapping[str, Any]) -> Any:
    """Evaluate a bare Jinja2 expression (as in `when:`), natively typed."""
    before = MARKS.reads
    result = _guard(expression, lambda: _evaluate(expression, variables))
    if MARKS.reads == before:
        return result
    marks.secret_seen(variables)
    result = _guard(expression, lambda: _evaluate(expression, variables, MARKING))
    return marks.marked_output(result, [result], False, variables)


def _evaluate(expression: str, variables: Mapping[str, Any], env: jinja2.Environment | None = None) -> Any:
    parts = _reference(expression)
    if parts is not None:
        return _lookup(parts, variables)
    template = _compiled("expr", expression.strip(), env)
    context = _run(template, variables)
    for _ in template.root_render_func(context):
        pass
    result = context.vars["result"]
    if isinstance(result, jinja2.Undefined):
        result._fail_with_undefined_error()
    return result


def render_string(text: str, variables: Mapping[str, Any]) -> Any:
    """Render one string; a lone `{{ expr }}` keeps its native type. A render that read a
    secret is done again, marked (`_render_marked`)."""
    before = MARKS.reads
    single = _SINGLE.match(text)
    if single:
        result = _guard(text, lambda: _evaluate(single.group("expr"), variables))
    else:
        segments = _segments(text)
        if segments is not None:
            result = _guard(text, lambda: "".join(piece if isinstance(piece, str) else
                                                  str(_lookup(piece, variables)) for piece in segments))
        else:
            def full() -> str:
                template = _compiled("template", text)
                return "".join(template.root_render_func(_run(template, variables)))

            result = _guard(text, full)
    if MARKS.reads == before:
        return result
    return _render_marked(text, variables)


def _render_marked(text: str, variables: Mapping[str, Any]) -> Any:
    """`text` rendered in the marking environment (gpuconf/templating/secret_marks.py): the result is
    marked when it printed something made from a secret, and each such piece is told to the
    host's set of secret strings."""
    marks.secret_seen(variables)
    single = _SINGLE.match(text)
    if single:
        result = _guard(text, lambda: _evaluate(single.group("expr"), variables, MARKING))
        return marks.marked_output(result, [result], False, variables)
    template = _compiled("template", text, MARKING)
    with marks.collecting() as pieces:
        result = _guard(text, lambda: "".join(template.root_render_func(_run(template, variables))))
    return marks.marked_output(result, pieces, marks.may_lose(text, ENV), variables)


def undefined_hint(name: str) -> str:
    """A pointer for an Ansible fact name gpuconf does not have."""
    if name.startswith("ansible_"):
        return (" (gpuconf's facts are facts.* (also ansible_facts.*): `gpuconf facts HOST` lists them; "
                "ansible_hostname, ansible_kernel, ansible_distribution and a few more are set too)")
    return ""


def _guard(text: str, func: Any) -> Any:
    try:
        return func()
    except jinja2.UndefinedError as exc:
        name = _undefined_name(exc)
        raise TemplateError(f"undefined variable '{name}'{undefined_hint(name)}" if name else
                            f"template error: {exc}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error in '{text.strip()}': {exc.message}") from None
    except TemplateError:
        raise
    except Exception as exc:  # a filter or test raising on bad data
        raise TemplateError(f"template '{text.strip()}' failed: {type(exc).__name__}: {exc}") from None


def _file_template(text: str, path: str, env: jinja2.Environment | None = None) -> jinja2.Template:
    """A role's template file: compiled once (`_once`), with its path for the errors' lines."""
    env = env or ENV
    template: jinja2.Template = _once(
        ("file" if env is ENV else "marked file", path, text),
        lambda: jinja2.Template.from_code(env, env.compile(text, filename=path), env.make_globals(None)))
    return template


def render_file(text: str, variables: Mapping[str, Any], path: str) -> str:
    """Render a template file (a role's templates/): always a string, its trailing newline kept,
    and an error says the file and line where it happened, not only the task that used it.
    A file that read a secret is rendered again, marked, as `render_string` does."""
    before = MARKS.reads
    result = _render_file(text, variables, path)
    if MARKS.reads == before:
        return result
    marks.secret_seen(variables)
    with marks.collecting() as pieces:
        result = _render_file(text, variables, path, MARKING)
    return marks.marked_output(result, pieces, marks.may_lose(text, ENV), variables)  # type: ignore[no-any-return]


def _render_file(text: str, variables: Mapping[str, Any], path: str, env: jinja2.Environment | None = None) -> str:
    try:
        template = _file_template(text, path, env)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error: {exc.message}", Location(path, exc.lineno)) from None
    try:
        return "".join(template.root_render_func(_run(template, variables)))
    except TemplateError as exc:
        raise TemplateError(exc.message, exc.location or Location(path, _template_line(exc, template, path))) \
            from None
    except jinja2.UndefinedError as exc:
        name = _undefined_name(exc)
        message = f"undefined variable '{name}'{undefined_hint(name)}" if name else f"template error: {exc}"
        raise TemplateError(message, Location(path, _template_line(exc, template, path))) from None
    except Exception as exc:  # a filter or test raising on bad data
        raise TemplateError(f"template failed: {type(exc).__name__}: {exc}",
                            Location(path, _template_line(exc, template, path))) from None


def _template_line(exc: BaseException, template: jinja2.Template, path: str) -> int | None:
    """The template line of the innermost frame of the compiled template in `exc`'s traceback."""
    line = None
    trace = exc.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == path:
            line = template.get_corresponding_lineno(trace.tb_lineno)
        trace = trace.tb_next
    return line


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
        return render_string(value, variables) if is_template(value) else value
    if isinstance(value, dict):
        return {k: render(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, variables) for v in value]
    return value


def _literal_secret(value: Secret, variables: Mapping[str, Any]) -> Any:
    """A `!secret` or vault value met while rendering (in a variable, in a task's params)."""
    touch()
    marks.secret_seen(variables)
    if is_template(value):
        value = mark(render_string(value, variables))
    tell(getattr(variables, "secrets", None), [value])
    return value


def evaluate_when(condition: Any, variables: Mapping[str, Any]) -> bool:
    """`when:` is an expression or a list of expressions that must all hold."""
    conditions = condition if isinstance(condition, list) else [condition]
    for item in conditions:
        if isinstance(item, bool):
            ok = item
        else:
            ok = _truthy(evaluate(_condition(item), variables))
        if not ok:
            return False
    return True


_CONDITIONS: dict[str, str] = {}


def _condition(item: Any) -> str:
    """The expression of a `when:` item (`{{ x }}` or `x`)."""
    text = str(item)
    if text not in _CONDITIONS:
        stripped = text.strip()
        single = _SINGLE.match(stripped)
        _CONDITIONS[text] = single.group("expr") if single else stripped
    return _CONDITIONS[text]
