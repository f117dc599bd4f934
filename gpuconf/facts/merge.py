"""Facts that read the same source, merged into one request at gather time.

A host's batch may hold several facts of one source: three tasks that each ask nvidia-smi
for a few GPU fields, four services whose `systemctl show` each task reads. Each such fact
says how it merges (`Merge`, gpuconf/facts/base.py); here a batch becomes its requests,
one per source, and each fact gets its own slice of the one reply, which its parse reads
as if it had run alone. So "each source once per host per run" holds by construction,
whatever the tasks declare; a fact gathered is cached per host for the run (the session).
"""
from __future__ import annotations

from dataclasses import dataclass

from gpuconf.facts.base import Fact, Reply, Request


@dataclass(frozen=True)
class Batch:
    """One request sent and the facts its reply answers."""

    request: Request
    facts: tuple[Fact, ...]


def batches(facts: list[Fact]) -> list[Batch]:
    """The requests for `facts` (unique by key), one per mergeable source, in the order of
    each source's first fact."""
    order: list[str | Fact] = []
    groups: dict[str, list[Fact]] = {}
    for fact in {f.key: f for f in facts}.values():
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
            result.append(Batch(dict(entry.request), (entry,)))
            continue
        group = groups[entry]
        if len(group) == 1:
            result.append(Batch(dict(group[0].request), (group[0],)))
            continue
        parts = tuple(dict.fromkeys(part for fact in group for part in fact.merge.parts))  # type: ignore[union-attr]
        merge = group[0].merge
        assert merge is not None
        result.append(Batch(merge.build([dict(f.request) for f in group], parts), tuple(group)))
    return result


def reply_for(fact: Fact, batch: Batch, reply: Reply) -> Reply:
    """The fact's own reply: the whole reply, or its slice of a merged one."""
    if len(batch.facts) == 1 or fact.merge is None:
        return reply
    if reply.get("lost") or reply.get("skipped") or reply.get("error"):
        return reply
    return fact.merge.part_of(reply, fact.merge.parts)
