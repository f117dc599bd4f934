"""`make chaos`: generated fault scenarios for `gpuconf remediate` on a lab with real Slurm (issue 35).

    python bench/chaos.py [--scenarios 200] [--seed N] [--lab NAME] [--keep]

The run draws a seed (or takes --seed / CHAOS_SEED to replay one) and prints it first; scenario i
is tests/remediate/chaos/scenario.py's `generate(seed + i)`. Each runs on two T4 nodes of a lab
with real Slurm (its own, `<GPUCONF_TEST_LAB or chaos>-chaos`, started here, given the driver and
the gate as Slurm's Prolog, and taken down at the end unless --keep or --lab names a running one),
and the five invariants are checked after it (tests/remediate/chaos/invariants.py). A scenario that
breaks one is minimised (one dimension simpler at a time, each run again) and kept in
tests/remediate/chaos/found/, which tests/remediate/test_ladder_lab.py replays. The run ends with
the count, the failures and the time. Exit status 1 when an invariant broke.
"""
from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
NODES = ("t4-01", "t4-02")


def converge(lab) -> None:
    from tests.paths import ROOT

    done = subprocess.run([sys.executable, "-m", "gpuconf", "apply", "tests/gate/gate-driver.yml", "-i",
                           str(lab.inventory_path), "--limit", ",".join(NODES)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"chaos: the driver did not converge on {', '.join(NODES)}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")


def failing(lab, work: Path):
    """Runs a candidate of the minimisation: True when it still breaks an invariant."""
    from tests.remediate.chaos.invariants import violations
    from tests.remediate.chaos.runner import run_scenario

    tries = iter(range(10 ** 6))
    return lambda scenario: bool(violations(run_scenario(lab, scenario, NODES[0], NODES[1],
                                                         work / str(next(tries)))[0]))


def main() -> int:
    from gpuconf_lab.fleet import Lab
    from tests.remediate.chaos.found import keep
    from tests.remediate.chaos.invariants import violations
    from tests.remediate.chaos.runner import gate_prolog, run_scenario
    from tests.remediate.chaos.scenario import generate, minimise

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=int(os.environ.get("CHAOS_SCENARIOS") or 200))
    parser.add_argument("--seed", type=int, default=int(os.environ["CHAOS_SEED"]) if os.environ.get("CHAOS_SEED")
                        else random.SystemRandom().randrange(1, 10 ** 6))
    parser.add_argument("--lab", help="a running lab with Slurm whose t4-01 and t4-02 have the driver")
    parser.add_argument("--keep", action="store_true", help="leave the lab up at the end")
    args = parser.parse_args()
    print(f"chaos: seed {args.seed}, {args.scenarios} scenario(s) (CHAOS_SEED={args.seed} replays them)", flush=True)
    name = args.lab or f"{os.environ.get('GPUCONF_TEST_LAB') or 'chaos'}-chaos"[:31]
    lab = Lab(name, boot_delay=0.5)
    started = time.monotonic()
    if not args.lab:
        if lab.exists():
            lab.down()
        lab.up({"t4": len(NODES)}, slurm=True)
        converge(lab)
        print(f"chaos: lab {name} up, driver on {', '.join(NODES)} ({time.monotonic() - started:.0f} s)", flush=True)
    gate_prolog(lab, list(NODES), True)
    failures = 0
    work = Path(tempfile.mkdtemp(prefix="gpuconf-chaos-"))
    try:
        for index in range(args.scenarios):
            scenario = generate(args.seed + index)
            began = time.monotonic()
            found = violations(run_scenario(lab, scenario, NODES[0], NODES[1], work / str(index))[0])
            print(f"chaos: {index + 1}/{args.scenarios} {'FAIL' if found else 'ok'} "
                  f"({time.monotonic() - began:.0f} s) {scenario.text()}", flush=True)
            for line in found:
                print(f"    {line}", flush=True)
            if found:
                failures += 1
                smallest = minimise(scenario, failing(lab, work / f"{index}-min"))
                print(f"    minimised: {smallest.text()} -> {keep(smallest, found)}", flush=True)
    finally:
        gate_prolog(lab, list(NODES), False)
        if not args.lab and not args.keep:
            lab.down()
    minutes = (time.monotonic() - started) / 60
    print(f"chaos: seed {args.seed}: {args.scenarios} scenario(s), {failures} broke an invariant, "
          f"{minutes:.1f} min", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
