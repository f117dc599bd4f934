"""Where gpuconf's controller spends its CPU: one run under yappi (CPU clock, every thread).

    PYTHONPATH=.:.venv/lib/python3.11/site-packages bench/.venv/bin/python bench/profile_check.py \\
        OUT.md check playbooks/a100-node.yml -i bench

yappi lives in bench/.venv with the peers; PYTHONPATH puts the project and its own virtual
environment first, so gpuconf runs with exactly its own dependencies. yappi measures each
function's own CPU time in every thread (py-spy was tried first: with 100 threads on this 2-core VM
its samples added up to more than the run's wall time, so they could not be read as CPU).
Profiling costs time itself; the shares are what to read, not the seconds.

Two areas are told apart by what was running, not by the file a function lives in: every call
made while a module is imported is "imports" (module bodies, the dataclasses and regular
expressions they build, pydantic's schemas), and every call made inside the human reporter
(`TextReporter`, `LiveProgress`: rich, the aggregation, the writes) is "printing". yappi tags
each call on entry (`set_tag_callback`) from a per-thread flag that wrappers around
`__import__`, `importlib.import_module` and the reporter's methods set. The rest goes to the
first area whose rule matches the function's file. OUT.md gets the tables, OUT.json the areas.
"""
from __future__ import annotations

import builtins
import functools
import importlib
import json
import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path

IMPORTS, PRINTING, REST = 1, 2, 3
IMPORTS_AREA = "imports (module bodies, import machinery)"
PRINTING_AREA = "printing (human output: rich, aggregation)"
AREAS = [
    ("paramiko: packets, kex, auth, channels", re.compile(r"/paramiko/")),
    ("cryptography, nacl, bcrypt (C bindings)", re.compile(r"/(cryptography|nacl|bcrypt)/")),
    ("known_hosts", re.compile(r"gpuconf/connection/hostkeys\.py")),
    ("gpuconf connection and remote calls", re.compile(r"gpuconf/connection/")),
    ("YAML", re.compile(r"/yaml/|gpuconf/yamlsrc\.py")),
    ("playbook loading", re.compile(r"gpuconf/playbook/")),
    ("templating, planning (jinja2, plan cache)", re.compile(r"gpuconf/templating\.py|plancache|/jinja2/|markupsafe")),
    ("pydantic validation", re.compile(r"pydantic")),
    ("fact parsing", re.compile(r"gpuconf/facts/")),
    ("task checks", re.compile(r"gpuconf/tasks/")),
    ("reports (json and other files)", re.compile(r"gpuconf/report/")),
    ("engine: runner, sessions, results", re.compile(r"gpuconf/engine/|gpuconf/results\.py")),
    ("json", re.compile(r"/json/")),
    ("threads, queues, locks", re.compile(r"threading\.py|concurrent/futures|queue\.py|selectors\.py|socket\.py")),
]
OTHER_AREA = "other (stdlib, gpuconf cli)"
REPORTERS = {"gpuconf.report.text": ("TextReporter",), "gpuconf.report.live": ("LiveProgress",)}

_state = threading.local()


def current_tag() -> int:
    return getattr(_state, "tag", REST)


def tagged(tag: int, function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        before = current_tag()
        _state.tag = IMPORTS if before == IMPORTS else tag
        try:
            return function(*args, **kwargs)
        finally:
            _state.tag = before
    return wrapper


_patched: set[str] = set()


def tag_reporters() -> None:
    """Wrap the human reporter's methods once their modules are loaded (they load lazily)."""
    for module_name, classes in REPORTERS.items():
        module = sys.modules.get(module_name)
        if module is None or module_name in _patched or not all(hasattr(module, c) for c in classes):
            continue  # not loaded, done, or still loading
        _patched.add(module_name)
        for class_name in classes:
            cls = getattr(module, class_name)
            for name, value in list(vars(cls).items()):
                if callable(value) and not isinstance(value, type):
                    setattr(cls, name, tagged(PRINTING, value))


def install_tags() -> None:
    real_import = tagged(IMPORTS, builtins.__import__)
    real_import_module = importlib.import_module

    def traced_import(*args, **kwargs):
        try:
            return real_import(*args, **kwargs)
        finally:
            if len(_patched) < len(REPORTERS):
                tag_reporters()

    builtins.__import__ = traced_import
    importlib.import_module = tagged(IMPORTS, real_import_module)


def area(module: str) -> str:
    for label, rule in AREAS:
        if rule.search(module):
            return label
    return OTHER_AREA


def main() -> int:
    import yappi

    out_path, argv = Path(sys.argv[1]), sys.argv[2:]
    install_tags()
    from gpuconf.cli.main import main as gpuconf_main

    yappi.set_clock_type("cpu")
    yappi.set_tag_callback(current_tag)
    started_cpu, started = time.process_time(), time.monotonic()
    yappi.start(builtins=False, profile_threads=True)
    try:
        code = gpuconf_main(argv)
    finally:
        yappi.stop()
    cpu, wall = time.process_time() - started_cpu, time.monotonic() - started
    areas: Counter = Counter()
    functions: Counter = Counter()
    for tag in (IMPORTS, PRINTING, REST):
        for stat in yappi.get_func_stats(tag=tag):
            if tag == IMPORTS or "importlib" in stat.module:
                label = IMPORTS_AREA
            elif tag == PRINTING:
                label = PRINTING_AREA
            else:
                label = area(stat.module)
            areas[label] += stat.tsub
            short = re.sub(r"^.*?/(site-packages|lib/python3\.\d+|work/[^/]+/[^/]+)/", "", stat.module)
            functions[f"{stat.name} ({short}:{stat.lineno})"] += stat.tsub
    total = sum(areas.values()) or 1.0
    lines = [f"process CPU {cpu:.2f} s (profiled; wall {wall:.2f} s), {total:.2f} s attributed to functions", "",
             "| Area | CPU s | Share |", "|---|---:|---:|"]
    lines += [f"| {name} | {seconds:.2f} | {100 * seconds / total:.0f}% |" for name, seconds in areas.most_common()]
    lines += ["", "| Function (own time) | CPU s | Share |", "|---|---:|---:|"]
    lines += [f"| `{name}` | {seconds:.2f} | {100 * seconds / total:.0f}% |"
              for name, seconds in functions.most_common(15)]
    out_path.write_text("\n".join(lines) + "\n")
    out_path.with_suffix(".json").write_text(json.dumps(
        {"argv": argv, "process_cpu_s": cpu, "wall_s": wall, "attributed_s": total, "areas": dict(areas),
         "printing_share": areas[PRINTING_AREA] / total, "imports_share": areas[IMPORTS_AREA] / total}, indent=1))
    return code


if __name__ == "__main__":
    sys.exit(main())
