"""The contexts a task sees. check() gets a ReadContext, which has no way to
write; only apply() gets a WriteContext."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import paramiko

from gpuconf.errors import ConnectError, TaskError
from gpuconf.facts import gather
from gpuconf.facts.base import Fact, Output
from gpuconf.tasks.base import Op
from gpuconf.templating import Vars, is_template, render_string

from gpuconf.engine.session import HostSession


def find_file(name: str, search_paths: list[Path]) -> Path:
    path = Path(name)
    if path.is_absolute():
        candidates = [path]
    else:
        candidates = [base / name for base in search_paths]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise TaskError(f"file '{name}' not found (looked in {looked})")


def bounded(fact: Fact, timeout: float | None) -> Fact:
    """The fact's command under a task's `timeout:` keyword, when that is the shorter limit.

    The prefetch of a task's facts and the task's own reads must both use it: the
    first read fills the cache, and a hung command would otherwise run its full time."""
    if timeout is None or fact.request.get("op") != "sh":
        return fact
    return Fact(fact.key, dict(fact.request, timeout=min(timeout, fact.request.get("timeout", 10))), fact.parse)


class ReadContext:
    """Facts of one host, read through its session. Nothing here writes."""

    def __init__(self, session: HostSession, variables: Vars, facts: dict[str, Any], check_mode: bool,
                 search_paths: list[Path], become: bool | None, timeout: float | None = None,
                 after_apply: bool = False):
        self._session = session
        self.after_apply = after_apply  # True for the re-check that follows apply
        self.host = session.host
        self.vars = variables
        self.facts = facts
        self.check_mode = check_mode
        self._search = search_paths
        self._become = become
        self._timeout = timeout

    @property
    def reboot_required(self) -> bool:
        return self._session.reboot_required or bool(self._session.reboot_reasons)

    @property
    def reboot_reasons(self) -> list[str]:
        return list(self._session.reboot_reasons)

    def _bounded(self, fact: Fact) -> Fact:
        return bounded(fact, self._timeout)

    def get(self, fact: Fact) -> Any:
        return self._session.get(self._bounded(fact), self._become)

    def get_all(self, facts: list[Fact]) -> list[Any]:
        self._session.fetch([self._bounded(f) for f in facts], self._become)
        return [self.get(f) for f in facts]

    def forget(self, fact: Fact) -> None:
        """Drop a cached fact so the next get() reads it again (polling)."""
        self._session.cache.pop(self._bounded(fact).key, None)

    def template(self, name: str) -> str:
        """Render a template file (role templates/ first) with the task's vars."""
        text = find_file(name, self._search).read_text()
        return str(render_string(text, self.vars)) if is_template(text) else text

    def source(self, name: str) -> str:
        return find_file(name, self._search).read_text()


class WriteContext(ReadContext):
    """Adds what apply() may do: run ops, reboot."""

    def __init__(self, *args: Any, refresh: Callable[[], list[Fact]], on_reboot: Callable[[float], None], **kw: Any):
        super().__init__(*args, **kw)
        self._refresh = refresh
        self._on_reboot = on_reboot

    def execute(self, ops: list[Op]) -> list[Output]:
        requests = []
        for op in ops:
            request = dict(op.request)
            if self._timeout is not None and request.get("op") == "run":
                request["timeout"] = self._timeout
            requests.append(request)
        outputs = self._session.execute(requests, self._refresh() + gather.fact_requests(), self._become)
        for op, request, output in zip(ops, requests, outputs):
            if output.timed_out:
                limit = output.timeout or request.get("timeout")
                raise TaskError(f"timed out after {limit:g} s: {op.description} (its process group was killed)")
            if output.rc != 0 and op.request.get("check", True):
                tail = (output.stderr.strip() or output.stdout.strip())[-800:]
                raise TaskError(f"{op.description} failed (exit {output.rc}): {tail}", None)
        return outputs

    def reboot(self, command: str, timeout: float) -> float:
        """Reboot the host and wait for a new boot id; returns the seconds taken."""
        return self._on_reboot_wait(command, timeout)

    def _on_reboot_wait(self, command: str, timeout: float) -> float:
        session = self._session
        old = session.get(gather.FACTS["boot_id"][0])
        old_id = old.text.strip() if old.exists else ""
        started = time.monotonic()
        session.call([{"op": "reboot", "cmd": command, "delay": 1}], readonly=False, become=self._become)
        session.release_lock()
        session.connection.close()
        session.cache.clear()
        time.sleep(2)
        last_error = "no answer"
        while time.monotonic() - started < timeout:
            try:
                session.connection.open()
                state = session.get(gather.FACTS["boot_id"][0])
                if state.exists and state.text.strip() != old_id:
                    if session.lock_args:  # the reboot ended the lock holder: take the lock again
                        session.take_lock(*session.lock_args)
                    session.reboot_required = False
                    session.reboot_reasons.clear()
                    session.cache.clear()
                    self._on_reboot(time.monotonic() - started)
                    return time.monotonic() - started
                last_error = "still the same boot id"
                session.connection.close()
                session.cache.clear()
            except ConnectError as exc:
                last_error = exc.message
                session.connection.close()
            except (EOFError, OSError, paramiko.SSHException) as exc:   # it went away again mid-handshake
                last_error = f"connection lost: {exc or type(exc).__name__}"
                session.connection.close()
            time.sleep(1)
        raise TaskError(f"host did not come back within {timeout:.0f} s after reboot ({last_error})")
