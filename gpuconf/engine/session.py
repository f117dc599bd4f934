"""A host's session for a run: its connection, fact cache and round trips.

Facts are requested in batches. A change invalidates the cache, and the same
round trip that applies a change also re-reads the facts the re-check and the
following tasks need, so an apply costs one round trip per changed task.

A task with `become_user` talks to the host through the session's user session
(`as_user`): the same connection, the runner started as that user (sudo -u), and a fact
cache of its own, since the same file or command can read differently as another user.
A change made as any user invalidates every user's cache.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from gpuconf.connection.base import Connection, LockHandle
from gpuconf.errors import ConnectError, RemoteError
from gpuconf.facts.base import Fact, FactUnavailable, Output
from gpuconf.facts.merge import Batch, batches, reply_for
from gpuconf.facts.platform import PLATFORM_FACTS, Platform, PlatformUnknown, from_facts
from gpuconf.facts.wire import CheckLock, Reply, Request, op_timeout, subject

CALL_MARGIN = 30.0  # seconds beyond the sum of op timeouts before a call is abandoned


class HostSession:
    def __init__(self, host: str, connection: Connection, deadline: Callable[[], float | None] = lambda: None,
                 trace: Callable[[str], None] | None = None, become_user: str | None = None,
                 parent: HostSession | None = None):
        self.host = host
        self.become_user = become_user
        self.parent = parent
        self.users: dict[str, HostSession] = {}  # the user sessions, opened lazily (the first session only)
        self.trace = trace  # -vvv: told every request before it is sent
        # what -vvv shows of a request: its host's secrets, and what templates made of them, masked
        # (set by the play on the host: engine/secrets.py); a user session uses its parent's
        self.redact: Callable[[str], str] = lambda text: text
        self.connection = connection
        self.cache: dict[str, Any] = {}
        # the host's platform, resolved from the first round trip (gpuconf/facts/platform.py); an error
        # when it cannot be known, which fails the tasks that need it
        self.platform: Platform | PlatformUnknown | None = None
        self.deadline = deadline
        self.reboot_required = False
        self.reboot_reasons: list[str] = []
        self.read_lock: CheckLock | None = None  # check: take the run lock shared in each request
        self.lock_handle: LockHandle | None = None  # apply: the run lock, held exclusively
        self.lock_args: tuple[Any, ...] | None = None
        # the host was unreachable when its play began and the play goes on (ignore_unreachable):
        # each task that needs the host connects again (and takes the run lock) with this
        self.reopen: Callable[[], None] | None = None
        if parent is not None:
            self.reboot_reasons = parent.reboot_reasons  # one host: a reboot pending is pending for every user

    def as_user(self, user: str | None) -> HostSession:
        """The session whose reads and ops run as `user` (with become); this one for no user."""
        first = self.parent or self
        if not user or user == first.become_user:
            return first
        if user not in first.users:
            first.users[user] = HostSession(first.host, first.connection, first.deadline, first.trace, user, first)
        return first.users[user]

    def forget(self) -> None:
        """Drop every user's cached facts: the host has changed."""
        first = self.parent or self
        for session in [first, *first.users.values()]:
            session.cache.clear()

    def take_lock(self, path: str, wait: float, owner: str) -> None:
        """Hold the host's run lock exclusively (again, after a reboot dropped it)."""
        self.lock_args = (path, wait, owner)
        self.lock_handle = self.connection.hold_lock(path, wait, owner)

    def release_lock(self) -> None:
        if self.lock_handle is not None:
            try:
                self.lock_handle.close()
            except Exception:  # noqa: BLE001 - the host may be gone; the kernel frees the lock then
                pass
            self.lock_handle = None

    # -- round trips --------------------------------------------------------
    def _timeout(self, ops: Sequence[Request]) -> float:
        budget = sum(op_timeout(op) for op in ops) + CALL_MARGIN
        limit = self.deadline()
        if limit is not None:
            budget = min(budget, max(0.5, limit - time.monotonic()))
        return budget

    def call(self, ops: Sequence[Request], readonly: bool, become: bool | None = None) -> list[Reply]:
        if not ops:
            return []
        if self.trace is not None:
            redact = (self.parent or self).redact
            more = f", +{len(ops) - 8} more" if len(ops) > 8 else ""
            kinds = ", ".join(_describe(op, redact) for op in ops[:8]) + more
            who = f" as {self.become_user}" if self.become_user else ""
            self.trace(f"{'read' if readonly else 'write'} request{who}, {len(ops)} op(s): {kinds}")
        read_lock = (self.parent or self).read_lock if readonly else None
        if self.become_user is None:
            return self.connection.call(ops, readonly, self._timeout(ops), become, read_lock)
        return self.connection.call(ops, readonly, self._timeout(ops), become, read_lock, become_user=self.become_user)

    def fetch(self, facts: list[Fact], become: bool | None = None) -> None:
        """Gather every fact not yet cached, in one read-only round trip: facts of one
        source share one request (gpuconf/facts/merge.py)."""
        first = self.parent or self
        for fact in facts:
            if fact.controller is not None and fact.key not in self.cache:
                self._read_on_controller(fact)
        if first.platform is None:  # the first round trip of a host also reads what its platform is
            facts = [*PLATFORM_FACTS, *facts]
        missing = batches([f for f in facts if f.key not in self.cache])
        if missing:
            replies = self.call([b.request for b in missing], readonly=True, become=become)
            self._store(missing, replies)
        if first.platform is None:
            try:
                first.platform = from_facts(self.cache)
            except PlatformUnknown as exc:
                first.platform = exc

    def _read_on_controller(self, fact: Fact) -> None:
        """A fact the controller reads itself (a BMC over Redfish), cached as a host's read is."""
        assert fact.controller is not None
        if self.trace is not None:
            self.trace(f"read on the controller: {fact.key}")
        try:
            self.cache[fact.key] = fact.parse(fact.controller())
        except FactUnavailable as exc:
            self.cache[fact.key] = exc

    def _store(self, sent: list[Batch], replies: list[Reply]) -> None:
        for batch, reply in zip(sent, replies):
            if reply.get("skipped"):  # an op before it failed (a command's exit code): not read, not cached
                continue
            for fact in batch.facts:
                if reply.get("lost"):
                    self.cache[fact.key] = FactUnavailable(reply.get("error", "no reply"))
                    continue
                try:
                    self.cache[fact.key] = fact.parse(reply_for(fact, batch, reply))
                except FactUnavailable as exc:
                    self.cache[fact.key] = exc

    def get(self, fact: Fact, become: bool | None = None) -> Any:
        if fact.key not in self.cache:
            self.fetch([fact], become)
        value = self.cache[fact.key]
        if isinstance(value, FactUnavailable):
            raise value
        return value

    def execute(self, ops: Sequence[Request], refresh: list[Fact], become: bool | None = None) -> list[Output]:
        """Run write ops, then re-read `refresh` facts, in one round trip."""
        self.forget()
        unique = batches(refresh)
        replies = self.call([*ops, *(b.request for b in unique)], readonly=False, become=become)
        op_replies, fact_replies = replies[: len(ops)], replies[len(ops):]
        if any(r.get("skipped") or r.get("error") for r in op_replies):
            pass  # a failed op stops the batch: later facts were not read, leave them uncached
        else:
            self._store(unique, fact_replies)
        return [
            Output(r.get("out", ""), r.get("err", r.get("error", "")), r.get("rc", 0 if r.get("ok") else -1),
                   bool(r.get("timed_out")), r.get("timeout"))
            for r in op_replies
        ]

    def reconnect(self) -> None:
        self.connection.close()
        self.forget()
        self.connection.open()


def _describe(op: Request, redact: Callable[[str], str]) -> str:
    """One op, shortly: its kind and what it names (a path, a command), for -vvv. Redacted
    before it is cut short: a cut would leave the first half of a secret unrecognised."""
    text = redact(subject(op))
    return f"{op['op']} {text[:60] + ('…' if len(text) > 60 else '')}".strip()


__all__ = ["HostSession", "ConnectError", "RemoteError"]
