"""The local connection: the same runner, on this machine, through a subprocess."""
from __future__ import annotations

import getpass
import os
import subprocess
from collections.abc import Sequence

from gpuconf.connection.base import (
    Connection,
    LockHandle,
    lock_reply,
    parse_replies,
    payload,
    runner_command,
    sudo_prefix,
    uses_sudo,
)
from gpuconf.connection.lock import holder_command
from gpuconf.errors import ConnectError
from gpuconf.facts.local import run_local
from gpuconf.facts.wire import CheckLock, Reply, Request


class LocalConnection(Connection):
    """`-c local`: no SSH; commands run here, through sudo when become is set."""

    def open(self) -> None:
        self.connects += 1
        self.remote_user = "root" if os.geteuid() == 0 else getpass.getuser()

    def call(self, ops: Sequence[Request], readonly: bool, timeout: float, become: bool | None = None,
             lock: CheckLock | None = None, become_user: str | None = None) -> list[Reply]:
        if not self.connects:
            self.open()
        self.round_trips += 1
        command = runner_command(self.spec, self.remote_user, become, become_user)
        request = payload(ops, readonly, lock, self.spec, uses_sudo(self.spec, self.remote_user, become, become_user))
        try:
            # Its own process group, so an abandoned call (the run's deadline) ends the runner too: a
            # runner left waiting on a hung probe would keep the host's run lock until it timed out.
            ran = run_local(["/bin/sh", "-c", command], timeout, stdin=request)
        except OSError as exc:
            raise ConnectError(f"cannot run the local runner: {exc}") from None
        out = ran.out.decode("utf-8", "replace")  # with a timeout: the replies streamed before the kill
        if ran.timed_out:
            return parse_replies(self.spec.host, ops, out, "", None, "no answer within the call's deadline")
        return parse_replies(self.spec.host, ops, out, ran.err.decode("utf-8", "replace"), ran.rc)

    def hold_lock(self, path: str, wait: float, owner: str) -> LockHandle:
        if not self.connects:
            self.open()
        command = holder_command(self.spec.python, path, wait, owner)
        if uses_sudo(self.spec, self.remote_user):
            command = sudo_prefix(self.spec) + command
        proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # PIPE
        stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
        if uses_sudo(self.spec, self.remote_user) and self.spec.become_password is not None:
            stdin.write(self.spec.become_password.get_secret_value() + "\n")
            stdin.flush()
        line = stdout.readline()
        if not line.startswith("locked"):
            proc.kill()
            err = stderr.read()
            proc.wait()
            lock_reply(self.spec.host, line, err)

        def release() -> None:
            stdin.close()
            proc.wait(10)

        return LockHandle(release)
