"""The task types, by name. Explicit imports: no magic lookup."""
from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from gpuconf.suggest import did_you_mean, validation_message
from gpuconf.tasks.base import TaskType
from gpuconf.tasks.cmdline import KernelCmdline
from gpuconf.tasks.commands import Assert, Command
from gpuconf.tasks.cuda import CudaCompatibility, NvccVersion
from gpuconf.tasks.driver import DriverStack
from gpuconf.tasks.files import Directory, File, Line
from gpuconf.tasks.gsp import GspFirmware
from gpuconf.tasks.health import HEALTH
from gpuconf.tasks.imex import ImexChannel
from gpuconf.tasks.infiniband import IbPorts
from gpuconf.tasks.initramfs import Initramfs
from gpuconf.tasks.jsonfile import JsonMerge
from gpuconf.tasks.kernel import KernelModule
from gpuconf.tasks.nvidia import (
    DkmsModule,
    DriverCompanion,
    NvidiaModule,
    PersistenceMode,
    PowerLimit,
)
from gpuconf.tasks.packages import Package
from gpuconf.tasks.probe import Probe
from gpuconf.tasks.reboot import Reboot
from gpuconf.tasks.services import Service
from gpuconf.templating import is_template

GENERIC = (File(), Directory(), Line(), JsonMerge(), Package(), Service(), KernelModule(), Initramfs(), Command(),
           Probe(), Reboot(), Assert(), KernelCmdline())
GPU = (DriverStack(), DriverCompanion(), DkmsModule(), NvidiaModule(), CudaCompatibility(), NvccVersion(),
       PersistenceMode(), PowerLimit(), GspFirmware(), IbPorts(), ImexChannel(), *HEALTH)
TASK_TYPES: dict[str, TaskType] = {task.name: task for task in GENERIC + GPU}


def _has_template(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_template(v) for v in value)
    return is_template(value)


def param_names(type_name: str) -> list[str]:
    model = TASK_TYPES[type_name].Params
    names = []
    for name, info in model.model_fields.items():
        names.append(info.alias or name)
    return names


def static_param_errors(type_name: str, raw: dict[str, Any]) -> tuple[tuple, str] | None:
    """Errors knowable before templating: unknown params, wrong literal types."""
    model = TASK_TYPES[type_name].Params
    names = param_names(type_name)
    for key in raw:
        if key not in names:
            return (key,), f"unknown parameter '{key}'{did_you_mean(str(key), names)}"
    templated = {k for k, v in raw.items() if _has_template(v)}
    if templated:
        return None if _literal_errors_ok(model, raw, templated) else _first_literal_error(model, raw, templated)
    try:
        model.model_validate(raw)
    except ValidationError as exc:
        return validation_message(exc, names)
    return None


def _literal_errors(model: Any, raw: dict, templated: set[str]) -> list[Any]:
    static = {k: v for k, v in raw.items() if k not in templated}
    try:
        model.model_validate(static)
    except ValidationError as exc:
        return [e for e in exc.errors() if e["loc"] and e["loc"][0] not in templated and e["type"] != "missing"]
    return []


def _literal_errors_ok(model: Any, raw: dict, templated: set[str]) -> bool:
    return not _literal_errors(model, raw, templated)


def _first_literal_error(model: Any, raw: dict, templated: set[str]) -> tuple[tuple, str]:
    error = _literal_errors(model, raw, templated)[0]
    loc = tuple(error["loc"])
    return loc, f"'{'.'.join(map(str, loc))}': {error['msg']}"


def build_params(type_name: str, rendered: dict[str, Any], numbers_as_text: bool = True) -> Any:
    """Validate rendered params; raise ValueError with a readable message."""
    model = TASK_TYPES[type_name].Params
    try:
        return model.model_validate(rendered)
    except ValidationError as exc:
        numbers = [e["loc"] for e in exc.errors() if e["type"] == "string_type" and _is_number(e["input"])]
        if numbers and numbers_as_text:  # `version: "{{ driver }}"`, driver: 535, is "535", as Ansible renders it
            return build_params(type_name, _as_text(rendered, numbers), numbers_as_text=False)
        _, message = validation_message(exc, param_names(type_name))
        raise ValueError(message) from None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_text(values: Any, locations: list[tuple[Any, ...]]) -> Any:
    """A copy of `values` with the numbers at `locations` (pydantic error locations, whose union
    members' names are not keys) as strings."""
    values = copy.deepcopy(values)
    for loc in locations:
        holder: Any = None
        key: Any = None
        current = values
        for part in loc:
            if isinstance(current, dict) and part in current or \
                    isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
                holder, key, current = current, part, current[part]
        if holder is not None and _is_number(current):
            holder[key] = str(current)
    return values
