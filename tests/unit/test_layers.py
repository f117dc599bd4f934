"""The product's import graph, read from the source (nothing is imported): no circles, and no
module imports a layer above its own (docs/architecture.md has the order and why)."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gpuconf"

# lowest first; a package may import its own layer and the ones before it. Only errors, results and
# __main__ are modules outside a package.
LAYERS = [
    {"errors", "files", "release"},
    {"results"},
    {"facts", "driver", "bmc"},
    {"templating"},
    {"tasks"},
    {"inventory"},
    {"playbook"},
    {"connection"},
    {"report"},
    {"engine"},
    # what a run's results are used for afterwards: the scheduler (its interface, Slurm, the check's
    # rules and its step after the run)
    {"scheduler"},
    # the pre-job gate (judged by the health probes, drains through Slurm)
    {"gate"},
    # the loop: waves, ladder, holds, the evidence bundle, the history
    {"remediate"},
    {"cli", "__main__"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("gpuconf"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("gpuconf")}
        graph[name] = {t for t in found if t in modules and t != name}
    return graph


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_part_of_the_product_has_a_layer():
    assert {layer(m) for m in imports()} - {"__init__"} <= set(RANK)


def test_only_errors_results_and_main_live_outside_a_package():
    loose = {p.stem for p in PACKAGE.glob("*.py")}
    assert loose <= {"__init__", "__main__", "errors", "results"}


def test_every_package_says_what_it_owns():
    for init in PACKAGE.glob("*/__init__.py"):
        docstring = ast.get_docstring(ast.parse(init.read_text()))
        assert docstring and len(docstring.split()) >= 12, init.parent.name


def test_no_package_loops():
    """Packages, not only modules: facts -> platform -> facts would be a loop even if no two
    modules import each other."""
    graph: dict[str, set[str]] = {}
    for module, targets in imports().items():
        graph.setdefault(layer(module), set()).update(layer(t) for t in targets if layer(t) != layer(module))
    loops = [(a, b) for a, targets in graph.items() for b in targets if a in graph.get(b, set())]
    assert loops == []


def test_no_module_imports_a_higher_layer():
    upward = [(m, t) for m, targets in imports().items() for t in targets
              if layer(m) in RANK and layer(t) in RANK and RANK[layer(t)] > RANK[layer(m)]]
    assert upward == []


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_the_run_its_results_and_reporters_import_nothing_of_the_scheduler():
    """`check --slurm` is a step after the run (engine/after.py, scheduler_step.py): the runner, its
    options, the results and the reporters import nothing of Slurm or the scheduler, not even through
    another module."""
    graph = imports()
    scheduler = {m for m in graph if layer(m) in {"scheduler", "slurm", "healthcheck", "scheduler_step"}}
    assert {"gpuconf.scheduler.slurm", "gpuconf.scheduler.interface", "gpuconf.scheduler.step"} <= scheduler
    run_side = [m for m in graph if layer(m) in {"engine", "results", "report"}]
    assert "gpuconf.engine.runner" in run_side and "gpuconf.report.text" in run_side
    found = {m: sorted(reachable(graph, m) & scheduler) for m in run_side}
    assert {m: names for m, names in found.items() if names} == {}


def test_no_import_circles():
    graph = imports()
    circles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                circles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert circles == []
