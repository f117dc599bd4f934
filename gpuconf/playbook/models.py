"""The validated shape of plays, tasks and roles.

Keywords are checked by pydantic models that forbid unknown keys; the loader
maps every validation error back to file:line:column with a "did you mean".
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from gpuconf.errors import Location

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _as_list(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _flag(value: Any) -> Any:
    """A boolean keyword: true/false as Ansible spells them, or a template judged at run time."""
    if isinstance(value, str) and "{{" not in value and "{%" not in value:
        text = value.strip().lower()
        if text in ("yes", "true", "on", "1", "y", "t"):
            return True
        if text in ("no", "false", "off", "0", "n", "f", ""):
            return False
    return value


warnings.filterwarnings("ignore", message='Field name "register"', category=UserWarning)  # ABC.register


class LoopControl(BaseModel):
    """Ansible's `loop_control`: what an item is called, and how its result line names it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # `timeout: 1e309` is no timeout

    loop_var: str = "item"
    label: str | None = None
    index_var: str | None = None  # the item's index (from 0), under this name
    extended: bool = False  # `ansible_loop`: index, index0, first, last, length, revindex, previtem, nextitem ...
    extended_allitems: bool = True  # ... and allitems

    @field_validator("loop_var", "index_var")
    @classmethod
    def _identifier(cls, value: str | None) -> str | None:
        if value is not None and not IDENTIFIER.match(value):
            raise ValueError(f"'{value}' is not a valid variable name")
        return value


Condition = str | bool | list[str | bool] | None
# the lookups a task's `with_NAME:` loops over (gpuconf/templating/ansible_filters.py has them)
WITH_LOOKUPS = ("items", "dict", "list", "subelements", "nested", "together", "flattened", "indexed_items",
                "sequence", "file", "env")
LOOP_KEYWORDS = ("loop", *(f"with_{name}" for name in WITH_LOOKUPS))


@dataclass(frozen=True)
class LookupLoop:
    """`with_NAME: TERMS`: the items are lookup NAME of the terms, once they are templated."""

    name: str
    terms: Any
# `become_user`: a plain account name (sudo -u NAME), never a template
UserName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")]


class TaskKeywords(BaseModel):
    """Every key of a task except its one task type."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # `timeout: 1e309` is no timeout

    name: str | None = None
    when: str | bool | list[str | bool] | None = None
    notify: list[str] = Field(default_factory=list)
    listen: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    register: str | None = None
    become: bool | None = None
    become_user: UserName | None = None
    ignore_errors: bool | str = False  # a template is judged when the task runs (planner.flag)
    timeout: float | None = Field(None, gt=0)
    vars: dict[str, Any] = Field(default_factory=dict)
    no_log: bool = False
    loop: str | list[Any] | None = None
    with_items: Any = None
    with_dict: Any = None
    with_list: Any = None
    with_subelements: Any = None
    with_nested: Any = None
    with_together: Any = None
    with_flattened: Any = None
    with_indexed_items: Any = None
    with_sequence: Any = None
    with_file: Any = None
    with_env: Any = None
    loop_control: LoopControl | None = None
    changed_when: Condition = None
    failed_when: Condition = None
    check_mode: bool | None = None
    until: Condition = None  # retried (retries, every delay seconds) until this holds, as Ansible's
    retries: int | None = None
    delay: float = Field(5, ge=0)
    run_once: bool | str = False
    delegate_to: str | None = Field(None, min_length=1)
    any_errors_fatal: bool | None = None  # a failure here ends the play for every host of the batch
    # an unreachable host is ignored here (recap: ok and ignored) and goes on to its next task
    ignore_unreachable: bool | str = False
    # Ansible's interactive task debugger: gpuconf has none, and a run never stops to ask (docs/ansible.md)
    debugger: Literal["always", "never", "on_failed", "on_unreachable", "on_skipped"] | None = None

    _lists = field_validator("notify", "listen", "tags", mode="before")(lambda cls, v: _as_list(v))
    _flags = field_validator("ignore_errors", "run_once", "ignore_unreachable", mode="before")(
        lambda cls, v: _flag(v))

    @property
    def items(self) -> str | list[Any] | LookupLoop | None:
        """`loop`, or `with_NAME: TERMS`: the items Ansible's lookup NAME makes of the terms."""
        if self.loop is not None:
            return self.loop
        for name in WITH_LOOKUPS:
            terms = getattr(self, f"with_{name}")
            if terms is not None:
                return LookupLoop(name, terms)
        return None

    @field_validator("register")
    @classmethod
    def _identifier(cls, value: str | None) -> str | None:
        if value is not None and not IDENTIFIER.match(value):
            raise ValueError(f"'{value}' is not a valid variable name")
        return value


TASK_KEYWORDS = tuple(TaskKeywords.model_fields)
# Actions the engine carries out itself (they read and set variables; no host is asked anything)
ENGINE_ACTIONS = ("set_fact", "debug", "meta", "include_vars", "group_by", "add_host")
# meta's actions (Ansible's `meta: ACTION`), carried out by gpuconf/engine/meta.py
META_ACTIONS = ("flush_handlers", "noop", "end_play", "end_host", "end_batch", "end_role", "clear_host_errors",
                "clear_facts", "refresh_inventory", "reset_connection")
# delegate_to, the documented subset (docs/task-contract.md): the controller runs these ...
DELEGATE_LOCAL = ("localhost", "127.0.0.1")
DELEGATE_TO_CONTROLLER = ("command", "probe", "assert", "debug", "set_fact")
# ... and another inventory host only reads for these (a command there must say `check_mode: false`)
DELEGATE_TO_HOST = ("command", "probe")
# Ansible keywords gpuconf refuses, and why (README, "Coming from Ansible")
REFUSED_KEYWORDS = {
    "async": "every remote command has a timeout (`timeout:`); there are no background jobs",
    "poll": "every remote command has a timeout (`timeout:`); there are no background jobs",
    "environment": "give `env:` to a command",
}
# Ansible play keys gpuconf does not take, and what to use instead
PLAY_HINTS = {
    "remote_user": "set `user` (or ansible_user) in the inventory, or -e user=NAME",
    "environment": "give `env:` to a command",
    "collections": "task types are gpuconf's own (gpuconf tasks)",
    "gather_subset": "gpuconf gathers its facts in one round trip (gather_facts: false turns it off)",
}
BLOCK_KEYWORDS = ("name", "when", "tags", "become", "become_user", "vars", "ignore_errors", "block", "rescue", "always",
                  "notify", "run_once", "check_mode", "delegate_to", "no_log", "any_errors_fatal", "timeout",
                  "ignore_unreachable")
INCLUDE_KEYWORDS = ("name", "when", "tags", "become", "become_user", "vars", "ignore_errors", "notify", "run_once",
                    "check_mode", "delegate_to", "no_log", "any_errors_fatal", "timeout", "ignore_unreachable")


class RoleRef(BaseModel):
    """A role in a play's `roles:` list: a name, or a mapping with params."""

    model_config = ConfigDict(extra="allow")

    role: str
    tags: list[str] = Field(default_factory=list)
    when: str | bool | list[str | bool] | None = None
    become: bool | None = None
    become_user: UserName | None = None
    vars: dict[str, Any] = Field(default_factory=dict)  # role vars (above vars/main.yml), not a param

    _lists = field_validator("tags", mode="before")(lambda cls, v: _as_list(v))

    @field_validator("vars", mode="before")
    @classmethod
    def _no_vars(cls, value: Any) -> Any:
        return {} if value is None else value

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class PlayKeywords(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # `timeout: 1e309` is no timeout

    name: str | None = None
    hosts: str | list[str]
    vars: dict[str, Any] = Field(default_factory=dict)
    vars_files: list[str | list[str]] = Field(default_factory=list)  # a list: the first of its files found
    roles: list[Any] = Field(default_factory=list)
    tasks: list[Any] = Field(default_factory=list)
    handlers: list[Any] = Field(default_factory=list)
    become: bool | None = None
    become_user: UserName | None = None
    pre_tasks: list[Any] = Field(default_factory=list)
    post_tasks: list[Any] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    serial: int | str | list[int | str] | None = None
    max_fail_percentage: float | None = Field(None, ge=0, le=100)
    gather_facts: bool = True
    # a failure on one host ends the play for every host of the batch (max_fail_percentage 0)
    any_errors_fatal: bool = False
    force_handlers: bool | None = None  # notified handlers run on a host that failed (--force-handlers)
    order: Literal["inventory", "reverse_inventory", "sorted", "reverse_sorted", "shuffle"] = "inventory"
    # Ansible's strategies: gpuconf runs each host through its tasks (docs/ansible.md), meeting the
    # batch's other hosts where Ansible's result depends on it (any_errors_fatal, end_play, run_once)
    strategy: str = "linear"   # linear, free, host_pinned, or a template of one
    connection: Literal["local", "ssh", "smart"] | None = None  # the play's, over the inventory's
    check_mode: bool | None = None  # its tasks' check_mode where they say none (playbook/checkmode.py)
    # its tasks' where they (and their blocks) say none (engine/planner.py flag)
    ignore_errors: bool | str | None = None
    ignore_unreachable: bool | str | None = None

    _flags = field_validator("ignore_errors", "ignore_unreachable", mode="before")(lambda cls, v: _flag(v))
    _lists = field_validator("tags", "vars_files", mode="before")(lambda cls, v: _as_list(v))
    _nulls = field_validator("roles", "tasks", "handlers", "pre_tasks", "post_tasks", mode="before")(
        lambda cls, v: [] if v is None else v)

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, value: str) -> str:
        if value not in ("linear", "free", "host_pinned", "debug") and "{{" not in value:
            raise ValueError(f"strategy must be linear, free or host_pinned, not '{value}'")
        return value

    @field_validator("vars", mode="before")
    @classmethod
    def _empty_vars(cls, value: Any) -> Any:
        """`vars:` with nothing after it is no variable, as in Ansible."""
        return {} if value is None else value

    @field_validator("serial")
    @classmethod
    def _serial(cls, value: Any) -> Any:
        """Ansible's `serial`: a host count, a percentage ('30%'), or a list of them."""
        for step in value if isinstance(value, list) else [] if value is None else [value]:
            if isinstance(step, bool) or (isinstance(step, int) and step < 0):
                raise ValueError(f"serial must be a host count or a percentage like '30%', not {step!r}")
            if isinstance(step, str) and not re.fullmatch(r"\s*(\d+(\.\d+)?\s*%|\d+)\s*", step):
                raise ValueError(f"serial must be a host count or a percentage like '30%', not '{step}'")
        return value

    @field_validator("hosts", mode="before")
    @classmethod
    def _hosts(cls, value: Any) -> Any:
        return ",".join(str(v) for v in value) if isinstance(value, list) else value


PLAY_KEYWORDS = tuple(PlayKeywords.model_fields)


@dataclass
class TaskDef:
    """One task as loaded: its type, raw params (may hold templates) and keywords."""

    name: str
    type: str
    params: dict[str, Any]
    keywords: TaskKeywords
    location: Location
    raw: Any = None  # the YAML node, for locating param errors
    role: str | None = None
    role_params: dict[str, Any] = field(default_factory=dict)  # its role's params (`- role: x` with `a: 1`)
    role_vars: dict[str, Any] = field(default_factory=dict)  # its role's vars (gpuconf/playbook/roles.py)
    role_defaults: dict[str, Any] = field(default_factory=dict)  # its role's defaults, its dependencies'
    role_path: str = ""
    include_params: dict[str, Any] = field(default_factory=dict)  # the `vars:` of the includes around it
    context: Any = None  # a dynamic include: where it was read (playbook/dynamic.py reads its tasks then)
    role_when: list[Any] = field(default_factory=list)  # the `when` of its role, blocks and includes, outermost first
    tags: set[str] = field(default_factory=set)
    search_paths: list[Path] = field(default_factory=list)
    become: bool | None = None
    become_user: UserName | None = None  # with become: the reads and ops run as this user (sudo -u)
    # the blocks around the task, outermost first: (block id, "block" | "rescue" | "always")
    blocks: tuple[tuple[int, str], ...] = ()
    item_vars: dict[str, Any] = field(default_factory=dict)  # one item of a loop (never rendered again)
    # pre_tasks, tasks (roles' too) or post_tasks: the handlers notified so far run at the end of each
    section: str = "tasks"
    action: str = ""  # the module (or action) as the playbook wrote it: `ansible.builtin.copy`, `debug`
    role_instance: int = 0  # which loading of its role (meta: end_role skips the rest of that one)
    # its role's (name, params) where the role runs once a host: a loading completed on a host
    # makes the later ones skipped there (engine/hostrun.py); "" with allow_duplicates
    role_once: str = ""
    # a handler: the names a notify finds it by (its name, "ROLE : name"); the handler entry it is
    # part of (an include_tasks handler runs its file's tasks)
    handler_names: tuple[str, ...] = ()
    handler_key: int = 0


@dataclass
class Play:
    name: str
    hosts: str
    keywords: PlayKeywords
    vars: dict[str, Any]
    tasks: list[TaskDef]
    handlers: list[TaskDef]
    location: Location
    role_defaults: dict[str, Any] = field(default_factory=dict)  # the public roles' defaults, as in Ansible
    role_vars: dict[str, Any] = field(default_factory=dict)  # the public roles' vars/main.yml
    includes: Any = None  # what reads the tasks of its dynamic includes (playbook/dynamic.py IncludeLoader)
    meets: bool | None = None  # whether its hosts meet after each task (engine/meta.py play_meets), once known
    # the roles it names (roles:, import_role), and their dependencies, as loaded (Ansible's
    # ansible_play_role_names and ansible_dependent_role_names)
    role_names: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))


@dataclass
class Playbook:
    path: Path
    plays: list[Play]
