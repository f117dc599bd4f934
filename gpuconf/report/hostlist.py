"""Host lists in the form people read at fleet size: `a100-[001-097,099]`.

Slurm and pdsh write node sets this way. Names that end in a number and share
the text before it (and, for zero-padded numbers, the width) fold into one
bracket of ranges; any other name is listed as it is.
"""
from __future__ import annotations

import re

NUMBERED = re.compile(r"^(.*?)(\d+)$")


def _ranges(numbers: list[int], width: int) -> str:
    parts, start, previous = [], numbers[0], numbers[0]
    for number in numbers[1:] + [None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        parts.append(f"{start:0{width}d}" if start == previous else f"{start:0{width}d}-{previous:0{width}d}")
        if number is not None:
            start = previous = number
    return ",".join(parts)


def compress(hosts: list[str]) -> str:
    """`["a100-001", "a100-002", "a100-004", "login"]` -> `a100-[001-002,004],login`.
    Groups keep the order in which their first host came."""
    padded: dict[str, int] = {}  # prefix -> the width of its zero-padded numbers
    for host in hosts:
        match = NUMBERED.match(host)
        if match and match.group(2).startswith("0") and len(match.group(2)) > 1:
            padded[match.group(1)] = max(padded.get(match.group(1), 0), len(match.group(2)))
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    for host in hosts:
        match = NUMBERED.match(host)
        width = 0
        if match:
            digits = match.group(2)
            width = len(digits) if padded.get(match.group(1)) == len(digits) else 0
            if not width and digits.startswith("0") and len(digits) > 1:
                match = None  # an odd width among padded names: listed as it is
        if not match:
            order.append(host)
            continue
        key = (match.group(1), width)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(match.group(2)))
    out = []
    for item in order:
        if isinstance(item, str):
            out.append(item)
            continue
        prefix, width = item
        numbers = sorted(set(groups[item]))
        if len(numbers) == 1:
            out.append(f"{prefix}{numbers[0]:0{width}d}")
        else:
            out.append(f"{prefix}[{_ranges(numbers, width)}]")
    return ",".join(out)
