"""`gpuconf validate`: every static check, with no connection.

Each task is rendered for each host with the variables that are knowable
without a host. Facts and registered results stand in as `Unknowable`, a
value that absorbs any use, so only variables that are truly undefined fail.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuconf.engine.context import Resolver
from gpuconf.engine.variables import LazyGroups, LazyHostvars, magic_variables, play_variables, task_variables
from gpuconf.errors import GpuconfError, TaskError, TemplateError
from gpuconf.inventory.hosts import Inventory
from gpuconf.inventory.patterns import match_hosts
from gpuconf.playbook.models import ENGINE_ACTIONS, LookupLoop, Playbook, TaskDef
from gpuconf.tasks.base import Refused
from gpuconf.tasks.registry import TASK_TYPES, build_params
from gpuconf.templating.conditions import evaluate_when
from gpuconf.templating.render import Vars, Verbatim, render


class Unknowable:
    """A value known only on the host (a fact, a registered result)."""

    def __getattr__(self, name: str) -> Unknowable:
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __getitem__(self, key: Any) -> Unknowable:
        return self

    def __call__(self, *args: object, **kwargs: object) -> Unknowable:
        return self

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return True

    def __str__(self) -> str:
        return "<unknowable>"

    def __int__(self) -> int:
        return 0

    def __float__(self) -> float:
        return 0.0

    def __eq__(self, other: Any) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    __lt__ = __le__ = __gt__ = __ge__ = __ne__ = lambda self, other: True  # noqa: E731
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __truediv__ = __mod__ = lambda self, other: self  # noqa


def contains_unknowable(value: Any) -> bool:
    if isinstance(value, Unknowable):
        return True
    if isinstance(value, str):
        return "<unknowable>" in value
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list):
        return False
    for item in value:  # a loop, not any(genexpr): this runs for every task of every host
        if contains_unknowable(item):
            return True
    return False


def validate(inventory: Inventory, playbook: Playbook, extra_vars: dict[str, Any],
             max_hosts_per_play: int = 200) -> list[str]:
    """Problems found, as readable lines (empty: valid); `inventory` is narrowed by --limit already."""
    problems: list[str] = []
    unknowable = UNKNOWABLE
    every_host = {name: UNKNOWABLE for name in inventory.hosts}  # hostvars[x].facts: known only on a run
    shared: dict[str, Any] = {"groups": LazyGroups(inventory), "hostvars": LazyHostvars(inventory, every_host)}
    for play in playbook.plays:
        hosts = match_hosts(inventory, play.hosts)
        if not hosts:
            problems.append(f"{play.location}: warning: play '{play.name}' matches no hosts ('{play.hosts}')")
            continue
        registered = {t.keywords.register: unknowable for t in play.tasks + play.handlers if t.keywords.register}
        registered.update({name: unknowable for t in play.tasks + play.handlers if t.type == "set_fact"
                           for name in t.params})  # set where the task runs: known to the tasks after it
        handler_names = {n for h in play.handlers for n in (*h.handler_names, *h.keywords.listen)}
        templated = any("{{" in n for n in handler_names)
        for task in play.tasks + play.handlers:
            for name in task.keywords.notify:
                if name not in handler_names and "{{" not in name and not templated:
                    problems.append(f"{task.location}: task '{task.name}' notifies '{name}', which no handler "
                                    "defines or listens to")
        seen: set[str] = set()
        for host in hosts[:max_hosts_per_play]:
            magic = Verbatim({**validation_magic(inventory, host, hosts, shared),
                              **play_variables(play, playbook.path, inventory)})
            for task in play.tasks + play.handlers:
                problem = _check_task(task, task_variables(magic, extra_vars, registered, task, play,
                                                           inventory.host_vars(host)))
                if problem and problem not in seen:
                    seen.add(problem)
                    problems.append(f"{task.location}: {problem} (task '{task.name}', host {host})")
    return problems


def validation_magic(inventory: Inventory, host: str, play_hosts: list[str], shared: dict[str, Any]) -> Verbatim:
    """The magic variables as a run has them, except what only a run knows: the host's facts,
    and whether it is a check or an apply (ansible_check_mode)."""
    return Verbatim(magic_variables(inventory, host, play_hosts, UNKNOWABLE, UNKNOWABLE, shared))  # type: ignore[arg-type]


UNKNOWABLE = Unknowable()


def _check_task(task: TaskDef, variables: Vars) -> str | None:
    if task.keywords.items is not None:  # a loop: its items must render; each item is known only then
        control = task.keywords.loop_control
        variables = variables.child(Verbatim({control.loop_var if control else "item": UNKNOWABLE,
                                              "ansible_loop": UNKNOWABLE}))
    try:
        items = task.keywords.items
        if items is not None:
            render(items.terms if isinstance(items, LookupLoop) else items, variables)
        for condition in task.role_when + ([task.keywords.when] if task.keywords.when is not None else []):
            evaluate_when(condition, variables)
        rendered = render(task.params, variables)
    except TemplateError as exc:
        return exc.message
    except GpuconfError as exc:
        return str(exc)
    if task.type in ENGINE_ACTIONS:
        return None  # set_fact and debug: their values rendered above are all there is to check
    try:  # template files and source files: found, and every variable they use defined
        rendered = TASK_TYPES[task.type].resolve(rendered, Resolver(variables, task.search_paths))
    except TemplateError as exc:
        return f"{exc.location}: {exc.message}" if exc.location else exc.message
    except TaskError as exc:  # a file not found, unless its name is known only on the host
        return None if contains_unknowable(rendered) else exc.message
    except Refused:
        return None  # an assertion that already fails here fails the run on the host, with its message
    if contains_unknowable(rendered):
        return None
    try:
        build_params(task.type, rendered)
    except ValueError as exc:
        return f"{task.type}: {exc}"
    return None
