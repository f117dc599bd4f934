"""The verdict table of docs/health.md, rendered from the vendor tables beside the parsers.

Each Xid and SXid class (the codes that share NVIDIA's resolution, gpuconf's severity and action, and
their source), each row of NVIDIA's 144-150 decode, and what gpuconf does for each action
(``recovery_actions.csv``). The doc holds the rendering between two markers and a test compares
them, so the doc cannot drift from the data: ``python -m gpuconf.facts.verdict_table`` prints it.
"""
from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from gpuconf.facts.common import packaged_table
from gpuconf.facts.sxid import sxid_catalog
from gpuconf.facts.xid import RECOVERY_VALUES, xid_catalog
from gpuconf.facts.xid_decode import decode_table

BEGIN, END = "<!-- verdict-table:begin (python -m gpuconf.facts.verdict_table) -->", "<!-- verdict-table:end -->"
SEVERITY = {"fail": "failure", "warn": "warning", "info": "ok (info)"}
# NVML's nvmlDeviceGpuRecoveryAction_t names (reference section 9), as Xid 154 and nvidia-smi print them
RECOVERY_NAMES = {0: "None", 1: "GPU Reset", 2: "Node Reboot", 3: "Drain P2P", 4: "Drain and Reset",
                  5: "Recover IMEX domain", 6: "Bus Reset", 7: "System Reboot"}


RECOVERY_LINE = ("the recovery action the line names decides (table below), for its GPU and for a 144-150 line of "
                 "that GPU it follows")


def recovery_values() -> list[str]:
    does = _does()
    rows = ["| recovery action (NVML value) | action | what gpuconf does |", "|---|---|---|"]
    for value, action in sorted(RECOVERY_VALUES.items()):
        rows.append(f"| {value} ({RECOVERY_NAMES.get(value, '?')}) | {action} | {_cell(does.get(action, action))} |")
    return rows


def _does() -> dict[str, str]:
    table = {row["action"]: row["what_gpuconf_does"] for row in packaged_table("recovery_actions.csv")}
    table["none"] = "nothing: the finding is reported"
    return table


def codes(numbers: Iterable[int]) -> str:
    """``1-7, 9, 10, 12`` for a sorted list of codes."""
    ranges: list[str] = []
    for _, run in groupby(enumerate(sorted(numbers)), lambda item: item[1] - item[0]):
        values = [value for _, value in run]
        ranges.append(str(values[0]) if len(values) == 1 else
                      f"{values[0]}, {values[1]}" if len(values) == 2 else f"{values[0]}-{values[-1]}")
    return ", ".join(ranges)


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split()) or "-"


def xid_classes() -> list[str]:
    does = _does()
    rows = ["| Xid | NVIDIA's resolution | severity | action | what gpuconf does | source |",
            "|---|---|---|---|---|---|"]
    classes: dict[tuple[str, str, str, str], list[int]] = {}
    for entry in xid_catalog().values():
        classes.setdefault((entry.vendor_resolution, entry.severity, entry.action, entry.source), []).append(entry.code)
    for (resolution, severity, action, source), numbers in sorted(classes.items(), key=lambda item: min(item[1])):
        what = "NVIDIA's per-line decode decides (below); a line it does not cover: " + does[action] \
            if resolution == "WORKFLOW_NVLINK5_ERR" else RECOVERY_LINE if resolution == "XID_154" \
            else does.get(action, action)
        rows.append(f"| {codes(numbers)} | {_cell(resolution)} | {SEVERITY[severity]} | {action} | {_cell(what)} | "
                    f"{_cell(source)} |")
    return rows


def decode_rows() -> list[str]:
    does = _does()
    rows = ["| Xid | unit | intrInfo (before R575 / R575 and later) | errorStatus | fatality | NVIDIA's resolution "
            "| severity | action | what gpuconf does | rows |", "|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[int, str, str, str, str, str, str, str], list[tuple[int, int]]] = {}
    for row in decode_table():
        key = (row.xid, row.unit, f"`{row.intrinfo_v1}` / `{row.intrinfo_v2}`", row.fatality, row.resolution,
               row.severity, row.action, row.action2)
        groups.setdefault(key, []).append((row.number, row.error_status))
    for (xid, unit, pattern, fatality, resolution, severity, action, action2), numbered in groups.items():
        what = "the Xid 154 that follows (or nvidia-smi's gpu_recovery_action) decides; the line warns" \
            if resolution == "XID_154_EVAL" else does[action]
        if action2:
            what += f" (the sheet's second action for this starred row: {action2})"
        statuses = ", ".join(f"0x{status:08x}" for _, status in numbered)
        rows.append(f"| {xid} | {_cell(unit)} | {pattern} | {statuses} | {_cell(fatality)} | {resolution} | "
                    f"{SEVERITY[severity]} | {action} | {_cell(what)} | {codes(n for n, _ in numbered)} |")
    return rows


def sxid_classes() -> list[str]:
    does = _does()
    rows = ["| SXid | section of the guide | the guide's recovery | severity | action | what gpuconf does |",
            "|---|---|---|---|---|---|"]
    classes: dict[tuple[str, str, str, str], list[int]] = {}
    for entry in sxid_catalog().values():
        classes.setdefault((entry.category, entry.guide_recovery, entry.severity, entry.action), []).append(entry.code)
    for (category, recovery, severity, action), numbers in sorted(classes.items(), key=lambda item: min(item[1])):
        rows.append(f"| {codes(numbers)} | {category.replace('_', ' ')} | {_cell(recovery)} | {SEVERITY[severity]} | "
                    f"{action} | {_cell(does.get(action, action))} |")
    return rows


def render() -> str:
    lines = [BEGIN, "", "### Xid classes (`gpuconf/facts/xid_catalog.csv`)", "", *xid_classes(), "",
             "### NVLink5 Xid 144-150, per line (`gpuconf/facts/xid_nvlink5_decode.csv`, NVIDIA's sheet "
             "\"XID 144-150 Decode\")", "", *decode_rows(), "",
             "### NVSwitch SXid classes (`gpuconf/facts/sxid_catalog.csv`, Fabric Manager user guide appendix D)",
             "", *sxid_classes(), "",
             "### The driver's recovery action (Xid 154, nvidia-smi's `gpu_recovery_action`)", "",
             *recovery_values(), "", END]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
