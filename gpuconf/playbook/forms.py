"""Ansible's other spellings of a task, turned into the one the loader reads:

- `action: debug msg=x` and `action: {module: debug, msg: x}` are `debug: ...`; `local_action:`
  is the same with `delegate_to: localhost`;
- `args: {...}` goes into the module's (or the include's) parameters;
- `ansible.builtin.include_tasks` (and the other includes, imports and `ansible.legacy.`) is
  `include_tasks`.
"""
from __future__ import annotations

from typing import Any

from gpuconf.errors import PlaybookError
from gpuconf.files import yamlsrc

FQCN = ("ansible.builtin.", "ansible.legacy.")
SHORT = ("include_tasks", "import_tasks", "include_role", "import_role", "import_playbook", "block")


def _copy(node: yamlsrc.YDict, items: list[tuple[Any, Any, Any]]) -> yamlsrc.YDict:
    """A mapping of (key, value, key position), positioned as `node`."""
    result = yamlsrc.YDict()
    result.file, result.pos = node.file, node.pos
    for key, value, pos in items:
        result[key] = value
        result.key_pos[key] = pos
    return result


def _short(key: Any) -> Any:
    for prefix in FQCN:
        if isinstance(key, str) and key.startswith(prefix) and key[len(prefix):] in SHORT:
            return key[len(prefix):]
    return key


def _action(node: yamlsrc.YDict, key: str) -> list[tuple[Any, Any, Any]]:
    """`action:` (or `local_action:`) as the module key it names, with its arguments."""
    value = node[key]
    pos = node.key_pos.get(key, node.pos)
    if isinstance(value, dict):
        params = {k: v for k, v in value.items() if k != "module"}
        module = value.get("module")
        if not isinstance(module, str):
            raise PlaybookError(f"{key}: name the module (`{key}: {{module: NAME, ...}}`)", node.location(key))
        mapped = yamlsrc.YDict(params)
        mapped.file, mapped.pos = node.file, getattr(value, "pos", pos)
        return [(module, mapped, pos)]
    if not isinstance(value, str) or not value.strip():
        raise PlaybookError(f"{key}: name the module and its arguments (`{key}: MODULE ARGS`)", node.location(key))
    module, _, rest = value.strip().partition(" ")
    return [(module, rest.strip() or None, pos)]


def normalize(node: yamlsrc.YDict) -> yamlsrc.YDict:
    """The task, block or include `node` in the spelling the loader reads (or `node` itself)."""
    if not any(_short(k) != k for k in node) and "action" not in node and "local_action" not in node \
            and "args" not in node:
        return node
    items: list[tuple[Any, Any, Any]] = []
    for key, value in node.items():
        pos = node.key_pos.get(key, node.pos)
        if key in ("action", "local_action"):
            items += _action(node, key)
            if key == "local_action":
                items.append(("delegate_to", "localhost", pos))
        elif key != "args":
            items.append((_short(key), value, pos))
    if "args" in node:
        args = node["args"]
        if not isinstance(args, dict):
            raise PlaybookError("args must be a mapping of the module's parameters", node.location("args"))
        modules = [i for i, (key, _, _) in enumerate(items) if key not in TASK_LEVEL]
        if len(modules) != 1:
            raise PlaybookError("args: the task names no module to give them to", node.location("args"))
        index = modules[0]
        key, value, pos = items[index]
        if isinstance(value, str):
            base: dict[str, Any] = {"file": value} if key in SHORT else {"_raw_params": value}
        else:
            base = dict(value or {})
        merged = yamlsrc.YDict({**base, **args})
        merged.file, merged.pos = node.file, getattr(args, "pos", pos)
        items[index] = (key, merged, pos)
    return _copy(node, items)


# keys that are keywords of a task, never its module (for `args:`)
TASK_LEVEL = (
    "name", "when", "notify", "listen", "tags", "register", "become", "become_user", "become_method",
    "ignore_errors", "timeout", "vars", "no_log", "loop", "loop_control", "changed_when", "failed_when",
    "check_mode", "run_once", "delegate_to", "delegate_facts", "environment", "until", "retries", "delay",
    "any_errors_fatal", "ignore_unreachable", "diff", "throttle", "collections", "module_defaults", "debugger",
    "connection", "remote_user", "port", "async", "poll",
) + tuple(f"with_{name}" for name in ("items", "dict", "list", "fileglob", "first_found", "together", "subelements",
                                        "nested", "sequence", "random_choice", "indexed_items", "flattened",
                                        "lines", "inventory_hostnames"))
