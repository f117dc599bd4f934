"""`gpuconf inventory --graph` and `--list`, in the shapes ansible-inventory prints, so that the
scripts and habits built on those keep working: the group tree, and the JSON that a dynamic
inventory script prints (groups with `hosts` and `children`, `_meta.hostvars`)."""
from __future__ import annotations

from gpuconf.files.values import JSONValue
from gpuconf.inventory.hosts import Inventory


def _children(inventory: Inventory, name: str) -> list[str]:
    """A group's child groups in definition order; `ungrouped` first under `all`, as Ansible has it."""
    children = inventory.groups[name].children
    if name == "all" and "ungrouped" in children:
        return ["ungrouped", *(child for child in children if child != "ungrouped")]
    return list(children)


def _hosts(inventory: Inventory, name: str) -> list[str]:
    """A group's own hosts; `ungrouped` holds every host of no other group (gpuconf files the hosts
    listed under `all:` in `all`, Ansible in `ungrouped`)."""
    if name == "ungrouped":
        return [host for host, entry in inventory.hosts.items() if not entry.groups - {"all", "ungrouped"}]
    return list(inventory.groups[name].hosts)


def graph(inventory: Inventory) -> str:
    """ansible-inventory --graph: `@all:`, each group `|--@name:` one level in, its hosts below it."""
    lines: list[str] = []

    def group(name: str, depth: int) -> None:
        lines.append(_indent(f"@{name}:", depth))
        for child in _children(inventory, name):
            group(child, depth + 1)
        if name != "all":  # all's hosts are its groups' (ungrouped's for the rest)
            lines.extend(_indent(host, depth + 1) for host in _hosts(inventory, name))

    group("all", 0)
    return "\n".join(lines)


def _indent(name: str, depth: int) -> str:
    return "  |" * depth + "--" + name if depth else name


def listing(inventory: Inventory) -> dict[str, JSONValue]:
    """ansible-inventory --list: each group with its `hosts` and `children` (empty keys left out,
    and a group left with nothing), then `_meta.hostvars`: each host's merged variables."""
    data: dict[str, dict[str, list[str]]] = {}

    def group(name: str) -> None:
        body: dict[str, list[str]] = {}
        if name != "all" and _hosts(inventory, name):
            body["hosts"] = _hosts(inventory, name)
        children = _children(inventory, name)
        if children:
            body["children"] = children
        data[name] = body
        for child in children:
            if child not in data:
                group(child)

    group("all")
    listed: dict[str, JSONValue] = {name: body for name, body in data.items() if body}
    listed["_meta"] = {"hostvars": {host: inventory.host_vars(host) for host in inventory.hosts
                                    if inventory.host_vars(host)}}
    return listed
