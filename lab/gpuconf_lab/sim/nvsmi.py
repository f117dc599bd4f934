"""``nvidia-smi``: the GPUs of the node's profile, as the loaded driver reports them.

The package shim passes the userspace (NVML) version first, as the real binary has it built
in. With no ``nvidia`` module loaded it fails like the real tool (exit 9); with a module of
another version loaded (a driver upgraded but not yet rebooted) it fails with NVML's
"Driver/library version mismatch" (exit 18). The ``nvidia-smi-hang`` fault makes every
invocation block, as a wedged GPU does, until it is killed.

Supported: the default table, ``-L``, ``-q`` (``-d SECTION``), ``--query-gpu`` with
``--format=csv[,noheader][,nounits]``, ``--query-compute-apps``, ``-i``, ``-pm``, ``-pl``,
``nvlink -s``, ``--version``, ``-r``/``--gpu-reset`` (``nvsmi_reset.py``).
"""
from __future__ import annotations

import re
import sys
import time

import entry
import gpu as gpu_state
import gpu_faults
import nvsmi_query
import nvsmi_report
import nvsmi_reset
import state

NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.\n")
BAD_ARGS = 'Invalid combination of input arguments. Please run \'nvidia-smi -h\' for help.\n'


def parse(argv: list[str]) -> dict:
    opts: dict = {"ids": None, "sub": None}
    i = 0
    while i < len(argv):
        arg = argv[i]
        key, eq, value = arg.partition("=")

        def take(eq: str = eq, value: str = value) -> str:
            nonlocal i
            if eq:
                return value
            i += 1
            return argv[i] if i < len(argv) else ""

        if key in ("-i", "--id"):
            opts["ids"] = take()
        elif key in ("-L", "--list-gpus"):
            opts["list"] = True
        elif key in ("-q", "--query"):
            opts["query"] = True
        elif key in ("-d", "--display"):
            opts["display"] = take()
        elif key in ("-x", "--xml-format"):
            opts["xml"] = True
        elif key == "--query-gpu":
            opts["query_gpu"] = take()
        elif key == "--query-compute-apps":
            opts["query_apps"] = take()
        elif key == "--format":
            opts["format"] = take()
        elif key in ("-pm", "--persistence-mode"):
            opts["pm"] = take()
        elif key in ("-pl", "--power-limit"):
            opts["pl"] = take()
        elif key in ("-s", "--status") and opts["sub"] == "nvlink":
            opts["nvlink_status"] = True
        elif key in ("-r", "--gpu-reset"):
            opts["reset"] = True
        elif key == "--version":
            opts["version"] = True
        elif key in ("-h", "--help"):
            opts["help"] = True
        elif arg == "nvlink" and opts["sub"] is None:
            opts["sub"] = "nvlink"
        else:
            opts["bad"] = arg
        i += 1
    return opts


def select(gpus: list, ids: str | None) -> list | None:
    if ids is None:
        return gpus
    chosen = []
    for wanted in ids.split(","):
        wanted = wanted.strip()
        match = [g for g in gpus if wanted in (str(g.index), g.uuid, g.bdf, g.bdf[4:], g.serial)]
        if not match:
            return None
        chosen += match
    return chosen


def main(argv: list[str]) -> int:
    userspace = argv[0] if argv and re.fullmatch(r"\d+\.\d+(\.\d+)?", argv[0]) else None
    if userspace:
        argv = argv[1:]
    faults = gpu_state.faults()
    if faults.get("nvidia_smi_hang"):
        while True:        # a wedged driver: never returns, killable by the caller's timeout
            time.sleep(3600)
    opts = parse(argv)
    if opts.get("help"):
        print("NVIDIA System Management Interface -- v" + (userspace or "535.104.05"))
        return 0
    driver = gpu_state.driver_version()
    if driver is None:
        sys.stdout.write(NO_DRIVER)
        return 9
    if userspace and userspace != driver:
        short = ".".join(userspace.split(".")[:2])
        sys.stdout.write(f"Failed to initialize NVML: Driver/library version mismatch\nNVML library version: {short}\n")
        return 18
    if opts.get("bad"):
        sys.stdout.write(BAD_ARGS)
        return 2
    if opts.get("version"):
        print(f"NVIDIA-SMI version  : {driver}\nNVML version        : {'.'.join(driver.split('.')[:2])}\n"
              f"DRIVER version      : {driver}\nCUDA Version        : {gpu_state.cuda_version(driver)}")
        return 0
    everything = gpu_state.gpus()
    gpus = select(everything, opts["ids"])
    if gpus is None:
        sys.stdout.write("No devices were found\n")
        return 6
    if opts.get("reset"):
        return nvsmi_reset.reset(gpus)
    if "pm" in opts:
        return persistence(gpus, opts["pm"])
    if "pl" in opts:
        return power_limit(gpus, opts["pl"])
    if opts["sub"] == "nvlink":
        return nvlink(gpus)
    if "query_gpu" in opts or "query_apps" in opts:
        fmt = [part.strip() for part in opts.get("format", "").split(",")]
        if "csv" not in fmt:
            sys.stdout.write('"--format" must be specified with "--query-gpu" (csv)\n')
            return 2
        if "query_apps" in opts:
            names = [n.strip() for n in opts["query_apps"].split(",") if n.strip()]
            units = "nounits" not in fmt
            if "noheader" not in fmt:
                print(", ".join(f"{n} [MiB]" if n in ("used_memory", "used_gpu_memory") and units else
                                ("used_gpu_memory" if n == "used_memory" else n) for n in names))
            for line in compute_apps(gpus, names, units):
                print(line)
            return 0
        names = [n.strip() for n in opts["query_gpu"].split(",") if n.strip()]
        lost = [g for g in gpus if g.lost]
        text, code = nvsmi_query.query([g for g in gpus if not g.lost], names, driver, "noheader" not in fmt,
                                       "nounits" not in fmt)
        if lost:       # the real one reports a GPU that fell off the bus, then the others' rows
            text = "".join(f"Unable to determine the device handle for GPU {g.bdf}: Unknown Error\n" for g in lost) + \
                (text if code == 0 else "")
            code = 15
        if faults.get("truncated"):   # output cut mid-field: the last row stops inside its fifth value
            last = text.rstrip("\n").rsplit("\n", 1)[-1]
            cells = last.split(", ")
            text = text[: text.rindex(last) + len(", ".join(cells[:4])) + 3]
        sys.stdout.write(text)
        return code
    if opts.get("xml"):
        sys.stderr.write("gpuconf lab: nvidia-smi -q -x (XML) is not simulated; use -q or --query-gpu\n")
        return 2
    if opts.get("query"):
        sections = None
        if opts.get("display"):
            sections = {part.strip().upper() for part in opts["display"].split(",")}
        sys.stdout.write(nvsmi_report.query_report(gpus, driver, sections, len(everything)))
        return 0
    if opts.get("list"):
        for g in gpus:
            if g.lost:
                print(f"Unable to determine the device handle for GPU {g.bdf}: Unknown Error")
                continue
            print(f"GPU {g.index}: {g.model.name} (UUID: {g.uuid})")
        return 15 if any(g.lost for g in gpus) else 0
    sys.stdout.write(nvsmi_report.table(gpus, driver))
    return 0


APP_MEMORY_MIB = 1024


def compute_apps(gpus: list, names: list[str], units: bool) -> list[str]:
    """Rows of --query-compute-apps for the ``gpu-process`` fault's processes on ``gpus``."""
    rows = []
    for pid, app in sorted(gpu_faults.apps().items()):
        for g in gpus:
            if g.index not in app["gpus"]:
                continue
            values = {"pid": str(pid), "process_name": app["name"], "name": app["name"], "gpu_uuid": g.uuid,
                      "gpu_bus_id": g.bdf, "used_memory": f"{APP_MEMORY_MIB}{' MiB' if units else ''}"}
            values["used_gpu_memory"] = values["used_memory"]
            rows.append(", ".join(values.get(name, "[N/A]") for name in names))
    return rows


def persistence(gpus: list, value: str) -> int:
    wanted = {"1": True, "enabled": True, "0": False, "disabled": False}.get(value.lower())
    if wanted is None:
        sys.stdout.write(BAD_ARGS)
        return 2
    if not state.is_root():
        print(f"Unable to set persistence mode for GPU {gpus[0].bdf}: Insufficient Permissions\n"
              "Terminating early due to previous errors.")
        return 4
    daemon = _persistenced_running()
    for g in gpus:
        if g.persistence == wanted:
            print(f"Persistence mode is already {'Enabled' if wanted else 'Disabled'} for GPU {g.bdf}.")
        elif wanted:
            print(f"Enabled {'' if daemon else 'Legacy '}persistence mode for GPU {g.bdf}.")
        else:
            print(f"Disabled persistence mode for GPU {g.bdf}.")
    gpu_state.set_persistence([g.index for g in gpus], wanted)
    print("All done.")
    return 0


def _persistenced_running() -> bool:
    info = state.read_json(f"{state.RUN}/persistenced.json")
    import modules

    return bool(info) and modules.alive(info.get("pid", 0))


def power_limit(gpus: list, value: str) -> int:
    try:
        watts = float(value)
    except ValueError:
        sys.stdout.write(BAD_ARGS)
        return 2
    if not state.is_root():
        print(f"Failed to set power management limit for GPU {gpus[0].bdf}: Insufficient Permissions\n"
              "Terminating early due to previous errors.")
        return 4
    for g in gpus:
        m = g.model
        if not m.power_min_w <= watts <= m.power_max_w:
            print(f"Provided power limit {watts:.2f} W is not a valid power limit which should be between "
                  f"{m.power_min_w:.2f} W and {m.power_max_w:.2f} W for GPU {g.bdf}\n"
                  "Terminating early due to previous errors.")
            return 2
    for g in gpus:
        print(f"Power limit for GPU {g.bdf} was set to {watts:.2f} W from {g.power_limit:.2f} W.")
    gpu_state.set_power_limit([g.index for g in gpus], watts)
    print("All done.")
    return 0


def nvlink(gpus: list) -> int:
    for g in gpus:
        links = g.model.nvlinks
        if not links:
            continue
        print(f"GPU {g.index}: {g.model.name} (UUID: {g.uuid})")
        down = set(range(links)) if g.nvlinks_down == ["all"] else {int(x) for x in g.nvlinks_down}
        if len(down) >= links:
            print("NVML: Unable to retrieve NVLink information as all links are inactive")
            continue
        for link in range(links):
            speed = "<inactive>" if link in down else f"{g.model.nvlink_speed} GB/s"
            print(f"\t Link {link}: {speed}")
    return 0


if __name__ == "__main__":
    entry.run(main)
