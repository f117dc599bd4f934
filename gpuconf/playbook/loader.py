"""Load a playbook and its roles into validated models, with file:line:column errors.

Roles are looked up along a roles path (`roles_path()`): `roles/` next to the
playbook, the configured roles path, the project's `roles/`, the shipped roles. A role's `meta/main.yml` dependencies
load before it, each (name, params) pair once per play.
"""
from __future__ import annotations

from itertools import count
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from gpuconf.errors import Location, PlaybookError, did_you_mean, validation_message
from gpuconf.files import yamlsrc
from gpuconf.inventory.hosts import load_vars_file
from gpuconf.playbook.actions import action_param_errors
from gpuconf.playbook.ansible_names import ansible_hint, check_hosts, translate_task
from gpuconf.playbook.argspecs import check_arguments
from gpuconf.playbook.blocks import INCLUDES, Context, check_keywords, import_playbook, load_block, load_include
from gpuconf.playbook.models import (
    ENGINE_ACTIONS,
    PLAY_HINTS,
    PLAY_KEYWORDS,
    REFUSED_KEYWORDS,
    TASK_KEYWORDS,
    Play,
    Playbook,
    PlayKeywords,
    RoleRef,
    TaskDef,
    TaskKeywords,
)
from gpuconf.release.library import find_playbook, playbook_names, shipped_roles
from gpuconf.tasks.registry import TASK_TYPES, static_param_errors


def _validate(model: type[BaseModel], data: Any, node: Any, allowed: tuple[str, ...], what: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        loc, message = validation_message(exc, allowed)
        raise PlaybookError(f"{what}: {message}", yamlsrc.locate(node, loc)) from None


def roles_path(playbook: Path, project_dir: Path | None = None, configured: list[Path] | None = None) -> list[Path]:
    """Where roles are looked up, first match wins: `roles/` beside the playbook, the configured
    roles path (gpuconf.cfg `roles_path`, GPUCONF_ROLES_PATH), the project's `roles/`, and the
    roles shipped with gpuconf, so that a playbook runs from any directory."""
    dirs = [playbook.parent / "roles", *(configured or []), (project_dir or Path.cwd()) / "roles", shipped_roles()]
    return list(dict.fromkeys(p.resolve() for p in dirs))


def check_notified(tasks: list[TaskDef], handlers: list[TaskDef]) -> None:
    """A `notify` that names no handler (by name or `listen`) is refused at load, in every verb, as
    Ansible refuses it; a templated name is known only at run time."""
    known = {h.name for h in handlers} | {topic for h in handlers for topic in h.keywords.listen}
    for task in tasks + handlers:
        for name in task.keywords.notify:
            if name not in known and "{{" not in name:
                raise PlaybookError(f"task '{task.name}' notifies '{name}', which no handler defines or listens "
                                    f"to{did_you_mean(name, known)}", task.location)


class Loader:
    def __init__(self, playbook: Path, project_dir: Path | None = None, configured_roles: list[Path] | None = None,
                 stack: tuple[Path, ...] = ()):
        self.playbook = playbook
        self.project_dir, self.configured_roles = project_dir, configured_roles
        self.role_dirs = roles_path(playbook, project_dir, configured_roles)
        self.stack = stack + (playbook.resolve(),)  # the playbooks and task files being read: no cycles
        self.block_ids = count(1)
        self.defaults: dict[str, Any] = {}
        self.included_handlers: list[TaskDef] = []

    def nested(self, playbook: Path) -> Loader:
        """A loader for an imported playbook: the same roles path, block numbering and cycle guard."""
        inner = Loader(playbook, self.project_dir, self.configured_roles, self.stack)
        inner.block_ids = self.block_ids
        return inner

    # -- playbook -----------------------------------------------------------
    def load(self) -> Playbook:
        data = yamlsrc.load_file(self.playbook)
        if not isinstance(data, yamlsrc.YList):
            where = data.location() if isinstance(data, yamlsrc.YDict) else Location(str(self.playbook), 1, 1)
            raise PlaybookError("a playbook is a list of plays (each with 'hosts:')", where)
        plays = []
        for index, node in enumerate(data):
            if not isinstance(node, yamlsrc.YDict):
                raise PlaybookError("each play must be a mapping with 'hosts:'", data.location(index))
            if "import_playbook" in node:
                plays += import_playbook(self, node)
            else:
                plays.append(self._play(node))
        return Playbook(self.playbook, plays)

    def _play(self, node: yamlsrc.YDict) -> Play:
        for key in node:  # before pydantic, whose first error for `host:` would be the missing `hosts:`
            if key in PLAY_HINTS:
                raise PlaybookError(f"'{key}' is not supported: {PLAY_HINTS[key]}", node.location(key))
            if key not in PLAY_KEYWORDS:
                raise PlaybookError(f"unknown play key '{key}'{did_you_mean(str(key), PLAY_KEYWORDS)}",
                                    node.location(key))
        check_hosts(node)
        keywords = _validate(PlayKeywords, node, node, PLAY_KEYWORDS, "play")
        name = keywords.name or str(keywords.hosts)
        play_vars = yamlsrc.plain(keywords.vars)
        files_node = node.get("vars_files")
        for index, vars_file in enumerate(keywords.vars_files):
            path = Path(vars_file)
            path = path if path.is_absolute() else self.playbook.parent / path
            if not path.exists():
                where = files_node.location(index) if isinstance(files_node, yamlsrc.YList) else \
                    node.location("vars_files")
                raise PlaybookError(f"vars file '{vars_file}' not found (looked for {path})", where)
            play_vars.update(load_vars_file(path))
        tasks: list[TaskDef] = []
        handlers: list[TaskDef] = []
        loaded_roles: set[str] = set()
        self.defaults = {}
        self.included_handlers = []  # the handlers of roles that include_role brought in
        roles_node = node.get("roles", yamlsrc.YList())
        for index, item in enumerate(keywords.roles):
            where = roles_node.location(index) if isinstance(roles_node, yamlsrc.YList) else node.location("roles")
            ref = self._role_ref(item, where, roles_node[index] if isinstance(roles_node, list) else item)
            self._role(ref, where, set(keywords.tags), tasks, handlers, loaded_roles, ())
        base = self.playbook.parent  # as Ansible: templates/ and files/ beside the playbook, then the folder
        search = [base / "templates", base / "files", base]
        play_tags = set(keywords.tags)
        # Ansible's order: pre_tasks, roles, tasks, post_tasks (handlers run once, at the end of the play)
        tasks[:0] = self._tasks(node.get("pre_tasks"), node, "pre_tasks", play_tags, search, here=base)
        tasks += self._tasks(node.get("tasks"), node, "tasks", play_tags, search, here=base)
        tasks += self._tasks(node.get("post_tasks"), node, "post_tasks", play_tags, search, here=base)
        handlers += self._tasks(node.get("handlers"), node, "handlers", set(), search, handler=True, here=base)
        handlers += self.included_handlers
        handlers = list({(h.role, h.name, str(h.location)): h for h in handlers}.values())  # a role brought twice
        check_notified(tasks, handlers)
        for task in tasks + handlers:
            if task.become is None:
                task.become = keywords.become
            if task.become_user is None:
                task.become_user = keywords.become_user
        return Play(name, str(keywords.hosts), keywords, play_vars, tasks, handlers, node.location(), self.defaults)

    # -- tasks --------------------------------------------------------------
    def _tasks(self, items: Any, parent: yamlsrc.YDict, key: str, tags: set[str], search: list[Path],
               handler: bool = False, role: str | None = None, here: Path | None = None,
               blocks: tuple[tuple[int, str], ...] = ()) -> list[TaskDef]:
        if items is None:
            return []
        if not isinstance(items, yamlsrc.YList):
            raise PlaybookError(f"'{key}' must be a list of tasks", parent.location(key))
        context = Context(tags, search, role, here or self.playbook.parent, blocks)
        result: list[TaskDef] = []
        for index, node in enumerate(items):
            if not isinstance(node, yamlsrc.YDict):
                raise PlaybookError("a task must be a mapping", items.location(index))
            if handler and any(k in node for k in ("block", *INCLUDES)):
                raise PlaybookError("a handler is one task: no block or include", node.location())
            result += self._entry(node, context)
        return result

    def _entry(self, node: yamlsrc.YDict, context: Context) -> list[TaskDef]:
        """One item of a task list: a task, a block, or an include (blocks.py)."""
        if "block" in node:
            return load_block(self, node, context)
        for key in INCLUDES:
            if key in node:
                return load_include(self, node, key, context)
        return [self._task(node, context.tags, context.search, context.role, context.blocks)]

    def _task(self, node: yamlsrc.YDict, tags: set[str], search: list[Path], role: str | None,
              blocks: tuple[tuple[int, str], ...] = ()) -> TaskDef:
        for key in node:
            if key in REFUSED_KEYWORDS:
                raise PlaybookError(f"'{key}' is not supported: {REFUSED_KEYWORDS[key]}", node.location(key))
        node = translate_task(node, TASK_KEYWORDS)   # Ansible's module names and free-form arguments
        type_keys = [k for k in node if k not in TASK_KEYWORDS]
        if not type_keys:
            raise PlaybookError(
                f"task has no task type (one of: {', '.join(sorted(TASK_TYPES))})", node.location())
        for key in type_keys:
            if key not in TASK_TYPES and key not in ENGINE_ACTIONS:
                hint = ansible_hint(str(key)) or did_you_mean(str(key), [*TASK_TYPES, *ENGINE_ACTIONS, *TASK_KEYWORDS])
                raise PlaybookError(f"unknown task type or keyword '{key}'{hint}", node.location(key))
        if len(type_keys) > 1:
            raise PlaybookError(f"a task has exactly one task type, found {', '.join(map(str, type_keys))}",
                                node.location(type_keys[1]))
        type_name = str(type_keys[0])
        keyword_data = {k: v for k, v in node.items() if k in TASK_KEYWORDS}
        keywords = _validate(TaskKeywords, keyword_data, node, TASK_KEYWORDS, "task")
        params_node = node[type_name]
        if params_node is None:
            params_node = yamlsrc.YDict()
        if not isinstance(params_node, dict):
            raise PlaybookError(f"the parameters of '{type_name}' must be a mapping", node.location(type_name))
        check_keywords(type_name, keywords, node)
        problem = action_param_errors(type_name, yamlsrc.plain(params_node)) if type_name in ENGINE_ACTIONS \
            else static_param_errors(type_name, yamlsrc.plain(params_node))
        if problem:
            loc, message = problem
            raise PlaybookError(f"{type_name}: {message}", yamlsrc.locate(params_node, loc, node.location(type_name)))
        name = keywords.name or f"{type_name} " + " ".join(
            f"{k}={v}" for k, v in list(yamlsrc.plain(params_node).items())[:2])
        return TaskDef(
            name=name.strip(), type=type_name, params=yamlsrc.plain(params_node), keywords=keywords,
            location=node.location(), raw=params_node, role=role, tags=set(keywords.tags) | tags,
            search_paths=list(search), become=keywords.become, become_user=keywords.become_user, blocks=blocks,
        )

    # -- roles --------------------------------------------------------------
    def _role_ref(self, item: Any, where: Location, node: Any) -> RoleRef:
        if isinstance(item, str):
            return RoleRef(role=item)
        if isinstance(item, dict):
            data = dict(item)
            if "role" not in data and "name" in data:
                data["role"] = data.pop("name")
            return _validate(RoleRef, data, node, ("role", "tags", "when", "become", "become_user"), "role")
        raise PlaybookError("a role is a name or a mapping with 'role:'", where)

    def find_role(self, name: str, where: Location) -> Path:
        for base in self.role_dirs:
            if (base / name).is_dir():
                return base / name
        available = [p.name for base in self.role_dirs if base.is_dir() for p in base.iterdir() if p.is_dir()]
        looked = ", ".join(str(base) for base in self.role_dirs)
        raise PlaybookError(f"role '{name}' not found (looked in {looked}){did_you_mean(name, available)}", where)

    def _role(self, ref: RoleRef, where: Location, tags: set[str], tasks: list[TaskDef], handlers: list[TaskDef],
              loaded: set[str], stack: tuple[str, ...], tasks_from: str = "main",
              blocks: tuple[tuple[int, str], ...] = ()) -> None:
        if ref.role in stack:
            raise PlaybookError(f"role dependency cycle: {' -> '.join(stack + (ref.role,))}", where)
        identity = ref.role + repr(sorted(ref.params.items()))
        if identity in loaded:
            return
        loaded.add(identity)
        path = self.find_role(ref.role, where)
        meta = self._optional(path / "meta" / "main.yml")
        if meta is not None:
            if not isinstance(meta, dict):
                raise PlaybookError("meta/main.yml must be a mapping", Location(str(path / "meta" / "main.yml"), 1, 1))
            deps = meta.get("dependencies") or []
            if not isinstance(deps, list):
                raise PlaybookError("dependencies must be a list of roles", yamlsrc.locate(meta, ("dependencies",)))
            for index, dep in enumerate(deps):
                dep_where = deps.location(index) if isinstance(deps, yamlsrc.YList) else where
                dep_ref = self._role_ref(dep, dep_where, dep)
                self._role(dep_ref, dep_where, tags | set(ref.tags), tasks, handlers, loaded, stack + (ref.role,))
        defaults = self._optional(path / "defaults" / "main.yml") or {}
        if not isinstance(defaults, dict):
            raise PlaybookError("defaults/main.yml must be a mapping",
                                Location(str(path / "defaults" / "main.yml"), 1, 1))
        role_vars = self._optional(path / "vars" / "main.yml") or {}
        if not isinstance(role_vars, dict):
            raise PlaybookError("vars/main.yml must be a mapping", Location(str(path / "vars" / "main.yml"), 1, 1))
        specs = self._optional(path / "meta" / "argument_specs.yml")
        if specs is not None:
            check_arguments(ref.role, path / "meta" / "argument_specs.yml", specs, ref.params, where, tasks_from)
        search = [path / "templates", path / "files", path, self.playbook.parent]
        role_tags = tags | set(ref.tags)
        task_file = path / "tasks" / (tasks_from if tasks_from.endswith((".yml", ".yaml")) else f"{tasks_from}.yml")
        if tasks_from != "main" and self._optional(task_file) is None:
            raise PlaybookError(f"role '{ref.role}' has no tasks file {task_file}", where)
        role_tasks = self._role_file(task_file, role_tags, search, ref.role, blocks)
        role_handlers = self._role_file(path / "handlers" / "main.yml", set(), search, ref.role)
        self.defaults.update(yamlsrc.plain(defaults))
        for task in role_tasks + role_handlers:
            # the role's vars/main.yml, below its parameters and above play vars, as in Ansible
            task.role_params = {**yamlsrc.plain(role_vars), **ref.params}
            task.role_when = ([ref.when] if ref.when is not None else []) + task.role_when
            if task.become is None:
                task.become = ref.become
            if task.become_user is None:
                task.become_user = ref.become_user
        tasks += role_tasks
        handlers += role_handlers

    def _role_file(self, path: Path, tags: set[str], search: list[Path], role: str,
                   blocks: tuple[tuple[int, str], ...] = ()) -> list[TaskDef]:
        data = self._optional(path)
        if data is None:
            return []
        if not isinstance(data, yamlsrc.YList):
            raise PlaybookError("a role's task file must be a list of tasks", Location(str(path), 1, 1))
        holder = yamlsrc.YDict({"tasks": data})
        holder.file = str(path)
        return self._tasks(data, holder, "tasks", tags, search, role=role, here=path.parent, blocks=blocks)

    @staticmethod
    def _optional(path: Path) -> Any:
        for candidate in (path, path.with_suffix(".yaml")):
            if candidate.exists():
                return yamlsrc.load_file(candidate)
        return None


def load_playbook(path: str | Path, project_dir: Path | None = None,
                  configured_roles: list[Path] | None = None) -> Playbook:
    """The playbook of that path, else the one of that name shipped with gpuconf (a local file wins)."""
    choice = find_playbook(path)
    if choice is None:
        shipped = playbook_names()
        hint = did_you_mean(Path(path).name, shipped) or (f" (gpuconf ships {', '.join(shipped)})" if shipped else "")
        raise PlaybookError(f"playbook not found: {path}{hint}")
    return Loader(choice.path, project_dir, configured_roles).load()
