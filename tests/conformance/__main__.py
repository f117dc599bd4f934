"""`python -m tests.conformance [--targets a,b] [--work DIR] [--results FILE] [--doc]`: run the
targets (tests/conformance/runner.py), print the table, write the results (and docs/ansible.md's table)."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.conformance.runner import HERE, run_target, save
from tests.conformance.table import ALL_TARGETS, load, markdown, measured_at, rewrite_doc, summary


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance", description=__doc__)
    parser.add_argument("--targets", default=",".join(ALL_TARGETS), help="comma separated (default: all)")
    parser.add_argument("--work", help="where the passes run (default: a new temporary folder, removed after)")
    parser.add_argument("--results", default=str(HERE / "results.json"), help="the runs, judged, as JSON")
    parser.add_argument("--reuse-oracle", action="store_true",
                        help="with --work: the oracle's pass of an earlier run there, where one finished")
    parser.add_argument("--doc", action="store_true", help="write the table into docs/ansible.md")
    parser.add_argument("--from-results", metavar="FILE", help="run nothing: the table of an earlier run's results")
    args = parser.parse_args()
    if args.from_results:
        results = load(Path(args.from_results))
        print(markdown(results))
        if args.doc:
            stamp = Path(args.from_results + ".measured")
            rewrite_doc(results, stamp.read_text().strip() if stamp.exists() else f"by the run of {args.from_results}")
        return 0
    measured = measured_at() + ("; ansible-core's pass of each target reused from an earlier run in the same "
                                "work folder (--reuse-oracle)" if args.reuse_oracle else "")
    targets = [t for t in args.targets.split(",") if t]
    with tempfile.TemporaryDirectory(prefix="gpuconf-conformance-") as scratch:
        work = Path(args.work or scratch)
        results = []
        for target in targets:
            started = time.monotonic()
            result = run_target(target, work, args.reuse_oracle)
            results.append(result)
            print(summary(result) + f"  ({time.monotonic() - started:.0f} s)", flush=True)
    save(results, Path(args.results))
    Path(args.results + ".measured").write_text(measured + "\n")
    print(markdown(results))
    if args.doc:
        rewrite_doc(results, measured)
    return 0


if __name__ == "__main__":
    sys.exit(main())
