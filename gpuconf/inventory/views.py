"""`gpuconf inventory --graph` and `--list`, in the shapes ansible-inventory prints, so that the
scripts and habits built on those keep working: the group tree, and the JSON that a dynamic
inventory script prints (groups with `hosts` and `children`, `_meta.hostvars`)."""
from __future__ import annotations

from gpuconf.files.values import JSONValue
from gpuconf.inventory.hosts import Inventory


def graph(inventory: Inventory) -> str:
    """ansible-inventory --graph: `@all:`, each group `|--@name:` one level in, its hosts below it."""
    lines: list[str] = []

    def group(name: str, depth: int) -> None:
        lines.append(_indent(f"@{name}:", depth))
        for child in inventory.child_groups(name):
            group(child, depth + 1)
        if name != "all":  # all's hosts are its groups' (ungrouped's for the rest)
            lines.extend(_indent(host, depth + 1) for host in inventory.own_hosts(name))

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
        if name != "all" and inventory.own_hosts(name):
            body["hosts"] = inventory.own_hosts(name)
        children = inventory.child_groups(name)
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
