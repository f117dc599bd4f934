"""The one variable layering, used by `validate`, `check`, `apply` and `gpuconf inventory --host`.

Highest precedence first (docs/variables.md has the table):

    magic variables (inventory_hostname, group_names, groups, hostvars, play_hosts, facts, ...)
    extra vars (-e)
    a loop's item (`item`, or loop_control.loop_var)
    registered results and set_fact
    task vars
    role parameters
    play vars and vars_files
    host vars < child group vars < parent group vars < `all` group vars  (inventory.host_vars)
    role defaults
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpuconf.inventory import Inventory
from gpuconf.playbook.models import Play, TaskDef
from gpuconf.templating import Vars, Verbatim


class LazyGroups(Mapping[str, list[str]]):
    """`groups`: every group's hosts, computed when a template asks for one."""

    def __init__(self, inventory: Inventory):
        self.inventory = inventory
        self.cache: dict[str, list[str]] = {}

    def __getitem__(self, name: str) -> list[str]:
        if name not in self.inventory.groups:
            raise KeyError(name)
        if name not in self.cache:
            self.cache[name] = self.inventory.group_members(name)
        return self.cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.inventory.groups)

    def __len__(self) -> int:
        return len(self.inventory.groups)

    def __repr__(self) -> str:  # `{{ groups }}` in a string shows the groups, not an object
        return repr(dict(self))


class LazyHostvars(Mapping[str, Any]):
    """`hostvars`: every host's inventory variables, merged when a template asks for one."""

    def __init__(self, inventory: Inventory):
        self.inventory = inventory

    def __getitem__(self, name: str) -> dict[str, Any]:
        if name not in self.inventory.hosts:
            raise KeyError(name)
        return self.inventory.host_vars(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.inventory.hosts)

    def __len__(self) -> int:
        return len(self.inventory.hosts)

    def __repr__(self) -> str:
        return repr(dict(self))


def group_names(inventory: Inventory, host: str) -> list[str]:
    """Ansible's `group_names`: the host's groups, sorted, without `all` and `ungrouped`."""
    return sorted(g for g in inventory.host_groups(host) if g not in ("all", "ungrouped"))


def magic_variables(inventory: Inventory, host: str, play_hosts: list[str], check_mode: bool, facts: Any,
                    shared: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a task on `host` sees besides the variables it was given. `shared` holds the
    run-wide lazy `groups`/`hostvars`, so that every host's tasks use one copy."""
    shared = shared if shared is not None else {"groups": LazyGroups(inventory), "hostvars": LazyHostvars(inventory)}
    return {
        "inventory_hostname": host, "inventory_hostname_short": host.split(".", 1)[0],
        "group_names": group_names(inventory, host), "groups": shared["groups"], "hostvars": shared["hostvars"],
        "play_hosts": play_hosts, "ansible_play_hosts": play_hosts, "ansible_play_batch": play_hosts,
        "ansible_check_mode": check_mode, "facts": facts, "ansible_facts": facts,
    }


def task_variables(magic: Verbatim, extra_vars: Mapping[str, Any], registered: Mapping[str, Any],
                   task: TaskDef, play: Play, host_vars: Mapping[str, Any]) -> Vars:
    """The layers of one task on one host, highest precedence first. `magic` is verbatim (never
    rendered as a template): build it once per host and facts, not per task."""
    item = Verbatim(task.item_vars) if task.item_vars else {}  # a loop's item: from the host or rendered already
    return Vars(magic, extra_vars, item, registered, task.keywords.vars, task.role_params, play.vars, host_vars,
                play.role_defaults)
