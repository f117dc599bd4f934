"""SSH connections with paramiko: one transport per host; one runner channel kept for the run
(served.py), and one channel per call for a check's locked first read."""
from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias

import paramiko

from gpuconf.connection import hostkeys
from gpuconf.connection.base import (
    Connection,
    ConnectionSpec,
    LockHandle,
    lock_reply,
    parse_replies,
    payload,
    runner_command,
    serve_preamble,
    sudo_prefix,
    uses_sudo,
)
from gpuconf.connection.lock import holder_command
from gpuconf.connection.served import Served
from gpuconf.connection.sshconfig import config_path, hops
from gpuconf.errors import ConnectError, HostKeyError
from gpuconf.facts.wire import CheckLock, Reply, Request, RunnerRequest

if TYPE_CHECKING:
    from paramiko.transport import _SocketLike  # the stubs' name for what paramiko reads from


class QuietTransport(paramiko.Transport):
    """paramiko's transport thread wakes every `_active_check_timeout` seconds (0.1) while no
    packet comes, to see whether it was closed: with 50 connections open through a 20 s fleet
    check that was about a second of the controller's CPU. Once a second is enough: closing still
    closes the socket at once (the thread ends within that second), and keepalives are 15 s."""

    _active_check_timeout = 1.0


def transport(sock: _SocketLike, *, gss_kex: bool = False, gss_deleg_creds: bool = True,
              disabled_algorithms: Mapping[str, Iterable[str]] | None = None) -> paramiko.Transport:
    """A Transport that prefers AES-GCM: its tag is checked inside the cipher (C), where with
    AES-CTR paramiko compares every packet's HMAC in a Python loop; a server without GCM (OpenSSH
    before 6.2) still gets the others."""
    made = QuietTransport(sock, disabled_algorithms=disabled_algorithms)  # (paramiko's own GSS arguments unused)
    options = made.get_security_options()
    gcm = tuple(c for c in options.ciphers if c.endswith("-gcm@openssh.com"))
    options.ciphers = gcm + tuple(c for c in options.ciphers if c not in gcm)
    return made


# what a connection goes through: a ProxyCommand's pipe, a jump host's channel, or nothing (a TCP socket)
Socket: TypeAlias = paramiko.ProxyCommand | paramiko.Channel | None

TRANSIENT = (socket.timeout, ConnectionRefusedError, ConnectionResetError, EOFError,
             paramiko.ssh_exception.NoValidConnectionsError)
TRANSIENT_WORDS = ("banner", "reset", "no existing session", "timed out", "eof")


def backoff(attempt: int) -> float:
    """Seconds before retry `attempt + 1`: exponential up to 4 s, with jitter (0.5x to 1.5x) so
    that many hosts failing at once do not retry in lockstep."""
    return float(min(4.0, 0.25 * 2**attempt) * (0.5 + random.random()))


def describe_socket_error(exc: BaseException) -> str:
    """'connection refused', 'timed out': what went wrong, without paramiko's '[Errno None]'."""
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError) and exc.errors:
        reasons = {(getattr(e, "strerror", None) or str(e) or type(e).__name__).lower() for e in exc.errors.values()}
        return ", ".join(sorted(reasons))
    if isinstance(exc, socket.timeout):
        return "timed out"
    return str(exc) or type(exc).__name__


_KEYS: dict[tuple[str, int, int], paramiko.PKey] = {}
_KEYS_LOCK = threading.Lock()


def private_key(path: str) -> paramiko.PKey | None:
    """The key file, read once for every host of the run (while it is unchanged): given a file
    name, paramiko reads and parses it on each connection, trying RSA, then ECDSA, then Ed25519.
    None when it does not load on its own (missing, encrypted, a type paramiko does not know):
    paramiko then reads it itself, and its error is the one reported."""
    try:
        stat = os.stat(os.path.expanduser(path))
    except OSError:
        return None
    version = (path, stat.st_mtime_ns, stat.st_size)
    with _KEYS_LOCK:
        if version not in _KEYS:
            try:
                _KEYS[version] = paramiko.PKey.from_path(path)  # and its -cert.pub, as paramiko would
            except Exception:  # noqa: BLE001 - whatever it is, paramiko's own reading reports it
                return None
        return _KEYS[version]


def describe_ops(ops: Sequence[Request]) -> str:
    """What a request was doing, for an error: the kinds of its ops, and a command's first words."""
    parts = []
    for op in ops[:3]:
        parts.append(f"run {op['cmd'][:60]}".strip() if op["op"] == "run" else op["op"])
    return ", ".join(parts) + (f" and {len(ops) - 3} more" if len(ops) > 3 else "")


class SSHConnection(Connection):
    """A paramiko client whose transport is reused by every call of the run."""

    serve = os.environ.get("GPUCONF_RUNNER_PER_CALL") != "1"  # a runner kept for the run (served.py)

    def __init__(self, spec: ConnectionSpec, accept_new_host_keys: bool = False):
        super().__init__(spec)
        self.accept_new = accept_new_host_keys
        self.client: paramiko.SSHClient | None = None
        self.jumps: list[paramiko.SSHClient] = []  # the ProxyJump chain's hops, first to last
        self.proxy: paramiko.ProxyCommand | None = None
        self.runners: dict[tuple[bool | None, str | None], Served] = {}  # the runners kept, by become

    # -- connecting ---------------------------------------------------------
    def open(self) -> None:
        """Connect, retrying transient failures with backoff and jitter.

        The final error says how many attempts were made over how long, so a
        report tells a host that is down from one that refused once."""
        attempts = self.spec.connect_retries + 1
        started = time.monotonic()
        for attempt in range(attempts):
            try:
                self._connect()
                self.connects += 1
                return
            except ConnectError as exc:
                self.close()
                if not exc.transient:
                    raise
                if attempt == attempts - 1:
                    if attempts > 1:
                        raise ConnectError(f"{exc.message} ({attempts} attempts in "
                                           f"{time.monotonic() - started:.1f} s)", transient=True) from None
                    raise
            time.sleep(backoff(attempt))

    def _client(self, address: str, port: int, user: str | None, sock: Socket = None,
                key: str | None = None, known_hosts: str | None = None) -> paramiko.SSHClient:
        """A client connected to `address` (through `sock`: a hop's channel, a ProxyCommand), its
        host key checked against `known_hosts` and ~/.ssh/known_hosts, at every hop alike."""
        spec = self.spec
        key = key or spec.ssh_key
        files = hostkeys.default_files(known_hosts or spec.known_hosts_file)
        client = paramiko.SSHClient()
        client._system_host_keys = hostkeys.load(files)  # type: ignore[attr-defined]  # read-only: never rewritten
        client.set_missing_host_key_policy(hostkeys.Policy(self.accept_new, files[0]))
        name = hostkeys.known_hosts_name(address, port)
        pkey = private_key(key) if key else None
        try:
            client.connect(
                address, port=port, username=user, pkey=pkey, key_filename=None if pkey else key,
                look_for_keys=key is None, allow_agent=key is None,
                timeout=spec.connect_timeout, banner_timeout=spec.connect_timeout,
                auth_timeout=spec.connect_timeout, channel_timeout=spec.connect_timeout, sock=sock,
                transport_factory=transport,
            )
        except HostKeyError:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise hostkeys.changed_key_error(name, exc) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise ConnectError(f"authentication failed for {user or 'default user'}@{name}: {exc}") from None
        except TRANSIENT as exc:
            client.close()
            raise ConnectError(f"cannot connect to {name}: {describe_socket_error(exc)}", transient=True) from None
        except (paramiko.SSHException, OSError) as exc:
            client.close()
            # a host that accepts TCP but never speaks SSH ends in "banner" or, when the transport
            # died first, "No existing session": both are a host not answering, worth a retry
            transient = isinstance(exc, OSError) or any(word in str(exc).lower() for word in TRANSIENT_WORDS)
            raise ConnectError(f"cannot connect to {name}: {exc}", transient=transient) from None
        return client

    def _connect(self) -> None:
        spec = self.spec
        sock: Socket = None
        if spec.proxy_command:
            try:
                sock = self.proxy = paramiko.ProxyCommand(spec.proxy_command)
            except paramiko.SSHException as exc:  # the command could not start
                raise ConnectError(f"ProxyCommand for {spec.host}: {exc}") from None
        elif spec.jump_host:
            sock = self._through(spec.jump_host)
        self.client = self._client(spec.address, spec.port, spec.user, sock)
        transport = self._transport(self.client)
        transport.set_keepalive(15)
        self.remote_user = spec.user or transport.get_username()

    def _through(self, chain: str) -> paramiko.Channel:
        """A channel to the host through each hop of a ProxyJump chain in turn (each hop a client
        of its own, its key checked), named by address or by its ssh config alias."""
        spec = self.spec
        sock: paramiko.Channel | None = None
        route = hops(chain, config_path(spec.ssh_config_file), spec.user)
        targets = [(hop.address, hop.port) for hop in route[1:]] + [(spec.address, spec.port)]
        for hop, (address, port) in zip(route, targets):
            client = self._client(hop.address, hop.port, hop.user, sock, key=hop.ssh_key,
                                  known_hosts=hop.known_hosts_file)
            self.jumps.append(client)
            try:
                sock = self._transport(client).open_channel(
                    "direct-tcpip", (address, port), ("127.0.0.1", 0), timeout=spec.connect_timeout)
            except (paramiko.SSHException, OSError) as exc:
                raise ConnectError(f"jump host {hostkeys.known_hosts_name(hop.address, hop.port)} cannot reach "
                                   f"{address}:{port}: {exc}", transient=True) from None
        if sock is None:
            raise ConnectError(f"jump host chain {chain!r} names no host")
        return sock

    # -- calls --------------------------------------------------------------
    def call(self, ops: Sequence[Request], readonly: bool, timeout: float, become: bool | None = None,
             lock: CheckLock | None = None, become_user: str | None = None) -> list[Reply]:
        if self.client is None:
            self.open()
        if lock is None and self.serve:
            served = self._served(become, become_user)
            if served is not None:
                return self._ask(served, ops, readonly, timeout)
        host = self.spec.host
        try:
            channel = self._transport(self.client).open_session(timeout=self.spec.connect_timeout)
            channel.exec_command(runner_command(self.spec, self.remote_user, become, become_user))
            sudo = uses_sudo(self.spec, self.remote_user, become, become_user)
            channel.sendall(payload(ops, readonly, lock, self.spec, sudo))
            channel.shutdown_write()
        except (paramiko.SSHException, OSError, EOFError, AttributeError) as exc:
            self.close()
            raise ConnectError(f"connection to {host} lost: {exc or type(exc).__name__}") from None
        self.round_trips += 1
        out, cut_short = self._read(channel, time.monotonic() + timeout)
        return self._ended(channel, ops, out, cut_short, channel.close)

    def _ended(self, channel: paramiko.Channel, ops: Sequence[Request], out: bytes, cut_short: str | None,
               release: Callable[[], None]) -> list[Reply]:
        """The replies of a runner whose session ended (or was cut short): its stderr and exit status
        explain a runner that failed; `release` closes the channel."""
        host = self.spec.host
        err = b""
        while channel.recv_stderr_ready():
            err += channel.recv_stderr(65536)
        rc = channel.recv_exit_status() if channel.exit_status_ready() else None
        release()
        if rc == -1 and not cut_short and self._transport_gone():
            cut_short = f"connection to {host} lost (the session ended without an exit status)"
        if cut_short and "lost" in cut_short:
            # The host went away mid-request: what it did last is not known, so it is unreachable,
            # not failed (a task failure would read as a bug in the playbook).
            self.close()
            raise ConnectError(f"{cut_short}, during: {describe_ops(ops)}")
        return parse_replies(host, ops, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), rc,
                             cut_short)

    def _served(self, become: bool | None, become_user: str | None) -> Served | None:
        """The runner kept for this (become, become_user), started now if there is none alive; None
        when another thread is using it (that call takes a channel of its own)."""
        key = (become, become_user)
        served = self.runners.get(key)
        if served is not None and not served.alive:
            served.close()
            del self.runners[key]
            served = None
        if served is None:
            try:
                channel = self._transport(self.client).open_session(timeout=self.spec.connect_timeout)
                channel.exec_command(runner_command(self.spec, self.remote_user, become, become_user, serve=True))
                channel.sendall(serve_preamble(self.spec, uses_sudo(self.spec, self.remote_user, become, become_user)))
            except (paramiko.SSHException, OSError, EOFError, AttributeError) as exc:
                self.close()
                raise ConnectError(f"connection to {self.spec.host} lost: {exc or type(exc).__name__}") from None
            served = self.runners[key] = Served(channel)
        return served if served.busy.acquire(blocking=False) else None

    def _ask(self, served: Served, ops: Sequence[Request], readonly: bool, timeout: float) -> list[Reply]:
        host = self.spec.host
        line: RunnerRequest = {"readonly": readonly, "ops": list(ops)}
        request = (json.dumps(line) + "\n").encode()
        try:
            self.round_trips += 1
            try:
                out, cut_short, done = served.ask(request, time.monotonic() + timeout, host,
                                                  lambda: self._transport(self.client).is_active())
            except (paramiko.SSHException, OSError, EOFError) as exc:
                self.close()
                raise ConnectError(f"connection to {host} lost: {exc or type(exc).__name__}") from None
        finally:
            served.busy.release()
        channel = served.channel
        if done:
            while channel.recv_stderr_ready():  # nothing, normally; unread, it would hold the channel's window
                channel.recv_stderr(65536)
            return parse_replies(host, ops, out.decode("utf-8", "replace"), "", 0, None)
        return self._ended(channel, ops, out, cut_short, lambda: self._forget(served))

    def _forget(self, served: Served) -> None:
        served.close()
        for key, kept in list(self.runners.items()):
            if kept is served:
                del self.runners[key]

    def _transport_gone(self, wait: float = 2.0) -> bool:
        """A session that ends without an exit status is a lost connection when the transport
        dies with it (a runner killed by a signal also has none, on a live transport)."""
        deadline = time.monotonic() + wait
        while True:
            transport = self.client.get_transport() if self.client else None
            if transport is None or not transport.is_active():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def hold_lock(self, path: str, wait: float, owner: str) -> LockHandle:
        if self.client is None:
            self.open()
        command = holder_command(self.spec.python, path, wait, owner)
        if uses_sudo(self.spec, self.remote_user):
            command = sudo_prefix(self.spec) + command
        try:
            channel = self._transport(self.client).open_session(timeout=self.spec.connect_timeout)
            channel.exec_command(command)
            if uses_sudo(self.spec, self.remote_user) and self.spec.become_password is not None:
                channel.sendall((self.spec.become_password.get_secret_value() + "\n").encode())
            channel.settimeout(wait + self.spec.connect_timeout)
            line = channel.makefile("r").readline()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectError(f"connection to {self.spec.host} lost: {exc}") from None
        err = channel.recv_stderr(65536).decode("utf-8", "replace") if channel.recv_stderr_ready() else ""
        try:
            lock_reply(self.spec.host, line, err)
        except Exception:
            channel.close()
            raise
        return LockHandle(channel.close)

    def _read(self, channel: paramiko.Channel, deadline: float) -> tuple[bytes, str | None]:
        chunks: list[bytes] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return b"".join(chunks), f"no answer from {self.spec.host} within the call's deadline"
            channel.settimeout(min(remaining, 1.0))
            try:
                data = channel.recv(65536)
            except TimeoutError:
                if not self._transport(self.client).is_active():
                    return b"".join(chunks), f"connection to {self.spec.host} lost"
                continue
            except (paramiko.SSHException, OSError, EOFError) as exc:
                return b"".join(chunks), f"connection to {self.spec.host} lost: {exc}"
            if not data:
                if not channel.exit_status_ready() and not self._transport(self.client).is_active():
                    return b"".join(chunks), f"connection to {self.spec.host} lost"
                return b"".join(chunks), None
            chunks.append(data)

    def _transport(self, client: paramiko.SSHClient | None) -> paramiko.Transport:
        transport = client.get_transport() if client is not None else None
        if transport is None:
            raise ConnectError(f"connection to {self.spec.host} lost", transient=True)
        return transport

    def close(self) -> None:
        for served in list(self.runners.values()):
            served.close()
        self.runners.clear()
        # the host first, then the hops back to the first: each runs over the one before it
        for client in [self.client, *reversed(self.jumps)]:
            if client is not None:
                client.close()
        if self.proxy is not None:
            self.proxy.close()
        self.client, self.jumps, self.proxy = None, [], None
