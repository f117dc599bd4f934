#!/usr/bin/env python3
"""Write gpuconf/facts/xid_nvlink5_decode.csv from gpud's generated copy of NVIDIA's Xid catalog.

NVIDIA publishes the per-line decode of the NVLink5 Xids 144-150 as the sheet "XID 144-150 Decode"
of its Xid catalog spreadsheet (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html,
Xid-Catalog.xlsx). gpud (github.com/leptonai/gpud, Apache-2.0) generates Go from that sheet
(components/accelerator/nvidia/xid/catalog_generated.go, `nvlinkRules`); this script turns those rows
into gpuconf's CSV, one row per sheet row, values as the sheet gives them, and adds gpuconf's reading of
the sheet's recovery bucket (severity, action: see RESOLUTIONS). Run it again when the catalog moves:

    git -C GPUD show COMMIT:components/accelerator/nvidia/xid/catalog_generated.go > /tmp/catalog.go
    python3 scripts/xid_decode_from_gpud.py /tmp/catalog.go COMMIT > gpuconf/facts/xid_nvlink5_decode.csv
"""
from __future__ import annotations

import csv
import re
import sys

# the sheet's "Resolution Bucket (Data Center Recovery Action)" -> gpuconf's severity and action
RESOLUTIONS = {
    "IGNORE": ("info", "none"),
    "RESET_GPU": ("fail", "reset_gpu"),
    # "evaluate the Xid 154 that follows": the driver's recovery action decides (the Xid 154 line,
    # nvidia-smi's gpu_recovery_action); the line itself warns
    "XID_154_EVAL": ("warn", "none"),
}
FIELDS = ("xid", "unit", "intrinfo_v1", "intrinfo_v2", "error_status", "fatality", "resolution", "action2",
          "investigatory", "hw_sw", "effect", "severity", "action", "source")
_ROW = re.compile(r"\{Xid: (\d+), (.*?)\},?\s*$")
_FIELD = re.compile(r'(\w+): ("(?:[^"\\]|\\.)*"|0x[0-9a-fA-F]+)')


def _text(value: str) -> str:
    return value[1:-1].replace("\\n", " ").replace('\\"', '"').replace("\\\\", "\\").strip() \
        if value.startswith('"') else value


def rows(go_source: str, commit: str) -> list[dict[str, str]]:
    header = go_source[:go_source.index("package")]
    generated = re.search(r"Generated at (\S+?)\.?\s", header)
    block = go_source[go_source.index("var nvlinkRules"):]
    out = []
    for index, line in enumerate(m for m in (_ROW.match(raw.strip()) for raw in block.splitlines()) if m):
        values = {key: _text(value) for key, value in _FIELD.findall(line.group(2))}
        severity, action = RESOLUTIONS[values["Resolution"]]
        out.append({
            "xid": line.group(1), "unit": values["Unit"], "intrinfo_v1": values["IntrinfoPatternV1"],
            "intrinfo_v2": values["IntrinfoPatternV2"], "error_status": f"0x{int(values['ErrorStatus'], 16):08x}",
            "fatality": values["Severity"], "resolution": values["Resolution"], "action2": values.get("Action2", ""),
            "investigatory": values["Investigatory"], "hw_sw": values["HwSw"], "effect": values["LocalRemote"],
            "severity": severity, "action": action,
            "source": f"NVIDIA Xid catalog, sheet XID 144-150 Decode (generated {generated.group(1) if generated else '?'}"
                      f") via leptonai/gpud@{commit[:7]} catalog_generated.go nvlinkRules[{index}]",
        })
    return out


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as handle:
        table = rows(handle.read(), sys.argv[2])
    writer = csv.DictWriter(sys.stdout, FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
