"""Under `gpuconf remediate`, a reboot task's reboot is asked of the scheduler (scontrol reboot),
not run on the host; the wait for the new boot id is the same (gpuconf/engine/context.py). A host
that goes down before its reboot reply comes back is rebooting, not unreachable."""
from __future__ import annotations

import pytest

from gpuconf.engine import context
from gpuconf.engine.context import HostApply
from gpuconf.errors import ConnectError
from gpuconf.facts.base import FileState


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(context.time, "sleep", lambda seconds: None)


class Connection:
    def __init__(self):
        self.opened = 0
        self.round_trips = 0

    def open(self):
        self.opened += 1

    def close(self):
        pass


class Session:
    """A host whose boot id changes once the scheduler has been asked to reboot it."""

    host = "a100-01"

    def __init__(self):
        self.connection = Connection()
        self.calls: list[list[dict]] = []
        self.rebooted = False
        self.lock_args = None
        self.reboot_required, self.reboot_reasons = True, ["nvidia_driver"]

    def get(self, fact, become=None):
        return FileState(path="/proc/sys/kernel/random/boot_id", exists=True, kind="file",
                         content=b"new\n" if self.rebooted else b"old\n")

    def call(self, ops, readonly, become=None):
        self.calls.append(ops)
        return [{"rc": 0} for _ in ops]

    def release_lock(self):
        pass

    def forget(self):
        pass


def test_the_scheduler_reboots_the_host_and_the_engine_waits_for_the_new_boot():
    session = Session()
    asked: list[str] = []

    def scheduler_reboot():
        asked.append(session.host)
        session.rebooted = True

    after: list[float] = []
    apply = HostApply(session, None, None, lambda: [], after.append, reboot_via=scheduler_reboot)  # type: ignore[arg-type]
    apply.reboot("systemctl reboot", timeout=30)
    assert asked == ["a100-01"]
    assert not any(op.get("op") == "reboot" for ops in session.calls for op in ops)  # nothing ran on the host
    assert after and not session.reboot_required and session.reboot_reasons == []


def test_without_a_scheduler_the_host_runs_the_reboot_command():
    session = Session()
    original = session.call

    def call(ops, readonly, become=None):
        if any(op.get("op") == "reboot" for op in ops):
            session.rebooted = True
        return original(ops, readonly, become)

    session.call = call  # type: ignore[method-assign]
    HostApply(session, None, None, lambda: [], lambda _: None).reboot("systemctl reboot", timeout=30)  # type: ignore[arg-type]
    assert [op["cmd"] for ops in session.calls for op in ops if op.get("op") == "reboot"] == ["systemctl reboot"]


def lost_during_the_reboot(session: Session, reached: bool):
    """The reboot request is lost with the connection: after the host took it (the host went
    down before its reply came back), or before (it never got there)."""
    def call(ops, readonly, become=None):
        if any(op.get("op") == "reboot" for op in ops):
            if reached:
                session.connection.round_trips += 1
                session.rebooted = True
            raise ConnectError("connection to a100-01 lost, during: reboot")
        return [{"rc": 0} for _ in ops]
    session.call = call  # type: ignore[method-assign]


def test_a_host_that_goes_down_before_the_reboot_reply_comes_back_is_rebooted_not_unreachable():
    session = Session()
    lost_during_the_reboot(session, reached=True)
    after: list[float] = []
    HostApply(session, None, None, lambda: [], after.append).reboot("systemctl reboot", timeout=30)  # type: ignore[arg-type]
    assert after and not session.reboot_required


def test_a_reboot_request_that_never_reached_the_host_is_unreachable():
    session = Session()
    lost_during_the_reboot(session, reached=False)
    with pytest.raises(ConnectError, match="lost"):
        HostApply(session, None, None, lambda: [], lambda _: None).reboot("systemctl reboot", timeout=30)  # type: ignore[arg-type]
