"""The corpus of generated programs that once diverged, shrunk: tests/ansible_fuzz/corpus/*.yml,
each with what ansible-core 2.19.14 did (its observation) and the issue class it belongs to.
`make test` replays each through gpuconf (test_corpus.py); found/ holds what a fuzz run stored,
not replayed until it is moved to corpus/.

A case: name, class (issue 38's class), note, expect (`same`, or `diverges`: a divergence still
open in another helper's class, replayed as a strict xfail), program (args, files), oracle."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.ansible_fuzz.program import Program, dump, load

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
FOUND = HERE / "found"


def save_case(folder: Path, program: Program, differences: list[str], seed: str, oracle: dict[str, Any] | None = None,
              **fields: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{seed}-{program.name}.yml"
    data = {"name": path.stem, **fields, "seed": seed, "differences": differences,
            "program": {"args": program.args, "refusals": program.refusals, "files": program.files}}
    if oracle is not None:
        data["oracle"] = {k: v for k, v in oracle.items() if k != "output"}
    path.write_text(dump(data))
    return path


def load_case(path: Path) -> dict[str, Any]:
    data = load(path.read_text())
    data["program"] = Program(data["name"], data["program"]["files"], data["program"].get("args") or [],
                              data["program"].get("refusals") or [])
    return data


def cases() -> list[Path]:
    return sorted(CORPUS.glob("*.yml"))
