"""JSON files merged, never overwritten: the user's other keys stay."""
from __future__ import annotations

import json
from collections.abc import Mapping

from gpuconf.facts.base import Fact, file_state
from gpuconf.files.values import JSONValue
from gpuconf.tasks.base import Change, Facts, Refused, TaskType, Verdict, drift, in_sync, write_file
from gpuconf.tasks.files import _Owned, unified_diff
from gpuconf.tasks.modes import resolved


def deep_merge(base: Mapping[str, object], overlay: Mapping[str, object]) -> dict[str, object]:
    """Mappings merge key by key; anything else in `overlay` replaces."""
    merged = dict(base)
    for key, value in overlay.items():
        old = base.get(key)
        merged[key] = deep_merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return merged


class JsonMergeParams(_Owned):
    merge: dict[str, object]  # any JSON value under each key
    indent: int = 4
    backup: bool = False


class JsonMerge(TaskType[JsonMergeParams]):
    """Merge keys into a JSON file (e.g. /etc/docker/daemon.json), keeping
    every other key as it is. A file that is not valid JSON is refused, never
    overwritten."""

    name = "json_merge"
    Params = JsonMergeParams

    def reads(self, params: JsonMergeParams) -> list[Fact]:
        return [file_state(params.path)]

    def check(self, params: JsonMergeParams, facts: Facts) -> Verdict:
        state = facts[file_state(params.path)]
        before_text = state.text if state.exists else ""
        current: dict[str, object] = {}
        if state.exists and (before_text or "").strip():
            try:
                loaded: JSONValue = json.loads(before_text or "")
            except json.JSONDecodeError as exc:
                raise Refused(f"{params.path} is not valid JSON ({exc.msg} at line {exc.lineno}); "
                              "refusing to overwrite it") from None
            if not isinstance(loaded, dict):
                raise Refused(f"{params.path} holds a JSON {type(loaded).__name__}, not an object")
            current = loaded
        merged = deep_merge(current, params.merge)
        if merged == current and state.exists:
            return in_sync(f"{params.path} has the wanted keys")
        after = json.dumps(merged, indent=params.indent) + "\n"
        keys = ", ".join(k for k in params.merge if current.get(k) != merged.get(k))
        return drift(Change(f"merge {keys} into {params.path}",
                            [write_file(params.path, after, resolved(params.mode, state.mode if state.exists else None,
                                                                     False) if params.mode is not None else
                                        (None if state.exists else 0o644), params.owner, params.group,
                                        params.backup)],
                            diff=unified_diff(params.path, before_text or "", after)))
