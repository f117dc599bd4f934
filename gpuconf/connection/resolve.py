"""How every verb reaches a host, decided in one place (as Nornir's `Host.get_connection`): the
host's inventory variables (Ansible's names too) over its ssh_config entry, the project's default
`become` below them, and what the command line says above them: `-c`, the connection variables of
`-e` (which win, as Ansible's extra vars do), the become password (-K or GPUCONF_BECOME_PASSWORD)
and --accept-new-host-keys. check, apply, run, facts, collect and remediate (its checks, applies,
serial read, GPU reset and evidence bundle) all connect through `connect`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from gpuconf.connection.base import ALIASES, CONNECTION_VARS, Connection, ConnectionSpec
from gpuconf.connection.local import LocalConnection
from gpuconf.connection.ssh import SSHConnection
from gpuconf.inventory.hosts import Inventory

ConnectionKind = Literal["ssh", "local"]


@dataclass(frozen=True)
class Reach:
    """What a command says about reaching every host, beside each host's own variables."""

    connection: ConnectionKind | None = None  # -c
    extra_vars: Mapping[str, object] = field(default_factory=dict)  # -e: its connection variables win
    become: bool | None = None  # the project configuration's default, below the inventory's
    become_password: str | None = field(default=None, repr=False)  # -K or GPUCONF_BECOME_PASSWORD
    accept_new_host_keys: bool = False
    # the host's variables as the run sees them: its connection variables rendered where they are
    # templates (engine/variables.py connection_variables); None: the inventory's, as they are
    variables: Callable[[Inventory, str], Mapping[str, object]] | None = field(default=None, compare=False)

    def overrides(self) -> dict[str, object]:
        """The connection variables above the inventory's."""
        found: dict[str, object] = {ALIASES.get(k, k): v for k, v in self.extra_vars.items()
                                    if ALIASES.get(k, k) in CONNECTION_VARS}
        if self.connection:
            found["connection"] = self.connection
        if self.become_password is not None:
            found["become_password"] = self.become_password
        return found


def host_spec(inventory: Inventory, host: str, reach: Reach) -> ConnectionSpec:
    """How to reach the inventory host `host`."""
    host_vars = reach.variables(inventory, host) if reach.variables else inventory.host_vars(host)
    defaults = {} if reach.become is None else {"become": reach.become}
    return ConnectionSpec.from_vars(host, {**defaults, **host_vars}, reach.overrides())


def local_spec(host: str, reach: Reach) -> ConnectionSpec:
    """This machine under the name `host` (delegate_to: localhost), with the run's become."""
    values: dict[str, object] = {"host": host, "connection": "local"}
    if reach.become is not None:
        values["become"] = reach.become
    if reach.become_password is not None:
        values["become_password"] = reach.become_password
    return ConnectionSpec.model_validate(values)


def open_connection(spec: ConnectionSpec, reach: Reach) -> Connection:
    """A new, unopened connection for `spec` (it opens on its first call)."""
    if spec.connection == "local":
        return LocalConnection(spec)
    return SSHConnection(spec, accept_new_host_keys=reach.accept_new_host_keys)


def connect(inventory: Inventory, host: str, reach: Reach) -> Connection:
    """A new, unopened connection to an inventory host, as every verb makes it."""
    return open_connection(host_spec(inventory, host, reach), reach)
