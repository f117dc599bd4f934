"""OpenSSH client configuration (`~/.ssh/config`) as operators have it: Host aliases and
patterns, HostName, User, Port, IdentityFile, ProxyJump and UserKnownHostsFile, read with
paramiko's own parser. Host keys stay strictly checked whatever StrictHostKeyChecking says.
Inventory variables win over it, as Ansible's do over ssh's."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import paramiko

from gpuconf.errors import InventoryError

DEFAULT = "~/.ssh/config"


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


def _parsed(path: Path) -> paramiko.SSHConfig:
    stamp = path.stat().st_mtime_ns
    cached = _CACHE.get(path)
    if cached is None or cached[0] != stamp:
        try:
            cached = (stamp, paramiko.SSHConfig.from_path(str(path)))
        except Exception as exc:  # noqa: BLE001 - paramiko raises several kinds for a bad file
            raise InventoryError(f"cannot read ssh config {path}: {exc}") from None
        _CACHE[path] = cached
    return cached[1]


_CACHE: dict[Path, tuple[int, paramiko.SSHConfig]] = {}


def lookup(alias: str, path: Path | None) -> dict[str, Any]:
    """The connection variables an ssh config gives `alias` (gpuconf's names), empty without one."""
    if path is None:
        return {}
    found = _parsed(path).lookup(alias)
    values: dict[str, Any] = {}
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
    if found.get("proxycommand") and found["proxycommand"].lower() != "none":
        # going direct instead would reach a host the operator routes elsewhere, or fail obscurely
        raise InventoryError(f"{alias}: ssh config ProxyCommand is not supported; use ProxyJump "
                             "(or jump_host in the inventory)")
    jump = found.get("proxyjump")
    if jump and jump.lower() != "none":
        if "," in jump:
            raise InventoryError(f"{alias}: ssh config ProxyJump {jump!r} has several hops; gpuconf follows one "
                                 "(set jump_host for this host, or make the first hop reach the host)")
        values["jump_host"] = jump
    return values
