"""`make fuzz`: the suite's fuzz cases at length, counted.

    python bench/fuzz.py [--cases 10000] [--workers 2] [--seed N]

Random, unlike the suite: the run draws a seed (or takes --seed / FUZZ_SEED to replay one)
and prints it first; worker i runs hypothesis with seed+i over the same strategy as
tests/fuzz/test_fuzz_cli.py, recording problems instead of stopping at the first. Every input
that shows a problem is printed and stored in the corpus (tests/fuzz/found/), which the suite
replays from then on. The run ends with the figures: cases run, calls made, exit codes seen,
and tracebacks (and other problems) found. Exit status 1 when any problem was found.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def worker(args: tuple[int, int, int]) -> dict:
    from hypothesis import HealthCheck, given, seed, settings

    from tests.fuzz.corpus import cases
    from tests.fuzz.found import store
    from tests.fuzz.harness import closed_port, describe, run_case

    index, count, base_seed = args
    port = closed_port()
    tally = {"cases": 0, "calls": 0, "codes": collections.Counter(), "problems": []}
    root = Path(tempfile.mkdtemp(prefix=f"gpuconf-fuzz-{index}-")) / "p"

    @seed(base_seed + index)
    @settings(max_examples=count, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=cases())
    def one(case):
        tally["cases"] += 1
        for outcome in run_case(case, root, port):
            tally["calls"] += 1
            tally["codes"][f"{outcome.verb} {outcome.code}"] += 1
            if outcome.problem:
                detail = describe(case, outcome)
                stored = store(case, outcome.problem, detail, base_seed + index)
                tally["problems"].append({"problem": outcome.problem, "detail": detail, "stored": str(stored),
                                          "first_line": (outcome.stderr.strip().splitlines() or [""])[0],
                                          "verb": outcome.verb})

    one()
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=max(1, min(4, multiprocessing.cpu_count())))
    parser.add_argument("--report", help="write the figures and every problem as JSON here")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED") or random.randrange(2**32)),
                        help="replay a run: its seed (default: drawn at random, or FUZZ_SEED)")
    args = parser.parse_args()
    print(f"fuzz: seed {args.seed} (replay with FUZZ_SEED={args.seed}), {args.cases} cases, {args.workers} workers",
          flush=True)
    started = time.monotonic()
    share = [args.cases // args.workers + (1 if i < args.cases % args.workers else 0) for i in range(args.workers)]
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        tallies = pool.map(worker, [(i, n, args.seed) for i, n in enumerate(share)])
    codes: collections.Counter = collections.Counter()
    problems = []
    for tally in tallies:
        codes.update(tally["codes"])
        problems += tally["problems"]
    cases, calls = sum(t["cases"] for t in tallies), sum(t["calls"] for t in tallies)
    kinds = collections.Counter(p["problem"] for p in problems)
    tracebacks = kinds.get("a Python traceback", 0)
    for problem in problems:
        print(problem["detail"], f"\nstored in {problem['stored']}\n", "=" * 72)
    print(f"fuzz: {cases} cases, {calls} CLI calls (validate, check, apply) in {time.monotonic() - started:.0f} s")
    print("fuzz: exit codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items())))
    print(f"fuzz: tracebacks found: {tracebacks}; other problems: {len(problems) - tracebacks}"
          + (f" ({dict(kinds)})" if problems else ""))
    if args.report:
        Path(args.report).write_text(json.dumps({"cases": cases, "calls": calls, "codes": dict(codes),
                                                 "tracebacks": tracebacks, "problems": problems}, indent=2))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
