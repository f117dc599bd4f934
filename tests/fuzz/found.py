"""The stored fuzz corpus: every input that ever made gpuconf fail (a traceback, an internal
error, an exit code outside the documented set), one JSON file per input in tests/fuzz/found/.
`make fuzz` adds to it; the suite replays all of it on every run.

A file holds the files that differ from the seed project (base64, so any bytes survive),
the CLI's --limit and -e, what was found, and when. Its name is a digest of the input, so
the same input is stored once."""
from __future__ import annotations

import base64
import hashlib
import json
import time
from pathlib import Path

from tests.fuzz.corpus import SEED, Case

FOUND = Path(__file__).resolve().parent / "found"


def case_key(case: Case) -> str:
    data = json.dumps([sorted((p, base64.b64encode(d).decode()) for p, d in case.files.items()),
                       case.limit, case.extra], sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def store(case: Case, found: str, detail: str, seed: int | None) -> Path:
    """Keep `case` in the corpus (once), with what it found."""
    changed = {path: base64.b64encode(data).decode() for path, data in case.files.items()
               if data != SEED.get(path, "").encode()}
    path = FOUND / f"{case_key(case)}.json"
    if not path.exists():
        FOUND.mkdir(exist_ok=True)
        entry = {"found": found, "first_seen": time.strftime("%Y-%m-%d"), "seed": seed, "limit": case.limit,
                 "extra": case.extra, "mutations": case.mutations, "files_b64": changed,
                 "detail": detail[-2000:]}
        path.write_text(json.dumps(entry, indent=1, sort_keys=True) + "\n")
    return path


def load_all() -> list[tuple[str, Case]]:
    entries = []
    for path in sorted(FOUND.glob("*.json")):
        entry = json.loads(path.read_text())
        files = {p: t.encode() for p, t in SEED.items()}
        files.update({p: base64.b64decode(d) for p, d in entry["files_b64"].items()})
        entries.append((path.stem, Case(files, entry.get("limit"), list(entry.get("extra", [])),
                                        list(entry.get("mutations", [])))))
    return entries
