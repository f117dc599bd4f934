"""Where gpuconf's controller spends its CPU: one run under yappi (CPU clock, every thread).

    PYTHONPATH=.:.venv/lib/python3.11/site-packages bench/.venv/bin/python bench/profile_check.py \\
        OUT.txt check playbooks/a100-node.yml -i bench

yappi lives in bench/.venv with the peers; PYTHONPATH puts the project and its own virtual
environment first, so gpuconf runs with exactly its own dependencies. yappi measures each
function's own CPU time in every thread (py-spy was tried first: with 100 threads on this 2-core VM
its samples added up to more than the run's wall time, so they could not be read as CPU).
Profiling costs time itself; the shares are what to read, not the seconds.

Each function's own time goes to the first area whose rule matches its file; module bodies
(`<module>`) and the import machinery are "imports".
"""
from __future__ import annotations

import re
import sys
import time
from collections import Counter

AREAS = [
    ("imports (module bodies, import machinery)", re.compile(r"^<module>$|importlib|<frozen importlib")),
    ("paramiko: packets, kex, auth, channels", re.compile(r"/paramiko/")),
    ("cryptography, nacl, bcrypt (C bindings)", re.compile(r"/(cryptography|nacl|bcrypt)/")),
    ("known_hosts", re.compile(r"gpuconf/connection/hostkeys\.py")),
    ("gpuconf connection and remote calls", re.compile(r"gpuconf/connection/")),
    ("YAML", re.compile(r"/yaml/|gpuconf/yamlsrc\.py")),
    ("playbook loading", re.compile(r"gpuconf/playbook/")),
    ("templating, planning (jinja2, plan cache)", re.compile(r"gpuconf/templating\.py|plancache|/jinja2/|markupsafe")),
    ("pydantic", re.compile(r"pydantic")),
    ("fact parsing", re.compile(r"gpuconf/facts/")),
    ("task checks", re.compile(r"gpuconf/tasks/")),
    ("terminal output (rich)", re.compile(r"/rich/|gpuconf/report/(text|live)\.py")),
    ("reports (json)", re.compile(r"gpuconf/report/")),
    ("engine: runner, sessions, results", re.compile(r"gpuconf/engine/")),
    ("json", re.compile(r"/json/")),
    ("threads, queues, locks", re.compile(r"threading\.py|concurrent/futures|queue\.py|selectors\.py|socket\.py")),
]


def area(name: str, module: str) -> str:
    for label, rule in AREAS:
        if rule.search(name if label.startswith("imports") else module) or (
                label.startswith("imports") and "importlib" in module):
            return label
    return "other (stdlib, gpuconf cli)"


def main() -> int:
    import yappi

    out_path, argv = sys.argv[1], sys.argv[2:]
    from gpuconf.cli import main as gpuconf_main

    yappi.set_clock_type("cpu")
    started_cpu, started = time.process_time(), time.monotonic()
    yappi.start(builtins=False, profile_threads=True)
    try:
        code = gpuconf_main(argv)
    finally:
        yappi.stop()
    cpu, wall = time.process_time() - started_cpu, time.monotonic() - started
    areas: Counter = Counter()
    functions: Counter = Counter()
    for stat in yappi.get_func_stats():
        areas[area(stat.name, stat.module)] += stat.tsub
        short = re.sub(r"^.*?/(site-packages|lib/python3\.\d+|work/main)/", "", stat.module)
        functions[f"{stat.name} ({short}:{stat.lineno})"] += stat.tsub
    total = sum(areas.values()) or 1.0
    lines = [f"process CPU {cpu:.2f} s (profiled; wall {wall:.2f} s), {total:.2f} s attributed to functions", "",
             "| Area | CPU s | Share |", "|---|---:|---:|"]
    lines += [f"| {name} | {seconds:.2f} | {100 * seconds / total:.0f}% |" for name, seconds in areas.most_common()]
    lines += ["", "| Function (own time) | CPU s | Share |", "|---|---:|---:|"]
    lines += [f"| `{name}` | {seconds:.2f} | {100 * seconds / total:.0f}% |"
              for name, seconds in functions.most_common(15)]
    with open(out_path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
