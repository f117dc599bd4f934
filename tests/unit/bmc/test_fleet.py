"""The fleet table of `gpuconf firmware -i INV`: the version most nodes run, how many, and the
nodes that differ; a BMC that could not be read is named after the table."""
from __future__ import annotations

from gpuconf.bmc.fleet import as_json, fleet_rows, render
from gpuconf.facts.firmware import FirmwareComponent
from gpuconf.facts.redfish import BmcInventory


def inventory_of(versions: dict[str, str]) -> BmcInventory:
    return BmcInventory(tuple(FirmwareComponent(n, v, "redfish") for n, v in versions.items()), None, None)


def test_the_fleet_table_names_the_common_version_and_the_nodes_that_differ():
    found = {f"n{i}": inventory_of({"HGX_FW_BMC_0": "HGX-22.10-1-rc34", "HGX_FW_GPU_SXM_1": "96.00.74.00.0D"})
             for i in range(1, 4)}
    found["n2"] = inventory_of({"HGX_FW_BMC_0": "HGX-22.10-1-rc57", "HGX_FW_GPU_SXM_1": "96.00.74.00.0D"})
    rows = fleet_rows(found)
    assert [(r.component, r.version, r.nodes, r.listed, r.differ) for r in rows] == [
        ("HGX_FW_BMC_0", "HGX-22.10-1-rc34", 2, 3, (("n2", "HGX-22.10-1-rc57"),)),
        ("HGX_FW_GPU_SXM_1", "96.00.74.00.0D", 3, 3, ())]
    text = render(rows, {"n4": "https://bmc4: cannot log in: ..."}, 4).splitlines()
    assert text[0].split() == ["COMPONENT", "VERSION", "NODES", "DIFFER"]
    assert text[1].split() == ["HGX_FW_BMC_0", "HGX-22.10-1-rc34", "2/3", "n2", "at", "HGX-22.10-1-rc57"]
    assert text[-2] == "3 of 4 BMC(s) read; 2 component(s), 1 with differing versions"
    assert text[-1] == "n4: https://bmc4: cannot log in: ..."
    tie = fleet_rows({"a": inventory_of({"BMC": "1.2"}), "b": inventory_of({"BMC": "1.10"})})
    assert (tie[0].version, tie[0].differ) == ("1.10", (("a", "1.2"),))   # a tie: the newer is the row's
    assert as_json(rows, {})["components"][0]["differ"] == [{"host": "n2", "version": "HGX-22.10-1-rc57"}]
