"""The actions the engine carries out itself, in check mode and apply alike: `set_fact`
sets host variables for the rest of the run (as a registered result does), `debug` shows
a message or a variable. Neither asks the host anything."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuconf.engine.include_vars import include_vars
from gpuconf.errors import UndefinedAttribute, UndefinedVariable
from gpuconf.playbook.models import TaskDef
from gpuconf.templating.render import Vars, evaluate, render

DEFAULT_MESSAGE = "Hello world!"   # a bare `debug:`, as Ansible's


def run_action(task: TaskDef, variables: Vars, registered: dict[str, Any], included: dict[str, Any] | None = None,
               playbook_dir: Path | None = None) -> tuple[str, dict[str, Any]]:
    """Carry out `set_fact`, `debug` or `include_vars`: the result's message and data."""
    if task.type == "include_vars":
        params = {name: render(value, variables) for name, value in task.params.items()}
        return include_vars(task, params, included if included is not None else {}, playbook_dir)
    if task.type == "set_fact":
        values = {name: snapshot(render(value, variables)) for name, value in task.params.items()
                  if name != "cacheable"}
        registered.update(values)
        return f"set {', '.join(values)}", {"ansible_facts": values}
    if "var" in task.params:
        name = str(task.params["var"])
        if "{{" in name:   # `var={{ item }}`: the name the template gives
            name = str(render(name, variables))
        try:
            value = snapshot(evaluate(name, variables))
        except (UndefinedVariable, UndefinedAttribute) as exc:  # as Ansible 2.19's debug: the error is the value shown
            value = f"<< error 1 - {exc.shown} >>"
        return f"{name} = {json.dumps(value, default=str, sort_keys=True)}", {name: value}
    message = snapshot(render(task.params.get("msg", DEFAULT_MESSAGE), variables))
    text = message if isinstance(message, str) else json.dumps(message, default=str, sort_keys=True)
    return text, {"msg": message}


def snapshot(value: Any) -> Any:
    """The value as it is now: a list a variable holds may change later in the run (a failed host
    leaves the live ansible_play_batch: engine/batch.py), a result shown or set must not."""
    kind = type(value)
    if kind is list:
        return [snapshot(item) for item in value]
    if kind is dict:
        return {key: snapshot(item) for key, item in value.items()}
    return value
