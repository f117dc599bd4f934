"""What the engine hands a task: `Facts` for check(), `HostApply` for apply(), and the
`Resolver` that renders a task's template files and conditions before check() runs.

check() gets values only, never the session: it cannot write. apply() gets HostApply.
"""
from __future__ import annotations

import copy
import datetime
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuconf.connection.lock import marker_path
from gpuconf.engine.reboot_wait import NoNewBoot, take_run_lock, wait_for_new_boot
from gpuconf.engine.session import HostSession
from gpuconf.errors import ConnectError, TaskError
from gpuconf.facts import gather
from gpuconf.facts.base import Fact, Output, Parsed
from gpuconf.facts.wire import AnnounceRebootRequest, RebootRequest, RemoveRequest, Request
from gpuconf.files.bounded import read_source
from gpuconf.tasks.base import Facts, Op
from gpuconf.templating.conditions import evaluate_when
from gpuconf.templating.render import Vars, Verbatim, is_template
from gpuconf.templating.template_files import render_file
from gpuconf.templating.template_vars import template_vars


def find_file(name: str, search_paths: list[Path]) -> Path:
    path = Path(name)
    if path.is_absolute():
        candidates = [path]
    else:
        candidates = [base / name for base in search_paths]
    for candidate in candidates:
        if candidate.exists() and not candidate.is_dir():  # a FIFO or device is found, and refused by _text
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise TaskError(f"file '{name}' not found (looked in {looked})")


def bounded(fact: Fact[Parsed], timeout: float | None) -> Fact[Parsed]:
    """The fact's command under a task's `timeout:` keyword, when that is the shorter limit.

    The prefetch of a task's facts and the task's own reads must both use it: the
    first read fills the cache, and a hung command would otherwise run its full time."""
    request = fact.request
    if timeout is None or (request["op"] != "sh" and request["op"] != "exec"):
        return fact
    limited = request.copy()
    limited["timeout"] = min(timeout, request.get("timeout", 10))
    return replace(fact, request=limited)


class Resolver:
    """What a task may resolve while its parameters are rendered: template files and
    source files (role templates/ and files/ first), and conditions over the variables."""

    def __init__(self, variables: Vars, search_paths: list[Path]):
        self.vars = variables
        self._search = search_paths

    def template(self, name: str, settings: dict[str, Any] | None = None, dest: str | None = None) -> str:
        path = find_file(name, self._search)
        text = _text(path)
        header = text.startswith("#jinja2:")  # its settings line is never written, as in Ansible
        rendered = is_template(text) or header or bool(settings)
        if not rendered:
            return text
        variables = self.vars.child(Verbatim(template_vars(name, path.resolve(), dest)))   # above the task's
        return render_file(text, variables, str(path), self._search, settings)

    def source(self, name: str) -> str:
        return _text(find_file(name, self._search))

    def holds(self, condition: str | bool) -> bool:
        return evaluate_when(condition, self.vars)

    def defined(self, name: str) -> bool:
        return name in self.vars

    def variable(self, name: str) -> Any:
        return self.vars[name]


def _text(path: Path) -> str:
    """A template or source file's text: UTF-8, or an error that says so (never an internal error)."""
    try:
        return read_source(path, TaskError).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                        "gpuconf writes text files") from None
    except OSError as exc:
        raise TaskError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def read_facts(session: HostSession, reads: list[Fact], host: dict[str, Any], become: bool | None,
               today: datetime.date | None = None, host_facts: frozenset[str] | None = None) -> Facts:
    """The declared reads of a task, fetched (one round trip for those not cached yet), with the
    host facts it declared and the host's platform. A task that reads nothing on a host that was
    never connected (an assert, in a play that asks its hosts nothing) asks the host nothing."""
    if reads or session.connection.connects:
        session.fetch(reads, become)
    return Facts({f.key: session.cache[f.key] for f in reads if f.key in session.cache}, reads, host,
                 tuple(session.reboot_reasons), today, (session.parent or session).platform, host_facts)


class HostApply:
    """What apply() may do on one host: run ops, read a fact afresh, reboot."""

    def __init__(self, session: HostSession, become: bool | None, timeout: float | None,
                 refresh: Callable[[], list[Fact]], on_reboot: Callable[[float], None],
                 reboot_via: Callable[[], None] | None = None):
        self._session = session
        self._reboot_via = reboot_via  # the scheduler reboots the host (remediate), not its own command
        self.host = session.host
        self._become = become
        self._timeout = timeout
        self._refresh = refresh
        self._on_reboot = on_reboot

    def read(self, fact: Fact) -> Any:
        """The fact read now, not from the cache (apply polls with it)."""
        fact = bounded(fact, self._timeout)
        self._session.cache.pop(fact.key, None)
        return self._session.get(fact, self._become)

    def execute(self, ops: list[Op], explains_failures: bool = False) -> list[Output]:
        requests: list[Request] = []
        for op in ops:
            request = copy.copy(op.request)
            if self._timeout is not None and request["op"] == "run":
                request["timeout"] = self._timeout
            requests.append(request)
        outputs = self._session.execute(requests, self._refresh() + gather.fact_requests(), self._become)
        for op, request, output in zip(ops, requests, outputs):
            if output.timed_out:
                limit = output.timeout or request.get("timeout")
                raise TaskError(f"timed out after {limit:g} s: {op.description} (its process group was killed)")
            if output.rc != 0 and op.request.get("check", True) and not explains_failures:
                tail = (output.stderr.strip() or output.stdout.strip())[-800:]
                raise TaskError(f"{op.description} failed (exit {output.rc}): {tail}", None,
                                data={"rc": output.rc, "stdout": output.stdout, "stderr": output.stderr})
        return outputs

    def reboot(self, command: str, timeout: float, via: Callable[[], None] | None = None) -> float:
        """Reboot the host (or have the scheduler reboot it, or `via`: a power cycle through the
        node's BMC, which a firmware's activation needs whoever else would reboot it) and wait for
        a new boot id and SSH; returns the seconds taken.

        The reboot is announced on the host first (connection/lock.py): this run's lock holder
        then keeps the lock until the host is down, so no other run starts a package
        transaction that the reboot would cut; after the boot the lock is taken again."""
        session = self._session
        old = session.get(gather.BOOT_ID)
        old_id = old.text.strip() if old.exists else ""
        started = time.monotonic()
        lock = session.lock_args[0] if session.lock_args else None
        reboot_via = via or self._reboot_via
        if reboot_via is not None:
            if lock:
                announce: AnnounceRebootRequest = {"op": "announce_reboot", "lock": lock, "timeout": timeout}
                session.call([announce], readonly=False, become=self._become)
            try:
                reboot_via()
            except BaseException:
                # the scheduler did not reboot (the node is no longer gpuconf's, scontrol failed):
                # the marker goes, or this run's lock holder would keep the host locked until its
                # deadline for a reboot that never comes
                if lock:
                    withdraw: RemoveRequest = {"op": "remove", "path": marker_path(lock)}
                    session.call([withdraw], readonly=False, become=self._become)
                raise
        else:
            sent = session.connection.round_trips
            reboot: RebootRequest = {"op": "reboot", "cmd": command, "delay": 1}
            if lock:
                reboot["lock"], reboot["timeout"] = lock, timeout
            try:
                session.call([reboot], readonly=False, become=self._become)
            except ConnectError:
                if session.connection.round_trips == sent:
                    raise   # the request never reached the host: it is unreachable
                # It did, and the host went down before its reply came back: the runner answers and
                # the reboot starts a second later, which a loaded host may not get through. The
                # new boot id below is what tells.
        session.release_lock()   # the holder stays on the host until it goes down (the marker)
        try:
            wait_for_new_boot(session, old_id, started + timeout)
        except NoNewBoot as exc:
            raise TaskError(f"host did not come back within {timeout:.0f} s after reboot ({exc})") from None
        if session.lock_args:  # the reboot ended the lock holder: take the lock again
            take_run_lock(session, *session.lock_args)
        session.reboot_required = False
        session.reboot_reasons.clear()
        session.forget()
        self._on_reboot(time.monotonic() - started)
        return time.monotonic() - started
