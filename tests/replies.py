"""Runner replies into what check() reads: shared by the task and health probe table tests."""
from __future__ import annotations

from typing import Any

from gpuconf.facts.base import FactUnavailable


def parsed_replies(reads: list, replies: dict) -> dict[str, Any]:
    """The parsed values of `reads` from runner replies keyed like the engine's cache: a
    reply the parser finds unreadable is stored as FactUnavailable, as the engine stores it."""
    values: dict[str, Any] = {}
    for fact in reads:
        if fact.key in replies:
            try:
                values[fact.key] = fact.parse(replies[fact.key])
            except FactUnavailable as exc:
                values[fact.key] = exc
    return values
