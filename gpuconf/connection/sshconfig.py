"""OpenSSH client configuration (`~/.ssh/config`) as operators have it, read by paramiko's own
SSHConfig: Host and Match blocks (Match host, user, exec, ...), HostName, User, Port, IdentityFile,
UserKnownHostsFile, ProxyJump (a chain of hops: `ProxyJump a,b`) and ProxyCommand (its %h, %p and
%r expanded by paramiko). Include is OpenSSH's and not paramiko's: its files (globs, relative to
~/.ssh) are read in place here, up to OpenSSH's depth of 16. Host keys stay strictly checked at
every hop, whatever StrictHostKeyChecking says. Inventory variables win over it, as Ansible's do
over ssh's.

Fabric's Connection reads ssh_config the same way (through paramiko), but it sets AutoAddPolicy on
every connection it makes, the gateways it builds from ProxyJump included: gpuconf keeps its own
SSH layer (connection/ssh.py), which checks each hop's key, and reads the config here.
"""
from __future__ import annotations

import glob
import os
import shlex
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import paramiko

from gpuconf.errors import InventoryError

DEFAULT = "~/.ssh/config"
INCLUDE_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH


def config_path(explicit: str | None) -> Path | None:
    """The file to read: the host's `ssh_config_file`, else GPUCONF_SSH_CONFIG, else ~/.ssh/config
    when it exists (an explicit file that does not exist is an error)."""
    chosen = explicit or os.environ.get("GPUCONF_SSH_CONFIG")
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise InventoryError(f"ssh config file {path} does not exist")
        return path
    path = Path(DEFAULT).expanduser()
    return path if path.is_file() else None


@dataclass(frozen=True)
class Hop:
    """One host of a ProxyJump chain as the config resolves it."""

    address: str
    port: int = 22
    user: str | None = None
    ssh_key: str | None = None
    known_hosts_file: str | None = None


def included(path: Path, depth: int = 0) -> tuple[str, list[Path]]:
    """The text of `path` with its Include lines replaced by the files they name, and every file read."""
    if depth > INCLUDE_DEPTH:
        raise InventoryError(f"ssh config {path}: Include nested deeper than {INCLUDE_DEPTH}")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InventoryError(f"cannot read ssh config {path}: {exc.strerror or exc}") from None
    lines, files = [], [path]
    for line in text.splitlines():
        words = line.strip().split(None, 1)
        if len(words) < 2 or words[0].lower() != "include":
            lines.append(line)
            continue
        for pattern in shlex.split(words[1]):
            pattern = os.path.expanduser(pattern)
            if not os.path.isabs(pattern):
                pattern = os.path.join(os.path.expanduser("~/.ssh"), pattern)
            for name in sorted(glob.glob(pattern)):
                inner, more = included(Path(name), depth + 1)
                lines.append(inner)
                files += more
    return "\n".join(lines) + "\n", files


_CACHE: dict[Path, tuple[tuple[tuple[str, int], ...], paramiko.SSHConfig]] = {}
_CACHE_LOCK = threading.Lock()


def _stamps(files: list[Path]) -> tuple[tuple[str, int], ...]:
    return tuple((str(f), f.stat().st_mtime_ns if f.exists() else 0) for f in files)


def _parsed(path: Path) -> paramiko.SSHConfig:
    """The config, parsed once while neither it nor a file it includes changes."""
    with _CACHE_LOCK:
        cached = _CACHE.get(path)
        if cached is not None:
            try:
                if _stamps([Path(name) for name, _ in cached[0]]) == cached[0]:
                    return cached[1]
            except OSError:
                pass
        text, files = included(path)
        try:
            parsed = paramiko.SSHConfig.from_text(text)
        except Exception as exc:  # noqa: BLE001 - paramiko raises several kinds for a bad file
            raise InventoryError(f"cannot read ssh config {path}: {exc}") from None
        _CACHE[path] = (_stamps(files), parsed)
        return parsed


def _options(alias: str, path: Path) -> paramiko.SSHConfigDict:
    try:
        return _parsed(path).lookup(alias)
    except InventoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - a Match exec that cannot run, a bad token
        raise InventoryError(f"ssh config {path}, host {alias}: {exc}") from None


class Configured(TypedDict, total=False):
    """What an ssh config says of a host, by gpuconf's connection variables."""

    address: str
    port: int
    user: str
    ssh_key: str
    known_hosts_file: str
    proxy_command: str
    jump_host: str


def lookup(alias: str, path: Path | None) -> Configured:
    """The connection variables an ssh config gives `alias` (gpuconf's names), empty without one:
    address, port, user, ssh_key, known_hosts_file, jump_host (the ProxyJump chain, as written)
    and proxy_command (expanded)."""
    if path is None:
        return {}
    found = _options(alias, path)
    values = Configured()
    if found.get("hostname") and found["hostname"] != alias:
        values["address"] = found["hostname"]
    if "port" in found:
        values["port"] = int(found["port"])
    if "user" in found:
        values["user"] = found["user"]
    if found.get("identityfile"):
        values["ssh_key"] = os.path.expanduser(found["identityfile"][0])
    if found.get("userknownhostsfile"):
        values["known_hosts_file"] = os.path.expanduser(found["userknownhostsfile"].split()[0])
    command = found.get("proxycommand")
    jump = found.get("proxyjump")
    if command and command.lower() != "none":
        values["proxy_command"] = command   # as ssh: the first of ProxyCommand and ProxyJump wins
    elif jump and jump.lower() != "none":
        values["jump_host"] = jump
    return values


def hops(chain: str, path: Path | None, user: str | None) -> list[Hop]:
    """The hosts of a ProxyJump chain (`[user@]host[:port]`, comma separated), in the order they are
    reached, each named host resolved through the config (its HostName, Port, User, IdentityFile,
    UserKnownHostsFile); `user` is the target's, for a hop that names none."""
    found = []
    for part in (p.strip() for p in chain.split(",")):
        if not part:
            raise InventoryError(f"jump host chain {chain!r} has an empty hop")
        named_user, _, rest = part.rpartition("@")
        host, _, port = rest.partition(":")
        if rest.startswith("["):  # [v6::address]:port
            host, _, port = rest[1:].partition("]")
            port = port.lstrip(":")
        configured = lookup(host, path)
        try:
            number = int(port) if port else int(configured.get("port", 22))
        except ValueError:
            raise InventoryError(f"jump host {part!r}: port {port!r} is not a number") from None
        found.append(Hop(str(configured.get("address", host)), number, named_user or configured.get("user") or user,
                         configured.get("ssh_key"), configured.get("known_hosts_file")))
    return found
