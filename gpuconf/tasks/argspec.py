"""`validate_argument_spec`, Ansible's: the arguments a role is given, checked against its
`meta/argument_specs.yml` when the role's first task runs (the loader puts this task first in a role
that has a spec for its entry point, as ansible-core does: gpuconf/playbook/argspecs.py).

Each option of the spec takes its value from the variables the task sees (play vars, role vars and
defaults, include vars, set_fact, ...), then from the role's parameters, which win; the values are
converted as Ansible's module arguments are (`5` is a fine `str`, `"5"` a fine `int`, `"a,b"` the
list `['a', 'b']`) and the choices compared after. A parameter the spec does not name is an error,
as in Ansible."""
from __future__ import annotations

import json
from typing import Any

from gpuconf.tasks.base import Facts, Params, Refused, Resolver, TaskType, Verdict, in_sync

_TRUE = frozenset(("y", "yes", "on", "1", "true", "t"))
_FALSE = frozenset(("n", "no", "off", "0", "false", "f"))


def _unconvertible(name: str, value: Any, kind: str, why: str) -> ValueError:
    return ValueError(f"argument '{name}' is of type {_ansible_type(value)} and we were unable to convert to "
                      f"{kind}: {why}")


def _ansible_type(value: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}.get(
        type(value), "list" if isinstance(value, list) else "dict" if isinstance(value, dict)
        else "str" if isinstance(value, str) else type(value).__name__)


def converted(name: str, kind: str, value: Any) -> Any:
    """`value` as Ansible's argument spec converts it to `kind`, or ValueError with its message."""
    if value is None or kind == "raw":
        return value
    if kind in ("str", "path"):
        return value if isinstance(value, str) else str(value)
    if kind == "int":
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        elif isinstance(value, float) and value.is_integer():
            return int(value)
        raise _unconvertible(name, value, "int", f'"{value!r}" cannot be converted to an int')
    if kind == "float":
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise _unconvertible(name, value, "float", f"{type(value)} cannot be converted to a float")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = value.strip().lower() if isinstance(value, str) else \
            ("1" if value == 1 else "0" if value == 0 else "") if isinstance(value, (int, float)) else ""
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise _unconvertible(name, value, "bool", f"The value '{value}' is not a valid boolean.")
    if kind == "list":
        if isinstance(value, list):
            return value
        if isinstance(value, str):
            return value.split(",")
        if isinstance(value, (int, float)):
            return [str(value)]
        raise _unconvertible(name, value, "list", f"{type(value)} cannot be converted to a list")
    if kind == "dict":
        if isinstance(value, dict):
            return value
        if isinstance(value, str):
            if value.startswith("{"):
                try:
                    return json.loads(value)
                except ValueError:
                    pass
            elif "=" in value:
                fields = [f for f in value.replace(",", " ").split() if f]
                if all("=" in f for f in fields):
                    return dict(f.split("=", 1) for f in fields)
        raise _unconvertible(name, value, "dict", "dictionary requested, could not parse JSON or key=value")
    return value


def validation_errors(spec: dict[str, Any], values: dict[str, Any], who: str = "role",
                      path: tuple[str, ...] = ()) -> list[str]:
    """Ansible's ArgumentSpecValidator messages for `values` against the options `spec`; under a dict
    option's `options` (`path`, nested to any depth) worded as Ansible's: the place of a missing or
    wrong one after 'found in', an unsupported one by its dotted name."""
    where = f" found in {' -> '.join(path)}" if path else ""
    errors = []
    unknown = sorted(str(name) for name in values if name not in spec)
    if unknown:
        errors.append(f"{'' if path else f'Unsupported parameters for ({who}) module: '}"
                      f"{', '.join('.'.join((*path, name)) for name in unknown)}. "
                      f"Supported parameters include: {', '.join(sorted(map(str, spec)))}.")
    missing = sorted(str(name) for name, option in spec.items()
                     if (option or {}).get("required") and name not in values)
    if missing:
        errors.append(f"missing required arguments: {', '.join(missing)}{where}")
    for name, option in spec.items():
        option = option or {}
        if name not in values:
            continue
        try:
            value = converted(str(name), str(option.get("type", "str")), values[name])
        except ValueError as exc:
            errors.append(f"{exc}{where}")
            continue
        choices = option.get("choices")
        # a list value's items are held to the choices at the top level only (a nested list is not)
        if choices and (value not in choices if not isinstance(value, list) else
                        not path and any(item not in choices for item in value)):
            errors.append(f"value of {name} must be one of: {', '.join(map(str, choices))}, got: {value}{where}")
        if isinstance(option.get("options"), dict) and isinstance(value, dict):
            errors += validation_errors(option["options"], value, who, (*path, str(name)))
    return errors


class ArgumentSpecParams(Params):
    argument_spec: dict[str, Any]
    provided_arguments: dict[str, Any] = {}
    validate_args_context: dict[str, Any] = {}


class ValidateArgumentSpec(TaskType):
    """Check the arguments a role sees against its argument spec, as Ansible's module of that name."""

    name = "validate_argument_spec"
    Params = ArgumentSpecParams
    controller_only = True

    def resolve(self, values: dict[str, Any], resolver: Resolver) -> dict[str, Any]:
        spec = values.get("argument_spec")
        provided = values.get("provided_arguments") or {}
        if not isinstance(spec, dict) or not isinstance(provided, dict):
            return values   # the parameters' own validation says what is wrong
        seen = {name: resolver.variable(name) for name in spec if resolver.defined(name)}
        context = values.get("validate_args_context") or {}
        errors = validation_errors(spec, {**seen, **provided}, str(context.get("name") or "role"))
        if errors:
            message = "Validation of arguments failed:\n" + "\n".join(errors)
            raise Refused(message, data={"msg": message, "argument_errors": errors, "argument_spec_data": spec,
                                         "validate_args_context": context})
        return values

    def check(self, params: ArgumentSpecParams, facts: Facts) -> Verdict:
        return in_sync("the arg spec validation passed", msg="The arg spec validation passed",
                       validate_args_context=params.validate_args_context)
