"""Readable messages for bad input: 'did you mean' hints for misspelled names, and the first
error of a pydantic validation said plainly."""
from __future__ import annotations

import difflib
from collections.abc import Iterable

from pydantic import ValidationError


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """Return ` (did you mean 'x'?)` for the closest candidate, or ''."""
    matches = difflib.get_close_matches(str(word), sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean '{matches[0]}'?)" if matches else ""


def validation_message(exc: ValidationError, allowed: tuple[str, ...] | list[str] = ()) -> tuple[tuple, str]:
    """The first pydantic error as (path, readable message)."""
    error = exc.errors()[0]
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        key = loc[-1]
        return loc, f"unknown key '{key}'{did_you_mean(str(key), allowed)}"
    if error["type"] == "missing":
        return loc, f"missing required key '{loc[-1]}'"
    where = ".".join(str(p) for p in loc)
    value = error.get("input")
    shown = f" (got {value!r})" if value is not None and not isinstance(value, (dict, list)) else ""
    return loc, f"'{where}': {error['msg']}{shown}" if where else error["msg"]
