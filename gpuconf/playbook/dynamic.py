"""Ansible's dynamic includes: `include_tasks` and `include_role` are tasks of their own, read when
they run on a host, unlike `import_tasks` and `import_role`, read when the playbook loads
(blocks.py).

- The include is judged once: its `when` (not repeated on the tasks it brings), its `loop` (the
  file, or the role, once per item, with the item's variable), its templated file or role name.
- Its `tags` select the include itself; the tasks it brings keep their own tags, those of the
  blocks and play around it, and those of `apply:`. Its `vars` are include params of the tasks it
  brings (above set_fact and role params); `apply:` gives them keywords (tags, become, ...).
- include_role: the role's vars and defaults are its tasks' own unless `public: true`.

At load a dynamic include is one TaskDef (type include_tasks or include_role) that carries where it
was read (`context`); engine/includes.py runs it, asking `IncludeLoader` for the tasks."""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

from gpuconf.errors import Location, PlaybookError, did_you_mean
from gpuconf.files import yamlsrc
from gpuconf.playbook.models import TaskDef, TaskKeywords
from gpuconf.playbook.roles import Parent, RoleCall, lineage_of, load_role, refuse_plugins

Loader = Any   # the playbook's Loader (loader.py imports this module)
DYNAMIC = ("include_tasks", "include_role")
# what an include task takes besides its file (Ansible's include_tasks / include_role keywords)
KEYWORDS = ("name", "when", "tags", "become", "become_user", "vars", "loop", "loop_control", "with_items",
            "with_dict", "ignore_errors", "register", "apply", "no_log", "run_once", "delegate_to", "timeout",
            "listen", "notify", "changed_when", "failed_when", "any_errors_fatal", "check_mode", "debugger",
            "ignore_unreachable")
APPLY = ("tags", "become", "become_user", "ignore_errors", "no_log", "when", "vars", "timeout", "run_once",
         "delegate_to", "check_mode", "environment", "any_errors_fatal")
BLOCK_INHERITED = ("ignore_errors", "no_log", "timeout", "delegate_to", "check_mode", "any_errors_fatal",
                   "ignore_unreachable")
ROLE_OPTIONS = ("name", "tasks_from", "vars_from", "defaults_from", "handlers_from", "public", "allow_duplicates",
                "rolespec_validate", "apply")


def include_entry(loader: Loader, node: yamlsrc.YDict, key: str, context: Any, validate: Any) -> TaskDef:
    """The include task itself, as the play's task list holds it."""
    for name in node:
        if name != key and name not in KEYWORDS:
            raise PlaybookError(f"unknown {key} key '{name}'{did_you_mean(str(name), KEYWORDS)}", node.location(name))
    spec = node[key]
    where = node.location(key)
    if key == "include_tasks":
        if isinstance(spec, dict):
            unknown = [k for k in spec if k not in ("file", "apply", "_raw_params")]
            if unknown:
                raise PlaybookError(f"include_tasks: unknown key '{unknown[0]}' (it takes file and apply)", where)
            params = {"file": spec.get("file", spec.get("_raw_params")), "apply": spec.get("apply")}
        else:
            params = {"file": spec, "apply": None}
        if params["file"] is None or params["file"] == "":
            raise PlaybookError("No file specified for include_tasks", where)
    else:
        if isinstance(spec, str):
            spec = {"name": spec} if "=" not in spec else dict(word.split("=", 1) for word in spec.split())
        if not isinstance(spec, dict) or "name" not in spec:
            raise PlaybookError("include_role needs the role's name: `include_role: {name: ROLE}`", where)
        unknown = [k for k in spec if k not in ROLE_OPTIONS]
        if unknown:
            raise PlaybookError(f"include_role: unknown key '{unknown[0]}' (it takes {', '.join(ROLE_OPTIONS)})",
                                where)
        for option in ("tasks_from", "vars_from", "defaults_from", "handlers_from"):
            if option in spec and not isinstance(spec[option], str):
                raise PlaybookError(f"Expected a string for {option} but got {type(spec[option]).__name__}", where)
        params = dict(yamlsrc.plain(spec))
        role = params["name"]
        found = [base / role for base in loader.role_dirs if isinstance(role, str) and "{" not in role
                 and (base / role).is_dir()]
        if found:   # a role of plugins is refused before anything runs, as an import_role's
            refuse_plugins(found[0], role, where)
    if "apply" in node:
        params["apply"] = node["apply"]
    apply = params.get("apply") or {}
    if not isinstance(apply, dict) or any(k not in APPLY for k in apply):
        raise PlaybookError(f"{key}: apply takes a mapping of {', '.join(APPLY)}", where)
    params["apply"] = yamlsrc.plain(apply)
    keyword_data = {k: v for k, v in node.items() if k in KEYWORDS and k != "apply"}
    keywords = validate(TaskKeywords, keyword_data, node, KEYWORDS, key)
    target = params.get("file") if key == "include_tasks" else params.get("name")
    name = keywords.name or (f"include_role : {target}" if key == "include_role" else key)
    params["own"] = sorted(keywords.model_fields_set)   # the include's own keywords: the rest came from its blocks
    return TaskDef(name=str(name), type=key, params=yamlsrc.plain(params), keywords=keywords,
                   location=node.location(), role=context.role, tags=set(keywords.tags) | context.tags,
                   search_paths=list(context.search), become=keywords.become, become_user=keywords.become_user,
                   blocks=context.blocks, context=context)


class IncludeLoader:
    """Reads the tasks a dynamic include brings, when it runs (the hosts' threads share it)."""

    def __init__(self, loader: Loader):
        self.loader = loader
        self.lock = threading.Lock()
        self.handlers: list[TaskDef] = []   # those of roles include_role brought at run time

    def task_file(self, include: TaskDef, name: str) -> Path:
        context = include.context
        candidates = [Path(name)] if Path(name).is_absolute() else [context.here / name]
        if include.role_path:
            candidates += [Path(include.role_path) / "tasks" / name, Path(include.role_path) / "handlers" / name]
        candidates.append(self.loader.playbook.parent / name)
        for path in candidates:
            if path.is_file():
                return path
        raise PlaybookError(f"include_tasks: could not find or access '{name}' (looked for "
                            f"{', '.join(str(p) for p in candidates)})", include.location)

    def include_tasks(self, include: TaskDef, name: str) -> list[TaskDef]:
        path = self.task_file(include, name)
        context = include.context
        with self.lock:
            data = yamlsrc.load_file(path)
            if data is None:
                return []
            if not isinstance(data, yamlsrc.YList):
                raise PlaybookError("a task file is a list of tasks", Location(str(path), 1, 1))
            holder = yamlsrc.YDict({"tasks": data})
            holder.file = str(path)
            before = len(self.loader.included_handlers)
            # an import_role in a role's included file is that role's child, as one in its own tasks
            inside = [self._parent(include)] if include.role else []
            self.loader.role_stack.extend(inside)
            try:
                tasks = self.loader._tasks(data, holder, "tasks", set(context.tags), context.search,
                                           role=context.role, here=path.parent)
            finally:
                del self.loader.role_stack[len(self.loader.role_stack) - len(inside):]
            self._keep(self.loader.included_handlers[before:])   # those of roles it imports
        return [self._brought(include, task) for task in tasks]

    def include_role(self, include: TaskDef, params: dict[str, Any]) -> tuple[list[TaskDef], dict[str, Any] | None]:
        """The role's tasks, and what it exposes with `public: true` (its vars and defaults, for the
        later tasks of the host that ran it: the engine's to keep, per host), else None."""
        context = include.context
        public = params.get("public", False) in (True, "yes", "true", "True")
        call = RoleCall(set(context.tags), tasks_from=str(params.get("tasks_from", "main")),
                        vars_from=str(params.get("vars_from", "main")),
                        defaults_from=str(params.get("defaults_from", "main")),
                        handlers_from=str(params.get("handlers_from", "main")), public=False,
                        allow_duplicates=str(params.get("allow_duplicates", True)).lower() not in ("false", "no", "0"),
                        validate=str(params.get("rolespec_validate", True)).lower() not in ("false", "no", "0"),
                        parents=(self._parent(include),) if include.role else ())
        from gpuconf.playbook.models import RoleRef

        tasks: list[TaskDef] = []
        handlers: list[TaskDef] = []
        with self.lock:
            before = len(self.loader.included_handlers)
            loaded = load_role(self.loader, RoleRef(role=str(params["name"])), include.location, call, tasks, handlers)
            self._keep(handlers + self.loader.included_handlers[before:])
        exposed = {"vars": dict(loaded.exports), "defaults": dict(loaded.defaults)} if public else None
        return [self._brought(include, task) for task in tasks], exposed

    @staticmethod
    def _parent(include: TaskDef) -> Parent:
        """The role an include in a role is part of, for the role it includes or imports."""
        return Parent(str(include.role), include.role_vars, include.role_params, include.role_defaults, entry="",
                      path=include.role_path, lineage=lineage_of(include.include_params))

    def _keep(self, handlers: list[TaskDef]) -> None:
        """Handlers of the roles read while the play runs: a notify finds them from then on."""
        known = {(h.role, h.name, str(h.location)) for h in self.handlers}
        self.handlers += [h for h in handlers if (h.role, h.name, str(h.location)) not in known]

    @staticmethod
    def _brought(include: TaskDef, task: TaskDef) -> TaskDef:
        """A task an include brought: its include params, the role and conditions around the
        include, the keywords of `apply:`."""
        apply = include.params.get("apply") or {}
        keywords = task.keywords
        own = set(include.params.get("own") or ())
        # what the blocks around the include gave it (not its own keywords) reaches its tasks, then `apply`
        inherited = {k: getattr(include.keywords, k) for k in BLOCK_INHERITED
                     if k in include.keywords.model_fields_set and k not in own}
        updates = {k: v for k, v in {**inherited, **apply}.items()
                   if k in ("ignore_errors", "no_log", "timeout", "run_once", "delegate_to", "check_mode",
                            "any_errors_fatal", "ignore_unreachable") and k not in keywords.model_fields_set}
        if apply.get("vars"):
            updates["vars"] = {**apply["vars"], **keywords.vars}
        if updates:
            keywords = keywords.model_copy(update=updates)
        role_fields: dict[str, Any] = {} if task.role_instance or not include.role else {
            "role_instance": include.role_instance, "role_params": include.role_params,
            "role_vars": include.role_vars, "role_defaults": include.role_defaults, "role_path": include.role_path}
        applied = apply.get("tags") or []
        tags = task.tags | set([t.strip() for t in applied.split(",")] if isinstance(applied, str) else applied)
        when = ([apply["when"]] if apply.get("when") is not None else [])
        return dataclasses.replace(
            task, keywords=keywords, tags=tags, section=include.section,
            include_params={**include.include_params, **include.keywords.vars, **task.include_params},
            role_when=include.role_when + when + task.role_when,
            become=task.become if task.become is not None else apply.get("become", include.become),
            become_user=task.become_user or apply.get("become_user") or include.become_user, **role_fields)

