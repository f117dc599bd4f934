"""Load a playbook and its roles into validated models, with file:line:column errors.

Roles are looked up along a roles path (`roles_path()`): `roles/` next to the
playbook, the configured roles path, the project's `roles/`, the shipped roles. A role's `meta/main.yml` dependencies
load before it, each (name, params) pair once per play.
"""
from __future__ import annotations

import copy
from itertools import count
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gpuconf.errors import Location, PlaybookError, TemplateError, did_you_mean, validation_message
from gpuconf.files import yamlsrc
from gpuconf.inventory.hosts import load_vars_file
from gpuconf.playbook.actions import action_param_errors
from gpuconf.playbook.ansible_names import ansible_hint, check_hosts, translate_task
from gpuconf.playbook.blocks import (
    INCLUDES,
    Context,
    check_dynamic_keywords,
    check_keywords,
    import_playbook,
    load_block,
    load_include,
)
from gpuconf.playbook.dynamic import DYNAMIC, IncludeLoader, include_entry
from gpuconf.playbook.forms import normalize
from gpuconf.playbook.models import (
    ENGINE_ACTIONS,
    PLAY_HINTS,
    PLAY_KEYWORDS,
    REFUSED_KEYWORDS,
    TASK_KEYWORDS,
    Play,
    Playbook,
    PlayKeywords,
    TaskDef,
    TaskKeywords,
)
from gpuconf.playbook.roles import RoleCall, load_role, role_ref
from gpuconf.release.library import find_playbook, playbook_names, shipped_roles
from gpuconf.tasks.registry import TASK_TYPES, static_param_errors
from gpuconf.templating.render import Vars, is_template, render

Model = TypeVar("Model", bound=BaseModel)


def _validate(model: type[Model], data: Any, node: Any, allowed: tuple[str, ...], what: str) -> Model:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        loc, message = validation_message(exc, allowed)
        raise PlaybookError(f"{what}: {message}", yamlsrc.locate(node, loc)) from None


def roles_path(playbook: Path, project_dir: Path | None = None, configured: list[Path] | None = None) -> list[Path]:
    """Where roles are looked up, first match wins: `roles/` beside the playbook, the configured
    roles path (gpuconf.cfg `roles_path`, GPUCONF_ROLES_PATH), the project's `roles/`, the folder of
    the playbook itself (as Ansible), and the roles shipped with gpuconf, so that a playbook runs
    from any directory."""
    dirs = [playbook.parent / "roles", *(configured or []), (project_dir or Path.cwd()) / "roles", playbook.parent,
            shipped_roles()]
    return list(dict.fromkeys(p.resolve() for p in dirs))


def check_notified(tasks: list[TaskDef], handlers: list[TaskDef]) -> None:
    """A `notify` that names no handler (by name, "ROLE : name", or `listen`) is refused at load, in
    every verb, as Ansible refuses it; a templated name (of the notify or of a handler) is known
    only at run time."""
    if any("{{" in name for h in handlers for name in h.handler_names):
        return
    known = {name for h in handlers for name in h.handler_names} | \
        {topic for h in handlers for topic in h.keywords.listen}
    for task in tasks + handlers:
        for name in task.keywords.notify:
            if name not in known and "{{" not in name:
                raise PlaybookError(f"The requested handler '{name}' was not found in either the main handlers "
                                    f"list nor in the listening handlers list (task '{task.name}' notifies it)"
                                    f"{did_you_mean(name, known)}", task.location)


class Loader:
    def __init__(self, playbook: Path, project_dir: Path | None = None, configured_roles: list[Path] | None = None,
                 stack: tuple[Path, ...] = ()):
        self.playbook = playbook
        self.project_dir, self.configured_roles = project_dir, configured_roles
        self.extra_vars: dict[str, Any] = {}   # -e: what a templated import's name renders with
        self.play_vars: dict[str, Any] = {}    # the vars of the play being read, for the same
        self.import_vars: dict[str, Any] = {}  # the vars of the import_playbook that imports these plays
        self.role_stack: list[Any] = []   # the roles whose tasks are being read (playbook/roles.py Parent)
        self.role_dirs = roles_path(playbook, project_dir, configured_roles)
        self.stack = stack + (playbook.resolve(),)  # the playbooks and task files being read: no cycles
        self.block_ids = count(1)
        self.defaults: dict[str, Any] = {}
        self.role_vars: dict[str, Any] = {}
        self.loaded_roles: dict[str, Any] = {}   # the roles loaded in the play, by (name, params)
        # the roles the play names (roles:, import_role) and their dependencies, each time loaded
        self.play_role_names: list[str] = []
        self.dependent_role_names: list[str] = []
        self.included_handlers: list[TaskDef] = []

    def nested(self, playbook: Path, import_vars: dict[str, Any] | None = None) -> Loader:
        """A loader for an imported playbook: the same roles path, block numbering and cycle guard."""
        inner = Loader(playbook, self.project_dir, self.configured_roles, self.stack)
        inner.block_ids, inner.extra_vars = self.block_ids, self.extra_vars
        inner.import_vars = {**self.import_vars, **(import_vars or {})}
        return inner

    def render_static(self, value: str, what: str, where: Location, own: dict[str, Any] | None = None) -> str:
        """A templated name an import or vars_files gives, rendered as Ansible renders it when the
        playbook loads: with -e, the import's own `vars` and the play's (no host's is known yet)."""
        if not is_template(value):
            return value
        try:
            return str(render(value, Vars(self.extra_vars, own or {}, self.import_vars, self.play_vars)))
        except TemplateError as exc:
            raise PlaybookError(f"{what} '{value}': {exc.message} (it renders when the playbook loads, with -e "
                                "and the play's vars)", where) from None

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
            node = normalize(node)
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
        self.play_vars = play_vars
        files_node = node.get("vars_files")
        for index, entry in enumerate(keywords.vars_files):
            where = files_node.location(index) if isinstance(files_node, yamlsrc.YList) else \
                node.location("vars_files")
            play_vars.update(load_vars_file(self._vars_file(entry, where)))
        tasks: list[TaskDef] = []
        handlers: list[TaskDef] = []
        self.loaded_roles = {}
        self.play_role_names, self.dependent_role_names = [], []
        self.defaults, self.role_vars = {}, {}
        self.included_handlers = []  # the handlers of roles that include_role brought in
        roles_node = node.get("roles", yamlsrc.YList())
        for index, item in enumerate(keywords.roles):
            where = roles_node.location(index) if isinstance(roles_node, yamlsrc.YList) else node.location("roles")
            ref = role_ref(item, where, roles_node[index] if isinstance(roles_node, list) else item, self.validate)
            load_role(self, ref, where, RoleCall(set(keywords.tags)), tasks, handlers)
        base = self.playbook.parent  # as Ansible: templates/ and files/ beside the playbook, then the folder
        search = [base / "templates", base / "files", base]
        play_tags = set(keywords.tags)
        # Ansible's order: pre_tasks, roles, tasks, post_tasks; the handlers notified so far run after
        # pre_tasks, after roles and tasks, and at the end of the play (where post_tasks' run)
        pre_tasks = self._tasks(node.get("pre_tasks"), node, "pre_tasks", play_tags, search, here=base)
        post_tasks = self._tasks(node.get("post_tasks"), node, "post_tasks", play_tags, search, here=base)
        for section, part in (("pre_tasks", pre_tasks), ("post_tasks", post_tasks)):
            for task in part:
                task.section = section
        tasks[:0] = pre_tasks
        tasks += self._tasks(node.get("tasks"), node, "tasks", play_tags, search, here=base)
        tasks += post_tasks
        handlers += self._tasks(node.get("handlers"), node, "handlers", set(), search, handler=True, here=base)
        handlers += self.included_handlers
        handlers = list({(h.role, h.name, str(h.location)): h for h in handlers}.values())  # a role brought twice
        check_notified(tasks, handlers)
        for task in tasks + handlers:
            if task.become is None:
                task.become = keywords.become
            if task.become_user is None:
                task.become_user = keywords.become_user
        view = copy.copy(self)   # for the includes the play's hosts read while it runs
        view.loaded_roles, view.defaults, view.role_vars = dict(self.loaded_roles), {}, {}
        view.play_role_names, view.dependent_role_names = [], []
        return Play(name, str(keywords.hosts), keywords, play_vars, tasks, handlers, node.location(), self.defaults,
                    self.role_vars, IncludeLoader(view), role_names=(list(self.play_role_names),
                                                                     list(self.dependent_role_names)))

    def _vars_file(self, entry: Any, where: Location) -> Path:
        """A play's vars_files entry, as Ansible finds it: in the playbook's vars/, then beside the
        playbook; a list is the first of its files that exists."""
        names = [self.render_static(str(name), "vars_files", where)
                 for name in (entry if isinstance(entry, list) else [entry])]
        looked: list[Path] = []
        for name in names:
            path = Path(name)
            candidates = [path] if path.is_absolute() else [self.playbook.parent / "vars" / path,
                                                              self.playbook.parent / path]
            for candidate in candidates:
                looked.append(candidate)
                if candidate.exists() or candidate.is_symlink():   # a file that is no regular file: load says so
                    return candidate
        raise PlaybookError(f"vars file '{' or '.join(names)}' not found (looked for "
                            f"{', '.join(str(p) for p in looked)})", where)

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
            result += self._handler(node, context) if handler else self._entry(node, context)
        return result

    def _handler(self, node: yamlsrc.YDict, context: Context) -> list[TaskDef]:
        """One entry of a handlers list: a task, the tasks of an import_tasks (each a handler), or an
        include_tasks (one handler that runs its file's tasks), as Ansible allows them."""
        node = normalize(node)
        if "block" in node:
            raise PlaybookError("Using a block as a handler is not supported.", node.location())
        for name in ("include_role", "import_role"):
            if name in node:
                raise PlaybookError(f"Using '{name}' as a handler is not supported.", node.location())
        if "import_tasks" in node:
            tasks = []
            for task in self._entry(node, context):
                task.handler_key, task.handler_names = next(self.block_ids), (task.name,)
                tasks.append(task)
            return tasks
        names = (str(node["name"]),) if "name" in node else ()
        entry = next(self.block_ids)
        if "include_tasks" in node:   # ansible-core's HandlerTaskInclude: an include's keywords, and `listen`
            check_dynamic_keywords(node, "include_tasks", handler=True)
            tasks = [include_entry(self, node, "include_tasks", context, self.validate)]
        else:
            tasks = self._entry(node, context)
        for task in tasks:
            task.handler_key = entry
            task.handler_names = names or (task.name,)
        return tasks

    def _entry(self, node: yamlsrc.YDict, context: Context) -> list[TaskDef]:
        """One item of a task list: a task, a block, or an include (blocks.py)."""
        node = normalize(node)
        if "block" in node:
            return load_block(self, node, context)
        for key in DYNAMIC:
            if key in node:
                check_dynamic_keywords(node, key)
                return [include_entry(self, node, key, context, self.validate)]
        for key in INCLUDES:
            if key in node:
                return load_include(self, node, key, context)
        return [self._task(node, context.tags, context.search, context.role, context.blocks)]

    def _task(self, node: yamlsrc.YDict, tags: set[str], search: list[Path], role: str | None,
              blocks: tuple[tuple[int, str], ...] = ()) -> TaskDef:
        for key in node:
            if key in REFUSED_KEYWORDS:
                raise PlaybookError(f"'{key}' is not supported: {REFUSED_KEYWORDS[key]}", node.location(key))
        written = next((str(k) for k in node if k not in TASK_KEYWORDS), "")
        if is_template(written):   # Ansible resolves a module by its name when the task runs: it fails there
            failing = yamlsrc.YDict({**{k: v for k, v in node.items() if k in TASK_KEYWORDS}, "fail": {
                "msg": f"couldn't resolve module/action '{written}': a module's name is not a template"}})
            failing.file, failing.pos, failing.key_pos = node.file, node.pos, node.key_pos
            node, written = failing, "fail"
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
        if type_name == "add_host" and "run_once" not in keywords.model_fields_set:   # Ansible's: once a batch
            keywords = keywords.model_copy(update={"run_once": True})
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
            action=written)

    # -- roles (gpuconf/playbook/roles.py) ------------------------------------
    def validate(self, model: type[BaseModel], data: Any, node: Any, allowed: tuple[str, ...], what: str) -> Any:
        return _validate(model, data, node, allowed, what)

    def _role_file(self, path: Path, tags: set[str], search: list[Path], role: str,
                   blocks: tuple[tuple[int, str], ...] = (), handler: bool = False) -> list[TaskDef]:
        data = self._optional(path)
        if data is None:
            return []
        if not isinstance(data, yamlsrc.YList):
            raise PlaybookError("a role's task file must be a list of tasks", Location(str(path), 1, 1))
        holder = yamlsrc.YDict({"tasks": data})
        holder.file = str(path)
        return self._tasks(data, holder, "tasks", tags, search, role=role, here=path.parent, blocks=blocks,
                           handler=handler)

    @staticmethod
    def _optional(path: Path) -> Any:
        for candidate in (path, path.with_suffix(".yaml"), path.with_suffix("")):
            if candidate.is_file():
                return yamlsrc.load_file(candidate)
        return None


def load_playbook(path: str | Path, project_dir: Path | None = None,
                  configured_roles: list[Path] | None = None, extra_vars: dict[str, Any] | None = None) -> Playbook:
    """The playbook of that path, else the one of that name shipped with gpuconf (a local file wins)."""
    choice = find_playbook(path)
    if choice is None:
        shipped = playbook_names()
        hint = did_you_mean(Path(path).name, shipped) or (f" (gpuconf ships {', '.join(shipped)})" if shipped else "")
        raise PlaybookError(f"playbook not found: {path}{hint}")
    loader = Loader(choice.path, project_dir, configured_roles)
    loader.extra_vars = dict(extra_vars or {})
    return loader.load()
