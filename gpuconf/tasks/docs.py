"""`gpuconf tasks [NAME]`: documentation generated from each task's Params model."""
from __future__ import annotations

import inspect
import sys

from pydantic_core import PydanticUndefined

from gpuconf.errors import UsageError, did_you_mean
from gpuconf.tasks.registry import TASK_TYPES


def _summary(doc: str | None) -> str:
    return inspect.cleandoc(doc or "").split("\n\n")[0].replace("\n", " ")


def list_types() -> str:
    width = max(len(n) for n in TASK_TYPES)
    lines = [f"{name.ljust(width)}  {_summary(type(task).__doc__)}" for name, task in sorted(TASK_TYPES.items())]
    return "\n".join(lines) + "\n\n`gpuconf tasks NAME` shows a task type's parameters."


def _type_name(annotation: object) -> str:
    text = str(annotation).replace("typing.", "")
    return text.replace("<class '", "").replace("'>", "")


def describe(name: str) -> str:
    if name not in TASK_TYPES:
        raise UsageError(f"unknown task type '{name}'{did_you_mean(name, TASK_TYPES)}")
    task = TASK_TYPES[name]
    lines = [f"{name}", "", inspect.cleandoc(type(task).__doc__ or "")]
    module_doc = inspect.cleandoc(sys.modules[type(task).__module__].__doc__ or "")
    if f"`gpuconf tasks {name}`" in module_doc:  # the module keeps a table for this page (cuda's)
        lines += ["", module_doc.split("\n\n", 1)[-1]]
    lines += ["", "Parameters:"]
    for field_name, info in task.Params.model_fields.items():
        default = "required" if info.is_required() else (
            "default: " + repr(info.get_default(call_default_factory=True))
            if info.default is not PydanticUndefined or info.default_factory else "")
        lines.append(f"  {info.alias or field_name}: {_type_name(info.annotation)}  ({default})")
        if info.description:
            lines.append(f"      {info.description}")
    return "\n".join(lines)
