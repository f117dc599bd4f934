"""What Ansible's templar does to a template before and around Jinja, kept in one place:

- backslashes in the string constants of a `{{ }}` are literal in a template written in YAML
  (ansible-core's `escape_backslashes`: `regex_replace('(a)', '\\1')` means a back-reference,
  not the control character \\1); conditionals and template files are not escaped;
- `None` prints as nothing in text (`[{{ none }}]` is `[]`), and a list or a mapping made with an
  undefined value inside is an error where it is printed (`{{ {'k': nope} }} end`), as 2.19's
  lazy containers fail where their marker is read, never the text 'Undefined';
- a template file may start with a `#jinja2: trim_blocks: False, lstrip_blocks: True` line:
  those settings apply to it, and the line is not written.
"""
from __future__ import annotations

import ast
import threading
from collections.abc import Iterator
from typing import Any

import jinja2
from jinja2.lexer import TOKEN_STRING, TOKEN_VARIABLE_BEGIN, TOKEN_VARIABLE_END, Lexer

HEADER = "#jinja2:"
OVERRIDABLE = ("trim_blocks", "lstrip_blocks", "keep_trailing_newline", "newline_sequence", "variable_start_string",
               "variable_end_string", "block_start_string", "block_end_string", "comment_start_string",
               "comment_end_string")


class _Compiling(threading.local):
    def __init__(self) -> None:
        self.escape = ""  # "template", "expression" (a lone `{{ }}`'s inside), or "": no escaping


COMPILING = _Compiling()  # set while a template written in YAML compiles (render.py)


class EscapingLexer(Lexer):
    """Doubles the backslashes of each string constant inside `{{ }}` while COMPILING.escape is set
    (an expression compiled alone is all inside)."""

    def tokeniter(self, *args: Any, **kwargs: Any) -> Iterator[tuple[int, str, str]]:
        tokens = super().tokeniter(*args, **kwargs)
        if not COMPILING.escape:
            yield from tokens
            return
        inside = COMPILING.escape == "expression"
        for token in tokens:
            kind = token[1]
            if kind == TOKEN_VARIABLE_BEGIN:
                inside = True
            elif kind == TOKEN_VARIABLE_END:
                inside = False
            elif inside and kind == TOKEN_STRING:
                token = (token[0], kind, token[2].replace("\\", "\\\\"))
            yield token


_LEXERS: dict[tuple[Any, ...], EscapingLexer] = {}


def escaping_lexer(env: jinja2.Environment) -> EscapingLexer:
    """The lexer of `env`'s settings (one per settings, as Jinja keeps them)."""
    key = (env.block_start_string, env.block_end_string, env.variable_start_string, env.variable_end_string,
           env.comment_start_string, env.comment_end_string, env.line_statement_prefix, env.line_comment_prefix,
           env.trim_blocks, env.lstrip_blocks, env.newline_sequence, env.keep_trailing_newline)
    found = _LEXERS.get(key)
    if found is None:
        found = _LEXERS[key] = EscapingLexer(env)
    return found


def printed(value: Any) -> Any:
    """finalize: what `{{ x }}` prints in text; None prints nothing, as in Ansible."""
    defined_throughout(value)
    return "" if value is None else value


def defined_throughout(value: Any) -> None:
    """A value made of an undefined one (`map(attribute=...)` of a missing key, `{'k': nope}`) is
    an error, as in Ansible, never the text 'Undefined'."""
    kind = type(value)
    if kind is list or kind is tuple:
        items: Any = value
    elif kind is dict:
        items = value.values()
    else:
        return
    for item in items:
        if isinstance(item, jinja2.Undefined):
            item._fail_with_undefined_error()
        if type(item) in (list, tuple, dict):
            defined_throughout(item)


def split_header(text: str) -> tuple[dict[str, Any], str]:
    """A template file's `#jinja2:` settings and the text after that line (or {} and the text)."""
    if not text.startswith(HEADER):
        return {}, text
    end = text.find("\n")
    line, rest = (text[len(HEADER):], "") if end < 0 else (text[len(HEADER):end], text[end + 1:])
    settings: dict[str, Any] = {}
    for pair in line.split(","):
        if not pair.strip():
            continue
        key, _, value = pair.partition(":")
        key = key.strip()
        if key not in OVERRIDABLE:
            raise ValueError(f"#jinja2: '{key}' cannot be set here (only {', '.join(OVERRIDABLE)})")
        try:
            settings[key] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"#jinja2: {key}: '{value.strip()}' is no Python literal (True, False, a string)") \
                from None
    return settings, rest
