"""The parameters of the actions the engine carries out itself: `set_fact` and `debug`.

They are no task types (docs/task-contract.md): they read no host and change none; they
set or show variables, in check mode and apply alike (gpuconf/engine/actions.py runs them).
"""
from __future__ import annotations

from typing import Any

from gpuconf.playbook.models import IDENTIFIER, META_ACTIONS

INCLUDE_VARS = ("file", "dir", "name", "depth", "files_matching", "ignore_files", "extensions",
                "ignore_unknown_extensions", "hash_behaviour", "_raw_params")


def _meta_errors(params: dict[str, Any]) -> tuple[tuple[Any, ...], str] | None:
    action = params.get("_raw_params")
    unknown = [k for k in params if k != "_raw_params"]
    if unknown:
        return (unknown[0],), f"meta takes one action (meta: flush_handlers), not '{unknown[0]}'"
    if action not in META_ACTIONS:
        return (), f"invalid meta action requested: {action} (one of: {', '.join(META_ACTIONS)})"
    return None


def action_param_errors(action: str, params: dict[str, Any]) -> tuple[tuple[Any, ...], str] | None:
    """What is wrong with an action's parameters, as (path, message), or None."""
    if action == "meta":
        return _meta_errors(params)
    if action in ("group_by", "add_host"):
        return None
    if action == "include_vars":
        unknown = [k for k in params if k not in INCLUDE_VARS]
        if unknown:
            return (unknown[0],), f"unknown parameter '{unknown[0]}' (include_vars takes {', '.join(INCLUDE_VARS)})"
        return None
    if action == "set_fact":
        if not params:
            return (), "give at least one NAME: VALUE"
        for name in params:
            if name == "cacheable":   # gpuconf keeps no facts between runs: a fact lasts for the run
                continue
            if str(name).startswith("_ansible_"):
                return (name,), f"The variable name '{name}' is reserved for internal use only."
            if not IDENTIFIER.match(str(name)):
                return (name,), f"'{name}' is not a valid variable name"
        return None
    unknown = [k for k in params if k not in ("msg", "var", "verbosity")]
    if unknown:
        return (unknown[0],), f"unknown parameter '{unknown[0]}' (debug takes msg, var and verbosity)"
    if "msg" in params and "var" in params:
        return (), "give one of msg and var, not both"
    if "var" in params and not isinstance(params["var"], str):
        return ("var",), "var names a variable (or an expression), as a string"
    return None
