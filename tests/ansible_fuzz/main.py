"""`make ansible-fuzz`: generated programs through ansible-core 2.19.14 and gpuconf, compared.

    python -m tests.ansible_fuzz.main [--programs 2000] [--seed S] [--jobs 2] [--shrink N]
    python -m tests.ansible_fuzz.main --only 17 --seed S        one program again, shown in full
    python -m tests.ansible_fuzz.main --again 17,40 --seed S    those programs again (no output but the verdicts)
    python -m tests.ansible_fuzz.main --record CASE.yml          the oracle's observation of a corpus case

The seed is printed first (ANSIBLE_FUZZ_SEED replays one). Each divergence is shrunk (shrink.py)
and written to tests/ansible_fuzz/found/ as a corpus case; move it to corpus/ (with its class) to
have `make test` replay it. The run ends with the figures: programs, divergences by kind, refusals
as documented, time; exit status 1 when a divergence was found.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.ansible_fuzz.corpus import FOUND, save_case
from tests.ansible_fuzz.generator import generate
from tests.ansible_fuzz.harness import both, compare, kind, signature, tools
from tests.ansible_fuzz.program import Program
from tests.ansible_fuzz.refusals import judged
from tests.ansible_fuzz.shrink import shrink


def run(args: argparse.Namespace) -> int:
    seed = args.seed or os.environ.get("ANSIBLE_FUZZ_SEED") or str(random.randrange(10**9))
    count = len(args.again) if args.again else args.programs
    print(f"ansible-fuzz: seed {seed}, {count} programs, {args.jobs} jobs per tool", flush=True)
    work = Path(tempfile.mkdtemp(prefix="gpuconf-ansible-fuzz-"))
    started = time.monotonic()
    tally: collections.Counter[str] = collections.Counter()
    divergent: list[tuple[Program, list[str], tuple[str, ...]]] = []
    indexes = ([args.only] if args.only is not None else args.again if args.again
               else list(range(args.start, args.start + args.programs)))
    with tools(work, args.jobs) as tools_:
        def one(index: int) -> None:
            program = generate(seed, index)
            oracle, ours = both(tools_, program, work / program.name)
            verdict, differences = judged(program, oracle, ours, compare(oracle, ours))
            tally[verdict] += 1
            if differences:
                for side, observed in (("ansible", oracle), ("gpuconf", ours)):
                    if observed["exit"] == "error":
                        lines = [line for line in observed.get("output", "").splitlines() if "rror" in line]
                        differences.append(f"{side} says: {(lines or ['?'])[-1][:300]}")
                divergent.append((program, differences, signature(oracle, ours)[0] if signature(oracle, ours)
                                  else ("error",)))
                print(f"{program.name}: DIVERGES ({', '.join(kind(differences))})\n  " +
                      "\n  ".join(differences[:6]), flush=True)
            elif args.only is not None:
                print(f"{program.name}: {verdict}")
            if args.only is not None:
                show(program, oracle, ours)
            elif not differences:
                shutil.rmtree(work / program.name, ignore_errors=True)
            done = sum(tally.values())
            if done % 50 == 0:
                print(f"  {done} programs, {tally['divergent']} divergent, {time.monotonic() - started:.0f} s",
                      flush=True)

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            list(pool.map(one, indexes))
        ran = time.monotonic() - started
        for servers in (tools_.ansible, tools_.gpuconf):
            if servers is not None and servers.runs:
                print(f"  {servers.tool}: {servers.seconds / servers.runs:.2f} s a program ({servers.runs} runs)")
        stored = []
        for program, differences, first in divergent[: args.shrink]:
            small, small_differences = shrink(tools_, program, differences, work / "shrink", wanted=first)
            stored.append(save_case(FOUND, small, small_differences, seed))
            print(f"{program.name}: shrunk to {small.size()} characters -> {stored[-1]}", flush=True)
    print(f"\nansible-fuzz: seed {seed}: {sum(tally.values())} programs in {ran:.0f} s "
          f"({ran / max(1, sum(tally.values())):.2f} s each); " +
          ", ".join(f"{count} {name}" for name, count in sorted(tally.items())))
    kinds = collections.Counter(k for _, d, _ in divergent for k in kind(d))
    if kinds:
        print("divergences by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    if args.only is None:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"work directory: {work}")
    return 1 if divergent else 0


def show(program: Program, oracle: dict[str, Any], ours: dict[str, Any]) -> None:
    from tests.ansible_fuzz.program import dump

    for path, content in program.files.items():
        print(f"--- {path}\n{content if isinstance(content, str) else dump(content)}")
    print(f"--- args: {program.args}")
    print("--- ansible output:\n" + oracle.get("output", "")[-2500:])
    print("--- gpuconf output:\n" + ours.get("output", "")[-2500:])


def record(paths: list[str], jobs: int) -> int:
    """Run each corpus case through the oracle and store what it did (its `oracle`) in the case;
    print whether gpuconf agrees now."""
    from tests.ansible_fuzz.corpus import load_case
    from tests.ansible_fuzz.program import dump, load

    work = Path(tempfile.mkdtemp(prefix="gpuconf-ansible-fuzz-record-"))
    with tools(work, jobs) as tools_:
        for name in paths:
            path = Path(name)
            case = load_case(path)
            oracle, ours = both(tools_, case["program"], work / path.stem)
            verdict, differences = judged(case["program"], oracle, ours, compare(oracle, ours))
            data = load(path.read_text())
            data["oracle"] = {k: v for k, v in oracle.items() if k != "output"}
            data["differences"] = differences
            path.write_text(dump(data))
            print(f"{path}: recorded (ansible {oracle['exit']}); gpuconf: {verdict}")
            for line in differences:
                print("  " + line)
            if oracle["exit"] == "error":
                print("  ansible: " + oracle.get("output", "")[-600:])
    shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ansible-fuzz")
    parser.add_argument("--programs", type=int, default=int(os.environ.get("ANSIBLE_FUZZ_PROGRAMS", 2000)))
    parser.add_argument("--seed", default=None)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--only", type=int, default=None)
    parser.add_argument("--again", type=lambda text: [int(n) for n in text.replace(",", " ").split()], default=None,
                        metavar="N,N,...", help="these programs of the seed (a run's divergent ones, on later code)")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("ANSIBLE_FUZZ_JOBS", 2)))
    parser.add_argument("--shrink", type=int, default=int(os.environ.get("ANSIBLE_FUZZ_SHRINK", 20)),
                        help="shrink and store at most this many divergences")
    parser.add_argument("--record", nargs="+", default=None, metavar="CASE.yml")
    args = parser.parse_args(argv)
    if args.record:
        return record(args.record, args.jobs)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
