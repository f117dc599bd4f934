"""A role's `meta/argument_specs.yml`. A parameter given on the role's entry with the wrong type or
outside its choices is refused when the playbook loads, before any host is touched; and, as in
Ansible, the role's first task on each host validates the spec against every variable the role sees
there (a required argument may come from play vars, include vars, role vars or defaults):
`validation_task` makes that task, engine/actions.py runs it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuconf.errors import Location, PlaybookError
from gpuconf.templating.render import is_template

TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,), "path": (str,), "int": (int,), "float": (float, int), "bool": (bool,), "list": (list,),
    "dict": (dict,), "raw": (object,),
}


def check_arguments(role: str, spec_file: Path, spec: Any, params: dict[str, Any], where: Location,
                    entry_point: str = "main") -> None:
    """Raise a PlaybookError, at the role's place in the playbook, for the first parameter the
    spec refuses. A value that is a template is known only at run time and is not checked."""
    if not isinstance(spec, dict) or not isinstance(spec.get("argument_specs"), dict):
        raise PlaybookError("meta/argument_specs.yml must have `argument_specs: {main: {options: ...}}`",
                            Location(str(spec_file), 1, 1))
    entry = spec["argument_specs"].get(entry_point) or {}
    options = entry.get("options") or {}
    for name, option in options.items():
        option = option or {}
        if name not in params:
            continue   # a required one may come from any variable the role sees: checked on the host
        value = params[name]
        if is_template(value):
            continue
        kind = str(option.get("type", "str"))
        if kind == "bool" and isinstance(value, str) and value.lower() in ("yes", "no", "true", "false"):
            continue
        if kind == "int" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
            continue
        allowed = TYPES.get(kind, (object,))
        if not isinstance(value, allowed) or (kind in ("int", "float") and isinstance(value, bool)):
            raise PlaybookError(f"role '{role}': argument '{name}' must be of type {kind}, not {value!r} "
                                f"({spec_file})", where)
        choices = option.get("choices")
        if choices and value not in choices:
            raise PlaybookError(f"role '{role}': argument '{name}' must be one of {', '.join(map(str, choices))}, "
                                f"not {value!r} ({spec_file})", where)


def entry_options(spec: Any, entry_point: str) -> tuple[dict[str, Any], str]:
    """The options of an entry point, and its short description."""
    entry = (spec.get("argument_specs") or {}).get(entry_point) or {} if isinstance(spec, dict) else {}
    return dict(entry.get("options") or {}), str(entry.get("short_description") or "")


def problems(options: dict[str, Any], variables: Any) -> list[str]:
    """What the role's variables break of its spec: a required argument missing, a value of the
    wrong type or outside its choices (as Ansible's validate_argument_spec reports them)."""
    found: list[str] = []
    missing = [name for name, option in options.items() if (option or {}).get("required") and name not in variables]
    if missing:
        found.append(f"missing required arguments: {', '.join(sorted(missing))}")
    for name, option in options.items():
        option = option or {}
        if name not in variables or name in missing:
            continue
        value = variables[name]
        kind = str(option.get("type", "str"))
        text = isinstance(value, str)
        if kind == "bool" and text and value.lower() in ("yes", "no", "true", "false", "on", "off", "1", "0"):
            pass
        elif kind == "int" and text and value.strip().lstrip("-").isdigit():
            pass
        elif kind == "str" and isinstance(value, (int, float)) and not isinstance(value, bool):
            pass   # Ansible converts a number to its text
        elif not isinstance(value, TYPES.get(kind, (object,))) or (kind in ("int", "float")
                                                                    and isinstance(value, bool)):
            found.append(f"argument '{name}' is of type {type(value).__name__} and we were unable to convert to "
                         f"{kind}")
            continue
        choices = option.get("choices")
        if choices and value not in choices:
            found.append(f"value of {name} must be one of: {', '.join(map(str, choices))}, got: {value}")
    return found
