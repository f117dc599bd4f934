"""Blocks, includes and imports, loaded into plain task lists with Ansible's names.

- `block`/`rescue`/`always`: each task records the blocks around it (`TaskDef.blocks`),
  and the engine runs rescue and always as Ansible does (gpuconf/engine/blocks.py);
- `import_tasks`/`include_tasks`, `import_role`/`include_role`: the file or role is read
  when the playbook loads (its name cannot be a template), and the include's `when`,
  `tags`, `become`, `become_user` and `vars` apply to every task it brings;
- `import_playbook`: the plays of another playbook, in place.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gpuconf.errors import Location, PlaybookError, did_you_mean, validation_message
from gpuconf.files import yamlsrc
from gpuconf.playbook.models import (
    BLOCK_KEYWORDS,
    DELEGATE_LOCAL,
    DELEGATE_TO_CONTROLLER,
    DELEGATE_TO_HOST,
    INCLUDE_KEYWORDS,
    LOOP_KEYWORDS,
    Condition,
    Play,
    Playbook,
    RoleRef,
    TaskDef,
    TaskKeywords,
    UserName,
)
from gpuconf.playbook.roles import RoleCall, load_role
from gpuconf.release.library import find_playbook
from gpuconf.templating.render import is_template


class Loader(Protocol):
    """What these functions use of the playbook's Loader (gpuconf/playbook/loader.py), which imports
    this module: a protocol here, where an import back would be a circle (tests/unit/test_layers.py)."""

    @property
    def playbook(self) -> Path: ...

    stack: tuple[Path, ...]  # the files being read (no cycles): extended around an included file

    @property
    def block_ids(self) -> Iterator[int]: ...

    @property
    def included_handlers(self) -> list[TaskDef]: ...

    role_stack: list[Any]  # the roles whose tasks are being read (playbook/roles.py Parent)

    def nested(self, playbook: Path, import_vars: dict[str, Any] | None = None) -> Loader: ...

    def load(self) -> Playbook: ...

    def _tasks(self, items: Any, parent: yamlsrc.YDict, key: str, tags: set[str], search: list[Path],
               handler: bool = False, role: str | None = None, here: Path | None = None,
               blocks: tuple[tuple[int, str], ...] = ()) -> list[TaskDef]: ...

    def render_static(self, value: str, what: str, where: Location, own: dict[str, Any] | None = None) -> str: ...

INCLUDES = ("import_tasks", "include_tasks", "import_role", "include_role")


@dataclass
class Context:
    """Where a task list is being read: the tags and blocks around it, its role and folder."""

    tags: set[str]
    search: list[Path]
    role: str | None
    here: Path  # the folder of the file being read: include_tasks names files relative to it
    blocks: tuple[tuple[int, str], ...]


class Wrapper(BaseModel):
    """The keywords a block or an include passes on to the tasks inside it."""

    model_config = ConfigDict(extra="ignore")

    name: str | None = None
    when: Condition = None
    tags: list[str] = Field(default_factory=list)
    become: bool | None = None
    become_user: UserName | None = None
    vars: dict[str, Any] = Field(default_factory=dict)
    ignore_errors: bool | str | None = None
    # a block's, for the tasks inside that set none themselves
    notify: list[str] | None = None
    run_once: bool | str | None = None
    check_mode: bool | None = None
    delegate_to: str | None = None
    no_log: bool | None = None
    any_errors_fatal: bool | None = None
    timeout: float | None = None
    ignore_unreachable: bool | str | None = None

    _notify = field_validator("notify", mode="before")(lambda cls, v: [v] if isinstance(v, str) else v)
    _tags = field_validator("tags", mode="before")(
        lambda cls, v: [p.strip() for p in v.split(",")] if isinstance(v, str) else (v or []))


def _wrapper(node: yamlsrc.YDict, allowed: tuple[str, ...], what: str) -> Wrapper:
    for key in node:
        if key in (*LOOP_KEYWORDS, "loop_control") and what in INCLUDES:
            raise PlaybookError(f"{what} with {key} is not supported: gpuconf reads every included file once, "
                                "when the playbook loads; put the loop on the tasks inside the file (with "
                                "loop_control: {loop_var: NAME} where Ansible's include named one)", node.location(key))
        if key not in allowed:
            raise PlaybookError(f"unknown {what} key '{key}'{did_you_mean(str(key), allowed)}", node.location(key))
    try:
        return Wrapper.model_validate({k: v for k, v in node.items() if k in allowed})
    except ValidationError as exc:
        loc, message = validation_message(exc, allowed)
        raise PlaybookError(f"{what}: {message}", yamlsrc.locate(node, loc)) from None


INHERITED = ("ignore_errors", "notify", "run_once", "check_mode", "delegate_to", "no_log", "any_errors_fatal",
             "timeout", "ignore_unreachable")


def wrap(tasks: list[TaskDef], outer: Wrapper, include: bool = False) -> list[TaskDef]:
    """The block's or include's keywords onto its tasks: its condition before theirs, its
    become and ignore_errors where they set none; a block's vars below the task's own, an
    include's `vars` as include params (above set_fact and role params, as in Ansible)."""
    for task in tasks:
        if include and outer.vars:
            task.include_params = {**yamlsrc.plain(outer.vars), **task.include_params}
        if outer.when is not None:
            task.role_when = [outer.when] + task.role_when
        if task.become is None:
            task.become = outer.become
        if task.become_user is None:
            task.become_user = outer.become_user
        update: dict[str, Any] = {}
        if outer.vars and not include:
            update["vars"] = {**yamlsrc.plain(outer.vars), **task.keywords.vars}
        for name in INHERITED:
            value = getattr(outer, name)
            if value is not None and name not in task.keywords.model_fields_set and name not in update:
                update[name] = value
        if update:
            task.keywords = task.keywords.model_copy(update=update)
        if "delegate_to" in update:   # the same subset as a task's own delegate_to (check_delegation)
            local = str(update["delegate_to"]).strip() in DELEGATE_LOCAL
            allowed = DELEGATE_TO_CONTROLLER if local else DELEGATE_TO_HOST
            if task.type not in allowed + ("meta", "include_vars") or (
                    not local and task.type == "command" and task.keywords.check_mode is not False):
                raise PlaybookError(f"delegate_to (of the block around it) is not supported for '{task.type}': "
                                    "gpuconf delegates to localhost steps the controller runs, and reads to "
                                    "another host", task.location)
    return tasks


def load_block(loader: Loader, node: yamlsrc.YDict, context: Context) -> list[TaskDef]:
    outer = _wrapper(node, BLOCK_KEYWORDS, "block")
    block_id = next(loader.block_ids)
    tags = context.tags | set(outer.tags)
    tasks: list[TaskDef] = []
    for section in ("block", "rescue", "always"):
        inner = context.blocks + ((block_id, section),)
        tasks += loader._tasks(node.get(section), node, section, tags, context.search, role=context.role,
                               here=context.here, blocks=inner)
    if not any(t.blocks[len(context.blocks)][1] == "block" for t in tasks):
        raise PlaybookError("a block needs at least one task under 'block:'", node.location("block"))
    return wrap(tasks, outer)


# ansible-core's TaskInclude.VALID_INCLUDE_KEYWORDS: what a dynamic include_tasks/include_role may carry
# (what is meant for its tasks goes under `apply:`); any other keyword is refused at load, as there
DYNAMIC_INCLUDE_KEYWORDS = frozenset(("action", "args", "collections", "debugger", "ignore_errors", "loop",
                                      "loop_control", "name", "no_log", "register", "run_once", "tags", "timeout",
                                      "vars", "when"))


def check_dynamic_keywords(node: yamlsrc.YDict, key: str, handler: bool = False) -> None:
    """Refuse, as ansible-core does at load, a keyword a dynamic include does not take (a handler's
    include_tasks may `listen` too: HandlerTaskInclude)."""
    for name in node:
        if name != key and name not in DYNAMIC_INCLUDE_KEYWORDS and not str(name).startswith("with_") \
                and not (handler and name == "listen"):
            kind = "IncludeRole" if key == "include_role" else "TaskInclude"
            raise PlaybookError(f"'{name}' is not a valid attribute for a {kind} (as in Ansible: "
                                f"keywords for the included tasks go under `apply:`)", node.location(name))


def load_include(loader: Loader, node: yamlsrc.YDict, key: str, context: Context) -> list[TaskDef]:
    if key in ("include_tasks", "include_role"):
        check_dynamic_keywords(node, key)
    outer = _wrapper(node, (key, *INCLUDE_KEYWORDS), key)
    tags = context.tags | set(outer.tags)
    where = node.location(key)
    if key in ("import_role", "include_role"):
        before = len(loader.included_handlers)
        tasks = wrap(_include_role(loader, node[key], where, tags, context, key == "import_role",
                                   yamlsrc.plain(outer.vars)), outer, True)
        if outer.delegate_to is not None:   # as in Ansible, the role's handlers are delegated too
            wrap([h for h in loader.included_handlers[before:] if "delegate_to" not in h.keywords.model_fields_set],
                 Wrapper.model_validate({"delegate_to": outer.delegate_to}))
        return tasks
    target = node[key]
    if isinstance(target, dict):
        target = target.get("file")
    if not isinstance(target, str) or not target:
        raise PlaybookError(f"{key} names a task file: `{key}: FILE.yml`", where)
    target = loader.render_static(target, key, where, yamlsrc.plain(outer.vars))
    looked = [Path(target)] if Path(target).is_absolute() else [context.here / target] + [
        base / sub / target for base in context.search for sub in ("tasks", "")]   # a role's, the playbook's
    path = next((candidate for candidate in looked if candidate.is_file()), looked[0])
    if not path.exists():
        raise PlaybookError(f"{key}: task file '{target}' not found (looked for "
                            f"{', '.join(str(p) for p in dict.fromkeys(looked))})", where)
    if path.resolve() in loader.stack:
        raise PlaybookError(f"{key}: '{target}' includes itself: "
                            f"{' -> '.join(p.name for p in loader.stack)} -> {path.name}", where)
    data = yamlsrc.load_file(path)
    if data is None:
        return []
    if not isinstance(data, yamlsrc.YList):
        raise PlaybookError("a task file is a list of tasks", Location(str(path), 1, 1))
    holder = yamlsrc.YDict({"tasks": data})
    holder.file = str(path)
    loader.stack += (path.resolve(),)
    try:
        tasks = loader._tasks(data, holder, "tasks", tags, context.search, role=context.role, here=path.parent,
                              blocks=context.blocks)
    finally:
        loader.stack = loader.stack[:-1]
    return wrap(tasks, outer, True)


ROLE_OPTIONS = ("name", "tasks_from", "vars_from", "defaults_from", "handlers_from", "public", "allow_duplicates",
                "rolespec_validate")


def _include_role(loader: Loader, spec: Any, where: Location, tags: set[str], context: Context,
                  imported: bool, own: dict[str, Any] | None = None) -> list[TaskDef]:
    """import_role / include_role: the role where it is named (even if it ran before), its
    dependencies once in the play; import_role's vars and defaults are the play's too, as are
    include_role's with `public: true`."""
    if isinstance(spec, str):
        spec = {"name": spec} if "=" not in spec else dict(word.split("=", 1) for word in spec.split())
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise PlaybookError("include_role needs the role's name: `include_role: {name: ROLE}`", where)
    unknown = [k for k in spec if k not in ROLE_OPTIONS]
    if unknown:
        raise PlaybookError(f"include_role: unknown key '{unknown[0]}' (it takes {', '.join(ROLE_OPTIONS)})", where)
    for option in ("tasks_from", "vars_from", "defaults_from", "handlers_from"):
        if option in spec and not isinstance(spec[option], str):
            raise PlaybookError(f"Expected a string for {option} but got {type(spec[option]).__name__}", where)
    # an import is read when the playbook loads: a templated name renders with -e and the play's vars
    spec = {k: loader.render_static(v, f"import_role {k}", where, own) if isinstance(v, str) else v
            for k, v in spec.items()}
    public = spec.get("public", imported)
    call = RoleCall(tags, tasks_from=str(spec.get("tasks_from", "main")), vars_from=str(spec.get("vars_from", "main")),
                    defaults_from=str(spec.get("defaults_from", "main")),
                    handlers_from=str(spec.get("handlers_from", "main")), blocks=context.blocks,
                    public=public in (True, "yes", "true", "True"),
                    allow_duplicates=str(spec.get("allow_duplicates", True)).lower() not in ("false", "no", "0"),
                    validate=str(spec.get("rolespec_validate", True)).lower() not in ("false", "no", "0"),
                    parents=tuple(loader.role_stack[-1:]))
    tasks: list[TaskDef] = []
    load_role(loader, RoleRef(role=spec["name"]), where, call, tasks, loader.included_handlers)
    return tasks


def import_playbook(loader: Loader, node: yamlsrc.YDict) -> list[Play]:
    """The plays of another playbook, in place; its `when`, `tags` and `vars` reach each of them."""
    for key in node:
        if key not in ("import_playbook", "name", "when", "tags", "vars"):
            raise PlaybookError(f"unknown key '{key}' beside import_playbook (it takes name, when, tags, vars)",
                                node.location(key))
    target = node["import_playbook"]
    where = node.location("import_playbook")
    if not isinstance(target, str):
        raise PlaybookError("import_playbook names a playbook file", where)
    target = loader.render_static(target, "import_playbook", where, yamlsrc.plain(node.get("vars") or {}))
    # beside the importing playbook, else the playbook of that name shipped with gpuconf (a site's
    # playbooks import the shipped ones by name: `import_playbook: a100-node.yml`)
    choice = find_playbook(target, loader.playbook.parent)
    if choice is None:
        raise PlaybookError(f"import_playbook: '{target}' not found (looked for {loader.playbook.parent / target}, "
                            "and gpuconf ships no playbook of that name)", where)
    path = choice.path
    if path.resolve() in loader.stack:
        raise PlaybookError(f"import_playbook: '{target}' imports itself", where)
    outer = _wrapper(yamlsrc.YDict({k: v for k, v in node.items() if k in ("when", "tags", "vars")}),
                     ("when", "tags", "vars"), "import_playbook")
    plays = loader.nested(path, yamlsrc.plain(outer.vars)).load().plays
    for play in plays:
        play.vars = {**play.vars, **yamlsrc.plain(outer.vars)}   # above the play's own, as in Ansible
        for task in play.tasks + play.handlers:
            task.tags |= set(outer.tags)
            if outer.when is not None:
                task.role_when = [outer.when] + task.role_when
    return plays


def check_keywords(type_name: str, keywords: TaskKeywords, node: yamlsrc.YDict) -> None:
    """Keywords that only some tasks can take."""
    given = [key for key in LOOP_KEYWORDS if getattr(keywords, key) is not None]
    if len(given) > 1:
        raise PlaybookError(f"give one of {' and '.join(given)}, not both", node.location(given[1]))
    if keywords.loop_control is not None and keywords.items is None:
        raise PlaybookError("loop_control without loop", node.location("loop_control"))
    if keywords.delegate_to is not None:
        check_delegation(type_name, keywords, node)


def check_delegation(type_name: str, keywords: TaskKeywords, node: yamlsrc.YDict) -> None:
    """delegate_to, the supported subset: controller-side steps on localhost, reads on another host."""
    target = str(keywords.delegate_to).strip()
    if is_template(target) and type_name in DELEGATE_TO_CONTROLLER:
        return   # where it renders to is known when it runs: a write elsewhere is refused there (engine/delegate.py)
    if target in DELEGATE_LOCAL:
        if type_name not in DELEGATE_TO_CONTROLLER:
            raise PlaybookError(f"delegate_to: {target} is supported for {', '.join(DELEGATE_TO_CONTROLLER)} "
                                f"(steps the controller runs), not for '{type_name}'", node.location("delegate_to"))
        return
    if type_name not in DELEGATE_TO_HOST or (type_name == "command" and keywords.check_mode is not False):
        raise PlaybookError(
            f"delegate_to another host is supported for reads only: a probe, or a command marked "
            f"`check_mode: false` (its author's word that it only reads); '{type_name}' would change "
            f"{target}, not this task's host: run it in a play for {target}, or delegate it to localhost",
            node.location("delegate_to"))
