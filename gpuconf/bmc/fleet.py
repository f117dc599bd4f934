"""`gpuconf firmware -i INV`: the fleet's firmware as one table, from each node's BMC inventory.

One row per component: the version most nodes run, how many of the nodes that list the
component run it, and the nodes that differ with their versions. A node whose BMC could not be
read is listed after the table with the reason; it is in no count.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpuconf.facts.firmware import compare_versions
from gpuconf.facts.redfish import BmcInventory
from gpuconf.files.values import JSONValue


@dataclass(frozen=True)
class Row:
    component: str
    version: str            # the version most nodes run (the newest of a tie)
    nodes: int              # how many run it
    listed: int             # how many nodes list the component at all
    differ: tuple[tuple[str, str], ...]   # (node, its version), the others


def _most(counts: Counter[str]) -> str:
    def key(version: str) -> tuple[int, int]:
        newer = sum(1 for other in counts if compare_versions(version, other) > 0)
        return counts[version], newer
    return max(counts, key=key)


def fleet_rows(found: dict[str, BmcInventory]) -> list[Row]:
    """The table's rows, in the order the first node's BMC lists its components (then any other)."""
    order: dict[str, None] = {}
    versions: dict[str, dict[str, str]] = {}
    for host in sorted(found):
        for component in found[host].components:
            order.setdefault(component.name, None)
            versions.setdefault(component.name, {})[host] = component.version or "(none)"
    rows = []
    for name in order:
        by_host = versions[name]
        common = _most(Counter(by_host.values()))
        differ = tuple((host, version) for host, version in sorted(by_host.items()) if version != common)
        rows.append(Row(name, common, len(by_host) - len(differ), len(by_host), differ))
    return rows


def render(rows: list[Row], problems: dict[str, str], nodes: int) -> str:
    """The table as text: COMPONENT, VERSION, NODES (`7/8`), DIFFER (`node-3 at 1.2`)."""
    table = [("COMPONENT", "VERSION", "NODES", "DIFFER")]
    for row in rows:
        differ = ", ".join(f"{host} at {version}" for host, version in row.differ) or "-"
        table.append((row.component, row.version, f"{row.nodes}/{row.listed}", differ))
    widths = [max(len(line[i]) for line in table) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(widths[i]) for i, cell in enumerate(line[:3])), line[3]]).rstrip()
             for line in table]
    read = nodes - len(problems)
    differing = sum(1 for row in rows if row.differ)
    lines.append(f"{read} of {nodes} BMC(s) read; {len(rows)} component(s), {differing} with differing versions")
    lines += [f"{host}: {why}" for host, why in sorted(problems.items())]
    return "\n".join(lines)


def as_json(rows: list[Row], problems: dict[str, str]) -> dict[str, JSONValue]:
    return {"components": [{"component": r.component, "version": r.version, "nodes": r.nodes, "listed": r.listed,
                            "differ": [{"host": h, "version": v} for h, v in r.differ]} for r in rows],
            "unread": [{"host": h, "error": why} for h, why in sorted(problems.items())]}
