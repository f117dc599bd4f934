"""A role's `meta/argument_specs.yml`, as ansible-core reads it: when the spec has an entry for the
role's entry point (`main`, or the include's `tasks_from`), a task "Validating arguments against arg
spec 'ENTRY'" (tags `always`) goes first in the role's tasks. It runs as any task does, on each host
that reaches the role (a false `when` skips it), and checks every variable the role sees
(gpuconf/tasks/argspec.py): a wrong or missing argument fails the host at that task, as in Ansible."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuconf.errors import Location, PlaybookError
from gpuconf.files import yamlsrc


def validation_task(role: str, spec_file: Path, spec: Any, params: dict[str, Any],
                    entry_point: str = "main") -> yamlsrc.YList | None:
    """The task list (one task) Ansible puts before the role's own tasks; None when the spec has no
    entry for `entry_point`. A spec that is not Ansible's shape is refused at load."""
    if not isinstance(spec, dict) or not isinstance(spec.get("argument_specs"), dict):
        raise PlaybookError("meta/argument_specs.yml must have `argument_specs: {main: {options: ...}}`",
                            Location(str(spec_file), 1, 1))
    entry = spec["argument_specs"].get(entry_point)
    if not entry:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("options") or {}, dict):
        raise PlaybookError(f"argument_specs.{entry_point}.options must be a mapping of the role's arguments",
                            Location(str(spec_file), 1, 1))
    name = f"Validating arguments against arg spec '{entry_point}'"
    if "short_description" in entry:
        name += f" - {entry['short_description']}"
    task = yamlsrc.YDict({
        "name": name,
        "validate_argument_spec": {
            "argument_spec": dict(entry.get("options") or {}),
            "provided_arguments": dict(params),
            "validate_args_context": {"type": "role", "name": role, "argument_spec_name": entry_point,
                                      "path": str(spec_file.parent.parent)},
        },
        "tags": ["always"],
    })
    task.file = str(spec_file)
    task.pos = getattr(entry, "pos", (1, 1))
    tasks = yamlsrc.YList([task])
    tasks.file, tasks.pos, tasks.item_pos = str(spec_file), task.pos, [task.pos]
    return tasks
