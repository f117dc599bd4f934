"""`make bench-gate`: what `gpuconf gate` costs a job, on a lab node with the driver loaded.

    .venv/bin/python bench/gate.py [--runs 200] [--lab benchgate] [--keep]

Starts a lab of one T4 node (taken down at the end unless --keep), installs and loads the driver
(tests/gate/gate-driver.yml), then, inside the node, runs `gpuconf gate` --runs times one after the
other, as slurmd runs a Prolog, and the same number of bare `python3 -c pass` (the interpreter's
start, the floor no Python gate can go under) and `nvidia-smi --query-gpu` (the one query the gate
makes). Prints each one's median and 99th percentile, and the gate's median as a ratio to the floor;
the raw timings go to bench/results/gate.json. No figure is asserted anywhere: docs/slurm.md quotes them.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "lab"))

from gpuconf_lab.fleet import Lab  # noqa: E402

NODE = "t4-01"
# runs inside the node (it sees the machine's /, so this checkout's interpreter): times each command
TIMER = """
import json, subprocess, sys, time
runs, commands = int(sys.argv[1]), json.loads(sys.argv[2])
out = {}
for name, argv in commands.items():
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    out[name] = times
print(json.dumps(out))
"""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--lab", default="benchgate")
    parser.add_argument("--keep", action="store_true", help="leave the lab up")
    args = parser.parse_args()
    lab = Lab(args.lab, boot_delay=0.5)
    if lab.exists():
        lab.down()
    lab.up({"t4": 1})
    try:
        converge = subprocess.run([sys.executable, "-m", "gpuconf", "apply", str(ROOT / "tests/gate/gate-driver.yml"),
                                   "-i", str(lab.inventory_path)], cwd=ROOT, capture_output=True, text=True)
        if converge.returncode != 0:
            print(converge.stdout[-2000:] + converge.stderr[-2000:], file=sys.stderr)
            return 1
        gpuconf = str(Path(sys.executable).with_name("gpuconf"))
        fields = "index,pci.bus_id,persistence_mode,retired_pages.pending,gpu_recovery_action"
        commands = {"python3 -c pass": [sys.executable, "-c", "pass"],
                    "nvidia-smi --query-gpu": ["nvidia-smi", f"--query-gpu={fields}", "--format=csv"],
                    "gpuconf gate": [gpuconf, "gate"]}
        rc, out, err = lab.exec(NODE, [sys.executable, "-c", TIMER, str(args.runs), json.dumps(commands)],
                                timeout=None)
        if rc != 0:
            print(err, file=sys.stderr)
            return 1
        timings = json.loads(out)
    finally:
        if not args.keep:
            lab.down()
    floor = statistics.median(timings["python3 -c pass"])
    print(f"{args.runs} runs each, one after the other, on lab node {NODE} (T4, driver 580.95.05):")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"  {name:<24} median {median * 1000:7.1f} ms   p99 {percentile(values, 0.99) * 1000:7.1f} ms   "
              f"{median / floor:5.1f}x the interpreter's start")
    (BENCH / "results").mkdir(exist_ok=True)
    (BENCH / "results" / "gate.json").write_text(json.dumps({"when": time.time(), "runs": args.runs,
                                                            "timings": timings}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
