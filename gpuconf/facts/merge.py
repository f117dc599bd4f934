"""Facts that read the same source, merged into one request at gather time.

A host's batch may hold several facts of one source: three tasks that each ask nvidia-smi
for a few GPU fields, four services whose `systemctl show` each task reads. Each such fact
says how it merges (`Merge`, gpuconf/facts/base.py); here a batch becomes its requests,
one per source, and each fact gets its own slice of the one reply, which its parse reads
as if it had run alone. So "each source once per host per run" holds by construction,
whatever the tasks declare; a fact gathered is cached per host for the run (the session).
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from gpuconf.facts.base import Fact
from gpuconf.facts.wire import Reply, Request


@dataclass(frozen=True)
class Batch:
    """One request sent and the facts its reply answers. The request is a copy, as the
    connection sends it: a JSON object (the session and the connections pass it on unread)."""

    request: Request
    facts: tuple[Fact, ...]


def batches(facts: list[Fact]) -> list[Batch]:
    """The requests for `facts` (unique by key), one per mergeable source, in the order of
    each source's first fact."""
    order: list[str | Fact] = []
    groups: dict[str, list[Fact]] = {}
    for fact in {f.key: f for f in facts}.values():
        if fact.controller is not None:   # read on the controller (a BMC): nothing goes to the host
            continue
        if fact.merge is None:
            order.append(fact)
            continue
        if fact.merge.source not in groups:
            groups[fact.merge.source] = []
            order.append(fact.merge.source)
        groups[fact.merge.source].append(fact)
    result = []
    for entry in order:
        if isinstance(entry, Fact):
            result.append(Batch(copy.copy(entry.request), (entry,)))
            continue
        group = groups[entry]
        if len(group) == 1:
            result.append(Batch(copy.copy(group[0].request), (group[0],)))
            continue
        parts = tuple(dict.fromkeys(part for fact in group for part in fact.merge.parts))  # type: ignore[union-attr]
        merge = group[0].merge
        assert merge is not None
        result.append(Batch(copy.copy(merge.build([f.request for f in group], parts)), tuple(group)))
    return result


def reply_for(fact: Fact, batch: Batch, reply: Mapping[str, object]) -> Reply:
    """The fact's own reply: the whole reply, or its slice of a merged one. The runner's JSON
    line is read as the declared `Reply` (tests/unit/facts/test_wire.py checks that the runner's
    replies are what gpuconf/facts/wire.py declares)."""
    typed = cast(Reply, reply)
    if len(batch.facts) == 1 or fact.merge is None:
        return typed
    if typed.get("lost") or typed.get("skipped") or typed.get("error"):
        return typed
    return fact.merge.part_of(typed, fact.merge.parts)
