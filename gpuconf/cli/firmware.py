"""`gpuconf firmware -i INV [--limit PATTERN] [--format json]`: read every node's BMC over
Redfish, from this machine, in parallel (`--forks`), and print the fleet table
(gpuconf/bmc/fleet.py). Exit 0 when every BMC was read and every component runs one version
across the nodes, 2 when some differ, 8 when a BMC could not be read (or a host names none)."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from gpuconf.bmc.client import BmcEndpoint, BmcError
from gpuconf.bmc.fleet import as_json, fleet_rows, render
from gpuconf.bmc.read import read_inventory
from gpuconf.cli.config import load_config
from gpuconf.cli.load import inventory_spec, project_dirs, unlock_vaults
from gpuconf.cli.options import Sources
from gpuconf.engine.options import FORKS
from gpuconf.errors import UsageError
from gpuconf.facts.redfish import BmcInventory, PayloadError
from gpuconf.inventory.hosts import load_inventory
from gpuconf.inventory.patterns import narrow
from gpuconf.results import EXIT_DRIFT, EXIT_UNREACHABLE


def run(sources: Sources, forks: int | None = None, json_output: bool = False) -> int:
    config = load_config()
    if not (sources.inventory or config.inventory):
        raise UsageError("gpuconf firmware -i INVENTORY [--limit PATTERN]")
    unlock_vaults(sources.vault, config)
    inventory = narrow(load_inventory(inventory_spec(sources, config), project_dirs(None)), sources.limit)
    hosts = sorted(inventory.hosts)
    found: dict[str, BmcInventory] = {}
    problems: dict[str, str] = {}

    def one(host: str) -> None:
        try:
            endpoint = BmcEndpoint.from_vars(host, inventory.host_vars(host))
            if endpoint is None:
                problems[host] = "no bmc_address in the inventory"
                return
            found[host] = read_inventory(endpoint)
        except (BmcError, PayloadError) as exc:
            problems[host] = str(exc)

    with ThreadPoolExecutor(max_workers=max(1, min(forks or config.forks or FORKS, len(hosts) or 1))) as pool:
        list(pool.map(one, hosts))
    rows = fleet_rows(found)
    if json_output:
        print(json.dumps(as_json(rows, problems), indent=2))
    else:
        print(render(rows, problems, len(hosts)))
    return (EXIT_DRIFT if any(row.differ for row in rows) else 0) | (EXIT_UNREACHABLE if problems else 0)
