"""DCGM 4 as a lab node has it: ``nv-hostengine`` (the ``nvidia-dcgm`` unit) and ``dcgmi``.

``dcgmi`` talks to a running host engine and fails the way the real one does without it.
Supported: ``discovery -l``, ``dmon -e FIELDS [-c N] [-d MS]``, ``health -c [-j]`` and
``diag -r 1|2|3|4 [-j|--json]``.

The diag JSON has DCGM 4's shape, as NVIDIA documents it in DCGM's own schema
(``testing/python3/dcgm_diag_schema.json``, NVIDIA/DCGM @72fa3fe, 4.6.0): top key ``DCGM
Diagnostic``, per-test ``test_summary`` with the verdict, per-GPU ``results`` with
``entity_group``/``entity_group_id``/``entity_id``/``status`` and ``warnings`` (``error_category``,
``error_id``, ``error_severity``, ``warning``) on a failure, then ``entity_groups`` and
``metadata`` (``version``, ``Driver Version Detected``), written the way
dcgmi's JSON writer lays it out (tabs, ``"key" : value``, as in the real ``health -c -j``
capture in ``fixtures/real/dcgmi``). Faults: ``dcgm-fail TEST GPU`` fails one test on one
GPU; ``dcgmi-hang`` makes every dcgmi block until it is killed. The health watch stays
Healthy whatever the diag says, as DCGM's does (DCGM issue 263).
"""
from __future__ import annotations

import os
import sys
import time

import daemons
import entry
import gpu
import modules
import state

HOSTENGINE = f"{state.RUN}/nv-hostengine.json"
VERSION = "4.7.0"   # the dcgm role's pin (roles/dcgm/defaults/main.yml)
# level -> (category, test) run at that level and below, DCGM 4 names
TESTS = ((1, "Deployment", "software"), (2, "Integration", "pcie"), (2, "Hardware", "memory"),
         (3, "Hardware", "diagnostic"), (3, "Stress", "targeted_stress"), (3, "Stress", "targeted_power"),
         (3, "Stress", "memory_bandwidth"), (4, "Stress", "pulse_test"))
FAILURES = {"software": "Error using CUDA API cudaGetDeviceCount",
            "pcie": "Found 1 PCIe replay errors on GPU {gpu}",
            "memory": "A memory mismatch was detected on GPU {gpu}, but no error was reported by CUDA or NVML.",
            "diagnostic": "Detected 3 nonzero results from SM diagnostic for GPU {gpu}"}
NO_HOST = ("Error: unable to establish a connection to the specified host: localhost\n"
           "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")


def hostengine(args: list[str]) -> int:
    """``nv-hostengine -n``: needs the driver; stays in the foreground (the unit is Type=simple)."""
    if gpu.driver_version() is None:
        sys.stderr.write("Error: Failed to initialize NVML: Driver Not Loaded\n")
        return 1
    state.write_json(HOSTENGINE, {"pid": os.getpid(), "version": VERSION})
    modules.add_user("nvidia", os.getpid())
    daemons._become("nv-hostengine")
    return 0


def running() -> bool:
    info = state.read_json(HOSTENGINE)
    return bool(info) and modules.alive(info.get("pid", 0))


def styled(value, indent: int = 0) -> str:
    """JSON as dcgmi's writer prints it: tabs, ``"key" : value``, a nested object or array
    on the line after its key."""
    pad = "\t" * indent
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            text = styled(item, indent + 1)
            gap = f"\n{pad}\t" if isinstance(item, (dict, list)) and item else ""
            items.append(f'{pad}\t"{key}" : {gap}{text}')
        return "{\n" + ",\n".join(items) + f"\n{pad}}}" if items else "{}"
    if isinstance(value, list):
        items = [f"{pad}\t{styled(item, indent + 1)}" for item in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]" if items else "[]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def _failing() -> dict:
    return gpu.faults().get("dcgm_fail") or {}


def diag_report(level: int) -> dict:
    gpus = gpu.gpus()
    failing = _failing()
    categories: dict[str, list] = {}
    for needs, category, test in TESTS:
        if needs > level:
            continue
        results, worst = [], "Pass"
        for g in gpus:
            result = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": g.index, "status": "Pass"}
            if g.index in failing.get(test, []):
                result["status"] = worst = "Fail"
                result["warnings"] = [{"error_category": 6, "error_id": 28, "error_severity": 2,
                                       "warning": FAILURES.get(test, "Test {test} failed on GPU {gpu}").format(
                                           gpu=g.index, test=test)}]
            results.append(result)
        categories.setdefault(category, []).append({"name": test, "results": results,
                                                    "test_summary": {"status": worst}})
    entities = [{"device_id": f"{g.model.device_id:04X}", "entity_id": g.index, "serial_num": g.serial}
                for g in gpus]
    return {"DCGM Diagnostic": {"test_categories": [{"category": c, "tests": t} for c, t in categories.items()]},
            "entity_groups": [{"entities": entities, "entity_group": "GPU", "entity_group_id": 1}],
            "metadata": {"Driver Version Detected": gpu.driver_version() or "", "version": VERSION}}


def _table(report: dict) -> str:
    border = "+---------------------------+------------------------------------------------+"
    lines = ["Successfully ran diagnostic for group.", border,
             "| Diagnostic                | Result                                         |",
             border.replace("-", "=")]
    for category in report["DCGM Diagnostic"]["test_categories"]:
        lines.append(f"|-----  {category['category']}  ".ljust(28, "-") + "+" + "-" * 48 + "|")
        for test in category["tests"]:
            status = test["test_summary"]["status"]
            bad = [str(r["entity_id"]) for r in test["results"] if r["status"] != "Pass"]
            shown = f"{status} - GPUs: {', '.join(bad)}" if bad else status
            lines.append(f"| {test['name']:<25} | {shown:<46} |")
    lines.append(border)
    return "\n".join(lines) + "\n"


def diag(args: list[str]) -> int:
    level = args[args.index("-r") + 1] if "-r" in args and args.index("-r") + 1 < len(args) else ""
    names = {"quick": "1", "short": "1", "medium": "2", "long": "3", "xlong": "4"}
    level = names.get(level, level)
    if level not in ("1", "2", "3", "4"):
        sys.stdout.write(f"Error: requested test(s) '{level}' not found.\n")
        return 255
    report = diag_report(int(level))
    time.sleep(0.2 * int(level))
    failed = any(t["test_summary"]["status"] == "Fail" for c in report["DCGM Diagnostic"]["test_categories"]
                 for t in c["tests"])
    sys.stdout.write(styled(report) + "\n" if ("-j" in args or "--json" in args) else _table(report))
    return 226 if failed else 0


def health(args: list[str]) -> int:
    if "-c" not in args:
        print("Health monitor systems set successfully.")
        return 0
    if "-j" in args or "--json" in args:
        sys.stdout.write(styled({"body": {"Overall Health": {"value": "Healthy"}},
                                 "header": ["Health Monitor Report"]}) + "\n")
        return 0
    border = "+---------------------------+----------------------------------------------------------+"
    sys.stdout.write(f"{border}\n| Health Monitor Report" + " " * 64 + "|\n" + border.replace("-", "=") + "\n"
                     f"| Overall Health            | Healthy{' ' * 51}|\n{border}\n")
    return 0


def discovery() -> int:
    gpus = gpu.gpus()
    border = "+--------+" + "-" * 70 + "+"
    lines = [f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''} found.", border,
             "| GPU ID | Device Information".ljust(80) + "|", border]
    for g in gpus:
        for first, text in ((str(g.index), f"Name: {g.model.name}"), ("", f"PCI Bus ID: {g.bdf}"),
                            ("", f"Device UUID: {g.uuid}")):
            lines.append(f"| {first:<6} | {text:<68} |")
        lines.append(border)
    lines += ["0 NvSwitches found.", "+-----------+", "| Switch ID |", "+-----------+", "+-----------+"]
    print("\n".join(lines))
    return 0


# dmon's fields: (short name, unit, column width, value of a GPU), as dcgmi prints them
# (fixtures/real/dcgmi/dcgmi-dmon-e-gputl-mcutl-power-tmptr-ecc-fbusd-nautilus-find-string.txt)
DMON = {
    150: ("TMPTR", "C", 13, lambda g: str(g.temperature)),
    155: ("POWER", "W", 18, lambda g: f"{g.power_draw:.3f}"),
    203: ("GPUTL", "", 18, lambda g: str(g.utilization)),
    204: ("MCUTL", "", 18, lambda g: str(g.utilization // 2)),
    252: ("FBUSD", "", 18, lambda g: str(g.memory_used)),
    310: ("ESVTL", "", 13, lambda g: "0"),
    311: ("EDVTL", "", 13, lambda g: str(g.ecc_volatile)),
}


def dmon(args: list[str]) -> int:
    """``dcgmi dmon -e F,F,... [-c COUNT] [-d MS]``: the header, the units, one row per GPU and sample."""
    option = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("-")}
    try:
        fields = [int(f) for f in option.get("-e", "").split(",") if f]
    except ValueError:
        fields = []
    if not fields or any(f not in DMON for f in fields):
        sys.stdout.write("Error: Invalid field ids passed, or none (gpuconf lab knows " +
                         ",".join(map(str, DMON)) + ")\n")
        return 255
    columns = [DMON[f] for f in fields]
    lines = ["#Entity   " + "".join(name.ljust(width) for name, _, width, _ in columns),
             "ID        " + "".join(unit.ljust(width) for _, unit, width, _ in columns)]
    for sample in range(int(option.get("-c", "1"))):
        if sample:
            time.sleep(int(option.get("-d", "1000")) / 1000.0)
        for g in gpu.gpus():
            lines.append(f"GPU {g.index:<6}" + "".join(value(g).ljust(width) for _, _, width, value in columns))
    print("\n".join(lines))
    return 0


def dcgmi(args: list[str]) -> int:
    if gpu.faults().get("dcgmi_hang"):
        while True:       # a wedged host engine: dcgmi never returns, killable by the caller's timeout
            time.sleep(3600)
    if not args or args[0] in ("-h", "--help"):
        print("dcgmi -- Command line interface for DCGM.\n Usage: dcgmi <subsystem>\n"
              "  subsystems: discovery, dmon, health, diag")
        return 0 if args else 255
    if not running():
        sys.stdout.write(NO_HOST)
        return 255
    if args[0] == "discovery" and "-l" in args:
        return discovery()
    if args[0] == "dmon":
        return dmon(args[1:])
    if args[0] == "health":
        return health(args[1:])
    if args[0] == "diag":
        return diag(args[1:])
    sys.stdout.write(f"Error: unknown or unsupported subsystem '{' '.join(args[:2])}' (gpuconf lab)\n")
    return 255


def main(argv: list[str]) -> int:
    if argv and argv[0] == "hostengine":
        return hostengine(argv[1:])
    return dcgmi(argv[1:] if argv and argv[0] == "dcgmi" else argv)


if __name__ == "__main__":
    entry.run(main)
