"""A fact is one read-only request to a host plus a pure parse of its answer.

Requests are either a shell command (`sh`) or a native read done by the
remote runner (`stat`). Facts are gathered in batches, one round trip for
many facts, and cached per host until a change invalidates them.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Output:
    """What a command printed; `timed_out` means it was killed at its timeout, `timeout`
    (seconds) is the limit it ran under, which a task's `timeout:` keyword may have lowered."""

    stdout: str
    stderr: str = ""
    rc: int = 0
    timed_out: bool = False
    timeout: float | None = None


class FactUnavailable(Exception):
    """A fact whose value cannot be known (the command hung, failed oddly)."""


@dataclass(frozen=True)
class Fact:
    """`key` identifies the fact in a host's cache; `request` is sent as is."""

    key: str
    request: dict = field(compare=False, hash=False)
    parse: Callable[[dict], Any] = field(compare=False, hash=False)


def shell(key: str, command: str, parse: Callable[[Output], Any], timeout: float = 10.0) -> Fact:
    """A fact read from a read-only shell command under a timeout."""

    def parse_result(result: dict) -> Any:
        return parse(
            Output(
                result.get("out", ""),
                result.get("err", ""),
                result.get("rc", -1),
                bool(result.get("timed_out")),
                result.get("timeout"),
            )
        )

    return Fact(key, {"op": "sh", "cmd": command, "timeout": timeout}, parse_result)


@dataclass(frozen=True)
class FileState:
    """A path as the host sees it (lstat, plus content when it is a small file)."""

    path: str
    exists: bool
    kind: str = ""  # file, directory, symlink, other
    mode: int | None = None
    owner: str | None = None
    group: str | None = None
    size: int | None = None
    sha256: str | None = None
    content: bytes | None = None
    target: str | None = None

    @property
    def text(self) -> str | None:
        return None if self.content is None else self.content.decode("utf-8", "replace")


def _parse_stat(path: str, result: dict) -> FileState:
    if result.get("error"):
        raise FactUnavailable(f"cannot read {path}: {result['error']}")
    if not result.get("exists"):
        return FileState(path, False)
    content = result.get("content_b64")
    return FileState(
        path=path,
        exists=True,
        kind=result.get("kind", ""),
        mode=result.get("mode"),
        owner=result.get("owner"),
        group=result.get("group"),
        size=result.get("size"),
        sha256=result.get("sha256"),
        content=base64.b64decode(content) if content is not None else None,
        target=result.get("target"),
    )


def file_state(path: str, with_content: bool = True, follow: bool = False) -> Fact:
    """lstat of `path` (stat with `follow`), its sha256 and (up to 4 MiB) its content."""
    return Fact(
        f"stat:{int(with_content)}{'f' if follow else ''}:{path}",
        {"op": "stat", "path": path, "content": with_content, "follow": follow},
        lambda result: _parse_stat(path, result),
    )
