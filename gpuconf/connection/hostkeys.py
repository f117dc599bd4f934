"""Strict host key checking, with opt-in trust on first use.

An unknown key is refused unless `accept_new` is set; then it is appended to
the known_hosts file under an exclusive flock, so that many first connections
in parallel never corrupt the file. A changed key is always refused.
"""
from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import threading
from pathlib import Path
from typing import TypeAlias

import paramiko

from gpuconf.errors import HostKeyError

_lock = threading.Lock()
Stamp: TypeAlias = tuple[str, int, int, int]  # a file as it was read: path, inode, size, mtime
_parsed: dict[tuple[Stamp | None, ...], paramiko.HostKeys] = {}
_parsed_lock = threading.Lock()


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


def default_files(extra: str | None) -> list[Path]:
    files = [Path(extra).expanduser()] if extra else []
    files.append(Path("~/.ssh/known_hosts").expanduser())
    return files


def load(files: list[Path]) -> paramiko.HostKeys:
    """The keys of `files`, parsed once per version of the files and shared by every connection
    (read-only: paramiko only looks keys up in them). Parsing a 100-line known_hosts costs ~2 ms,
    which every host of a run used to pay; a file that changes (trust on first use appending to
    it, an edit by hand) is read again, because its size and modification time are the key."""
    stamps = tuple(_stamp(path) for path in files)
    with _parsed_lock:
        keys = _parsed.get(stamps)
        if keys is None:
            keys = paramiko.HostKeys()
            for path, stamp in zip(files, stamps):
                if stamp is not None:
                    try:
                        keys.load(str(path))
                    except (OSError, paramiko.SSHException) as exc:
                        raise HostKeyError(f"cannot read known_hosts file {path}: {exc}") from None
            if len(_parsed) > 16:
                _parsed.clear()
            _parsed[stamps] = keys
    return keys


def _stamp(path: Path) -> Stamp | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HostKeyError(f"cannot read known_hosts file {path}: {exc.strerror}") from None
    return (str(path), st.st_ino, st.st_size, st.st_mtime_ns)


class Policy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown keys, or record them when trust on first use is allowed."""

    def __init__(self, accept_new: bool, record_to: Path):
        self.accept_new = accept_new
        self.record_to = record_to

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if not self.accept_new:
            raise HostKeyError(
                f"host key for {hostname} is not known ({key.get_name()} {fingerprint(key)}); "
                f"verify it and add it to {self.record_to}, or pass --accept-new-host-keys to trust it on first use"
            )
        append(self.record_to, hostname, key)


def append(path: Path, hostname: str, key: paramiko.PKey) -> None:
    """Record a key once: under the lock, a line another run (or thread) wrote first is kept,
    so runs that start together leave one line per host, each whole."""
    line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock:  # flock is per open file description; the thread lock covers this process
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with open(fd, "rb", closefd=False) as handle:
                existing = handle.read().decode("utf-8", "replace").splitlines()
            if line.strip() in (entry.strip() for entry in existing):
                return
            data = line.encode()
            if _ends_without_newline(fd):  # a file edited by hand may lack its last newline
                data = b"\n" + data
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


def _ends_without_newline(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def changed_key_error(hostname: str, exc: paramiko.BadHostKeyException) -> HostKeyError:
    return HostKeyError(
        f"host key for {hostname} has CHANGED: known_hosts has {fingerprint(exc.expected_key)}, "
        f"the host offered {exc.key.get_name()} {fingerprint(exc.key)}. Refusing to connect: "
        "this may be a man-in-the-middle; if the host was reinstalled, remove the old key and verify the new one"
    )
