"""Template files (a role's or a playbook's templates/): rendered to a string, an error naming
the file and line; a `#jinja2:` first line applied and left out; `{% include %}` and
`{% import %}` find other templates beside it and on the task's search path."""
from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from gpuconf.errors import Location, TemplateError
from gpuconf.templating import secret_marks as marks
from gpuconf.templating.ansible_lexer import split_header
from gpuconf.templating.bounds import bound_parse
from gpuconf.templating.compiled import ENV, MARKING, compile_once, run_template
from gpuconf.templating.render import undefined_hint, undefined_name, with_newlines, without_last_newline
from gpuconf.templating.secret_marks import STATE as MARKS

_FILE_ENVS: dict[tuple[Any, ...], jinja2.Environment] = {}
_FILE_ENVS_LOCK = threading.Lock()  # taken inside compile_once's lock: its own


def _file_env(base: jinja2.Environment, settings: dict[str, Any], search: tuple[str, ...]) -> jinja2.Environment:
    """`base` with a file's `#jinja2:` settings and a loader over its search path (one per both:
    the templates it loads are cached there)."""
    if not settings and not search:
        return base
    key = (id(base), tuple(sorted(settings.items())), search)
    env = _FILE_ENVS.get(key)
    if env is None:
        with _FILE_ENVS_LOCK:
            env = _FILE_ENVS.get(key)
            if env is None:
                # Ansible's templar drops the last newline of a template Jinja loads (an include);
                # render_file adds back what the file itself ends with
                env = base.overlay(loader=jinja2.FileSystemLoader(list(search)), keep_trailing_newline=False,
                                   **settings)
                bound_parse(env)
                _FILE_ENVS[key] = env
    return env


def _file_template(text: str, path: str, base: jinja2.Environment, search: tuple[str, ...],
                   given: tuple[tuple[str, Any], ...] = ()) -> jinja2.Template:
    """Compiled once (compiled.compile_once), with its path for the errors' lines; `given`: the
    template task's own Jinja settings (variable_start_string, ...), which the file's header overrides."""
    def compile_() -> jinja2.Template:
        try:
            header, body = split_header(text)
        except ValueError as exc:
            raise jinja2.TemplateSyntaxError(str(exc), 1, path, path) from None
        settings = {**dict(given), **header}
        loads = any(word in body for word in ("{% include", "{% import", "{% from", "{% extends", "{%- include",
                                               "{%- import", "{%- from", "{%- extends"))
        env = _file_env(base, settings, search if loads else ())
        body = without_last_newline(body)  # as Ansible's templar: render_file adds back what the file ends with
        return jinja2.Template.from_code(env, env.compile(body, filename=path), env.make_globals(None))
    key = ("file" if base is ENV else "marked file", path, text, *search, repr(given))
    template: jinja2.Template = compile_once(key, compile_)
    return template


def render_file(text: str, variables: Mapping[str, Any], path: str, search: list[Any] | None = None,
                settings: Mapping[str, Any] | None = None) -> str:
    """Render a template file: always a string, its trailing newline kept. `search`: where
    `{% include %}` and `{% import %}` look after the file's own folder; `settings`: Jinja's
    settings the template task gives (variable_start_string, trim_blocks, ...). A file that read a
    secret is rendered again, marked, as render_string does."""
    folders = tuple(dict.fromkeys([str(Path(path).parent), *(str(p) for p in search or [])]))
    given = tuple(sorted((settings or {}).items()))
    before = MARKS.reads
    result = _render_file(text, variables, path, ENV, folders, given)
    if MARKS.reads == before:
        return result
    marks.secret_seen(variables)
    with marks.collecting() as pieces:
        result = _render_file(text, variables, path, MARKING, folders, given)
    return marks.marked_output(result, pieces, marks.may_lose(text, ENV), variables)  # type: ignore[no-any-return]


def _render_file(text: str, variables: Mapping[str, Any], path: str, env: jinja2.Environment,
                 search: tuple[str, ...], given: tuple[tuple[str, Any], ...] = ()) -> str:
    try:
        template = _file_template(text, path, env, search, given)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error: {exc.message}", Location(exc.filename or path, exc.lineno)) \
            from None
    try:
        rendered = "".join(template.root_render_func(run_template(template, variables)))
        # a file that renders to nothing stays empty: ansible-core's templar gives back no string to
        # end with the template's line breaks (a `{% if %}` that is false, the whole file)
        return str(with_newlines(text, rendered)) if rendered else ""
    except TemplateError as exc:
        raise TemplateError(exc.message, exc.location or Location(path, _template_line(exc, template, path))) \
            from None
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"template '{exc.name}' not found (looked in {', '.join(search)})",
                            Location(path, _template_line(exc, template, path))) from None
    except jinja2.TemplateSyntaxError as exc:  # an included template's
        raise TemplateError(f"template syntax error: {exc.message}", Location(exc.filename or path, exc.lineno)) \
            from None
    except jinja2.UndefinedError as exc:
        name = undefined_name(exc)
        message = f"'{name}' is undefined{undefined_hint(name)}" if name else f"template error: {exc}"
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

