"""The product's import graph, read from the source (nothing is imported): no circles, and no
module imports a layer above its own (docs/architecture.md has the order and why)."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gpuconf"

# lowest first; a module may import its own layer and the ones before it
LAYERS = [
    {"errors", "suggest", "vault", "yamlsrc", "config", "userfiles"},
    {"results"},
    {"facts", "driver", "platform"},
    {"templating", "secret_marks", "template_bounds"},
    {"tasks"},
    {"inventory", "inventory_sources", "patterns"},
    {"playbook"},
    {"connection"},
    {"report"},
    {"slurm", "slurm_step", "retry", "schedule", "scheduler", "history"},
    {"engine"},
    {"commands", "adhoc", "remediate"},
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


def test_no_module_imports_a_higher_layer():
    upward = [(m, t) for m, targets in imports().items() for t in targets
              if layer(m) in RANK and layer(t) in RANK and RANK[layer(t)] > RANK[layer(m)]]
    assert upward == []


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
