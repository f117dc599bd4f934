"""A role's `meta/argument_specs.yml`, checked when the playbook loads: a parameter of the wrong
type, outside its choices, or missing when required is refused before any host is touched (Ansible
checks the same spec, but only when the role's first task runs on each host)."""
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
            if option.get("required"):
                raise PlaybookError(f"role '{role}': argument '{name}' is required ({spec_file})", where)
            continue
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
