"""Waiting for a host's new boot, and taking its run lock around another run's reboot.

Both the reboot task (HostApply.reboot) and an apply that finds another run's reboot pending
(connection/lock.py) wait the same way: reconnect until the host answers with a boot id other
than the one that was ending, within a bound.
"""
from __future__ import annotations

import time

import paramiko

from gpuconf.connection.base import RebootPending
from gpuconf.engine.session import HostSession
from gpuconf.errors import ConnectError, RemoteError
from gpuconf.facts import gather


class NoNewBoot(Exception):
    """The host did not answer with a new boot id in time; the message says what it did last."""


def wait_for_new_boot(session: HostSession, old_id: str, until: float, first_pause: float = 2.0) -> None:
    """Reconnect until the host answers with a boot id other than `old_id`, up to `until`
    (time.monotonic()); the session is connected to the new boot on return."""
    session.connection.close()
    session.forget()
    time.sleep(max(0.0, min(first_pause, until - time.monotonic())))
    last_error = "no answer"
    while time.monotonic() < until:
        try:
            session.connection.open()
            state = session.get(gather.BOOT_ID)
            if state.exists and state.text.strip() != old_id:
                session.forget()
                return
            last_error = "still the same boot id"
            session.connection.close()
            session.forget()
        except ConnectError as exc:
            last_error = exc.message
            session.connection.close()
        except (EOFError, OSError, paramiko.SSHException) as exc:   # it went away again mid-handshake
            last_error = f"connection lost: {exc or type(exc).__name__}"
            session.connection.close()
        time.sleep(1)
    raise NoNewBoot(last_error)


def take_run_lock(session: HostSession, path: str, wait: float, owner: str) -> None:
    """Hold the host's run lock, waiting up to `wait` seconds (--lock-wait) for another run: for
    its end, and when that run rebooted the host, for the new boot (the lock is then taken there)."""
    until = time.monotonic() + wait
    while True:
        try:
            session.take_lock(path, max(0.0, until - time.monotonic()), owner)
            return
        except RebootPending as pending:
            if time.monotonic() >= until:
                raise RemoteError(f"{pending.message}; waited {wait:g} s (--lock-wait): run again once the host "
                                  "is up, or raise --lock-wait to wait for its new boot") from None
            try:
                wait_for_new_boot(session, pending.boot_id, until, first_pause=1.0)
            except NoNewBoot as exc:
                raise RemoteError(f"{pending.message}; the host did not come back within {wait:g} s (--lock-wait: "
                                  f"{exc}): run again once it is up, or raise --lock-wait") from None
