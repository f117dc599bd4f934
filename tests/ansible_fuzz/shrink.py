"""Shrink a diverging program: remove what the divergence does not need, greedily, largest part
first (a play, a role, a file, a task, a variable, an argument, a line of a template), keeping a
change only when the two tools still diverge in the same way (the same kinds: exit, messages,
registered, recap, file). Candidates run `jobs` at a time; at most `budget` runs."""
from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.ansible_fuzz.harness import Tools, both, compare, signature
from tests.ansible_fuzz.program import PLAYBOOK, Program, dump
from tests.ansible_fuzz.refusals import judged

KEEP = {"hosts", "ansible_connection", "ansible_python_interpreter", "all", "gather_facts", "name", "role"}
Path_ = tuple[Any, ...]


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def removable(program: Program) -> list[tuple[int, str, Path_]]:
    """(size, file, path) of each part that could go: a whole file, a list element, a dict key, a text line."""
    found: list[tuple[int, str, Path_]] = []
    for name, content in program.files.items():
        if name not in (PLAYBOOK, program.inventory):
            found.append((_size(content), name, ()))
        if isinstance(content, str):
            lines = content.splitlines()
            found += [(len(line) + 1, name, ("line", i)) for i, line in enumerate(lines)]
            continue
        for path, value in _walk(content, ()):
            found.append((_size(value), name, path))
    for i, arg in enumerate(program.args):
        found.append((len(arg) + 100, "", ("arg", i)))
    return sorted(found, key=lambda part: -part[0])


def _holds_kept(value: Any) -> bool:
    """A part that holds the local connection's settings stays (without them Ansible would use SSH)."""
    if isinstance(value, dict):
        return "ansible_connection" in value or any(_holds_kept(v) for v in value.values())
    return isinstance(value, list) and any(_holds_kept(v) for v in value)


def _walk(value: Any, path: Path_) -> Iterator[tuple[Path_, Any]]:
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield path + (i,), item
            yield from _walk(item, path + (i,))
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in KEEP and not _holds_kept(item):
                yield path + (key,), item
            yield from _walk(item, path + (key,))


def without(program: Program, name: str, path: Path_) -> Program | None:
    files = copy.deepcopy(program.files)
    args = list(program.args)
    if name == "" and path[0] == "arg":
        flag = args[path[1]]
        del args[path[1]]
        if flag.startswith("-") and path[1] < len(args) and not args[path[1]].startswith("-"):
            del args[path[1]]  # its value goes with it
    elif not path:
        del files[name]
    elif isinstance(files[name], str):
        lines = files[name].splitlines()
        del lines[path[1]]
        files[name] = "\n".join(lines) + "\n"
    else:
        parent = files[name]
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
    return Program(program.name, files, args, program.refusals)


def shrink(tools_: Tools, program: Program, differences: list[str], work: Path, budget: int = 150,
           jobs: int = 2, wanted: tuple[str, ...] | None = None) -> tuple[Program, list[str]]:
    """`wanted`: the first element of the divergence's signature (harness.signature), which
    every smaller program kept must still show (else a change may swap it for another one)."""
    tried: set[str] = set()
    runs = 0

    def still(candidate: Program, slot: int) -> list[str] | None:
        oracle, ours = both(tools_, candidate, work / f"c{slot}")
        _, found = judged(candidate, oracle, ours, compare(oracle, ours))
        if not found or (wanted is not None and wanted not in signature(oracle, ours)):
            return None
        return found

    improved = True
    while improved and runs < budget:
        improved = False
        candidates = []
        for _, name, path in removable(program):
            candidate = without(program, name, path)
            key = dump(candidate.files) + repr(candidate.args) if candidate else ""
            if candidate is None or key in tried:
                continue
            tried.add(key)
            candidates.append(candidate)
        for start in range(0, len(candidates), jobs):
            batch = candidates[start:start + jobs]
            runs += len(batch)
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                outcomes = list(pool.map(still, batch, range(len(batch))))
            hit = next(((c, o) for c, o in zip(batch, outcomes) if o is not None), None)
            if hit is not None:
                program, differences = hit
                improved = True
                break
            if runs >= budget:
                break
    return program, differences
