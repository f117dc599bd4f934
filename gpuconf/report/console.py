"""Where the human reporter's lines go: plain text for a log or a pipe, rich's Console for a
terminal, and lines folded to the width either one can show.

A line is a list of parts: plain text, or (text, style) for a coloured piece. Text is never
parsed as markup, so a task name with "[bold]" or a backslash in it prints as written.
"""
from __future__ import annotations

import io
import os
import re
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

Part = str | tuple[str, str]
TAB_SIZE = 8  # rich's, so that a line reads the same on a TTY and in a log
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
PLAIN_WIDTH = 200  # a log has no width of its own: its lines fold here (between clauses), to be read without scrolling
FOLD_INDENT = "      "  # a folded line's continuation, deeper than the "    - " of a change
WORD = re.compile(r"\S+\s*|\s+")
CLAUSE = re.compile(r"[^;]*;\s*|[^;]+")


def stop_writing(stream: IO[str]) -> None:
    """Point a stream whose reader closed the pipe at /dev/null, so that no later write or the
    interpreter's final flush fails again (Python's own advice for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):  # not a file descriptor (a StringIO): nothing to redirect
        pass


def printable(text: str) -> str:
    """Text safe for a terminal or a log: control characters (but newline and tab) escaped."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def is_terminal(stream: IO[str]) -> bool:
    """rich's own test (Console.is_terminal): TTY_COMPATIBLE, then FORCE_COLOR, then isatty()."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force = os.environ.get("FORCE_COLOR")
    if force is not None:
        return force != ""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class PlainConsole:
    """Lines for a log, a pipe or cron: the parts' text, tabs expanded, no colour. It prints what
    rich prints there, without importing rich (25-45 ms of a check's start-up)."""

    is_terminal = False

    def __init__(self, file: IO[str]):
        self.file = file

    def print(self, *parts: Part) -> None:
        line = "".join(part if isinstance(part, str) else part[0] for part in parts)
        if "\t" in line:
            line = expand_tabs(line)
        self.file.write(line + "\n")
        self.file.flush()


def expand_tabs(text: str) -> str:
    if text.isascii():
        return text.expandtabs(TAB_SIZE)
    from rich.text import Text  # wide characters: rich counts terminal cells, not characters
    expanded = Text(text)
    expanded.expand_tabs(TAB_SIZE)
    return expanded.plain


def coloured(stream: IO[str]) -> Console:
    """rich's Console, for a terminal: colour, and room for the live progress display."""
    from rich.console import Console

    class Coloured(Console):
        def on_broken_pipe(self) -> None:
            """rich exits the program (status 1) when the reader closes the pipe; the run goes on."""
            self.quiet = True
            raise BrokenPipeError

    # emoji=False: a task name or command output with ":name:" in it is printed as written
    return Coloured(file=stream, highlight=False, soft_wrap=True, emoji=False, markup=False)


def fold(parts: list[Part], width: int, words: bool = True) -> list[list[Part]]:
    """One line as several of at most `width` characters, each continuation indented by FOLD_INDENT;
    each piece keeps its part's style. A line that fits comes back as is. With `words` (a terminal,
    which would wrap a long line itself, but at column 0) it breaks between words, and cuts a word
    wider than a line. Without (a log, which is grepped) it breaks only between clauses (after
    "; "), so that no message is cut in two: a clause wider than a line stays whole."""
    if sum(len(part if isinstance(part, str) else part[0]) for part in parts) <= width:
        return [parts]
    width = max(width, 40)  # a console narrower than this still gets words, not letters
    lines: list[list[Part]] = [[]]
    used = 0
    for part in parts:
        text, style = (part, "") if isinstance(part, str) else part
        for word in (WORD if words else CLAUSE).findall(text):
            if used and used + len(word.rstrip()) > width:
                lines.append([FOLD_INDENT])
                used = len(FOLD_INDENT)
                word = word.lstrip()
            while words and used + len(word.rstrip()) > width:  # one word wider than a line: cut it
                lines[-1].append((word[: width - used], style) if style else word[: width - used])
                word = word[width - used:]
                lines.append([FOLD_INDENT])
                used = len(FOLD_INDENT)
            if word:
                lines[-1].append((word, style) if style else word)
                used += len(word)
    return [_trimmed(line) for line in lines]


def _trimmed(line: list[Part]) -> list[Part]:
    """The line without the spaces it ended on before the break."""
    while line:
        last = line[-1]
        text, style = (last, "") if isinstance(last, str) else last
        if text.rstrip():
            line[-1] = (text.rstrip(), style) if style else text.rstrip()
            break
        line.pop()
    return line
