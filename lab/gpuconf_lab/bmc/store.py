"""A lab BMC's state on the machine: `labs/<lab>/bmc/nodes/<node>.json` (its firmware versions,
the images staged for the next power cycle, its Tasks, its faults), read and written whole under
an flock by the BMC service and by `gpuconf lab fault|reset`; and `<node>.requests.jsonl`, one
line per request the BMC answered (method, path, status; never a header), which tests read to
tell what was sent."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuconf_lab.bmc.models import Model


def fresh_state(model: Model, profile: str) -> dict[str, Any]:
    """A BMC as a fresh node has it: the profile's firmware, nothing staged, no Task, no fault."""
    return {"model": model.name, "profile": profile, "versions": model.fresh_versions(profile), "staged": {},
            "pending": {}, "offline_until": 0.0, "tasks": {}, "next_task": 1, "faults": {}, "power_cycles": 0}


class NodeStore:
    def __init__(self, directory: Path, node: str):
        self.path = directory / f"{node}.json"
        self.requests = directory / f"{node}.requests.jsonl"
        self._lock = directory / f"{node}.lock"

    @contextlib.contextmanager
    def locked(self) -> Iterator[dict[str, Any]]:
        """The state, to read and change; written back whole (atomically) when the block ends."""
        with open(self._lock, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = json.loads(self.path.read_text())
            before = json.dumps(state, sort_keys=True)
            yield state
            if json.dumps(state, sort_keys=True) != before:
                self.write(state)

    def write(self, state: dict[str, Any]) -> None:
        part = self.path.with_name(f".{self.path.name}.part")
        part.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")
        os.replace(part, self.path)

    def read(self) -> dict[str, Any]:
        with self.locked() as state:
            return json.loads(json.dumps(state))

    def log(self, method: str, path: str, status: int | str) -> None:
        with open(self.requests, "a") as handle:
            handle.write(json.dumps({"at": round(time.time(), 3), "method": method, "path": path,
                                     "status": status}) + "\n")

    def logged(self) -> list[dict[str, Any]]:
        try:
            return [json.loads(line) for line in self.requests.read_text().splitlines() if line.strip()]
        except FileNotFoundError:
            return []
