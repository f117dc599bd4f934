"""gpuconf's documented refusals (docs/ansible.md, "Refused, with what to use instead") as the fuzz
run judges them: a program that ansible-core runs and gpuconf refuses at load is no divergence
when gpuconf's message names a refusal of this table; any other refusal is one."""
from __future__ import annotations

import re
from typing import Any

from tests.ansible_fuzz.program import Program

# (what gpuconf's error says, the row of docs/ansible.md)
DOCUMENTED = [
    (r"--(skip-)?tags \S+ selects no task", "Supported differently: --tags that select no task are refused"),
    (r"no host of \S+ is in the plays' hosts", "Supported differently: a run whose plays match no host is refused"),
]


def refusal_of(output: str) -> str | None:
    for pattern, row in DOCUMENTED:
        if re.search(pattern, output):
            return row
    return None


def judged(program: Program, oracle: dict[str, Any], ours: dict[str, Any],
           differences: list[str]) -> tuple[str, list[str]]:
    """(verdict, the differences that count): `same`, `refused as documented`, or `divergent`."""
    if not differences:
        return ("same" if oracle["exit"] != "error" else "both refuse"), []
    if ours["exit"] == "error" and oracle["exit"] != "error" and refusal_of(ours.get("output", "")):
        return "refused as documented", []
    return "divergent", differences
