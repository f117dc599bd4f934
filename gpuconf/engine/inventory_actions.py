"""Ansible's `group_by` and `add_host`: a run's changes to the inventory it holds in memory (never to
its files), seen by the later tasks' `groups` and by the later plays' host patterns. `add_host`
runs once for the batch, as Ansible's does (the loader marks it run_once)."""
from __future__ import annotations

import threading
from typing import Any

from gpuconf.errors import TaskError
from gpuconf.inventory.hosts import Inventory

LOCK = threading.Lock()   # the hosts' threads share the inventory
ADD_HOST_KEYS = ("name", "hostname", "host", "groups", "group", "groupname")


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(item).strip() for item in items if str(item).strip()]


def group_by(inventory: Inventory, host: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    key = str(params.get("key") or params.get("_raw_params") or "").replace(" ", "-")
    if not key:
        raise TaskError("group_by: the 'key' argument is required")
    parents = _names(params.get("parents")) or ["all"]
    with LOCK:
        changed = key not in inventory.groups or host not in inventory.group_members(key)
        for parent in parents:
            inventory.add_group(parent)
            inventory.add_group(key, parent)
        inventory.add_host(host, key)
        inventory.finish()
    return f"added {host} to group {key}", {"add_group": key, "parent_groups": parents, "changed": changed}


def add_host(inventory: Inventory, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name = str(params.get("name") or params.get("hostname") or params.get("host") or "")
    if not name:
        raise TaskError("add_host: the 'name' argument is required")
    host, _, port = name.partition(":") if name.count(":") == 1 else (name, "", "")
    groups = _names(params.get("groups") or params.get("group") or params.get("groupname"))
    variables = {k: v for k, v in params.items() if k not in ADD_HOST_KEYS and k != "_raw_params"}
    if port:
        variables["ansible_port"] = int(port)
    with LOCK:
        for group in groups:
            inventory.add_group(group)
        inventory.add_host(host, groups[0] if groups else "ungrouped", variables)
        for group in groups[1:]:
            inventory.add_host(host, group)
        inventory.finish()
    return f"added host {host}", {"add_host": {"host_name": host, "groups": groups, "host_vars": variables}}
