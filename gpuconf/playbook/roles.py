"""Roles, loaded as Ansible loads them, into the tasks and handlers of a play.

- A role is looked up along the loader's roles path; its `meta/main.yml` dependencies load first.
  In a play each (role, params) runs once on a host (`allow_duplicates: true` in its meta lifts
  that): each loading is kept, and a host skips one whose earlier loading completed there (one of
  its tasks ran, skipped and unreachable ones aside, and the host got past its last task), as
  Ansible's role_complete; a role named by import_role or include_role runs where it is named
  (unless it says `allow_duplicates: false` and completed before), its dependencies still once.
- What a role's tasks see (gpuconf/engine/variables.py layers them, docs/variables.md): its
  params (`- role: x` with `a: 1`, its parents' too), its vars (its parents' vars, its
  dependencies' vars/main.yml, its own vars/main.yml, then the `vars:` of its entry), its defaults
  (its dependencies' defaults, its parents', its own). The vars/main.yml and defaults of the roles
  a play names in `roles:` or with import_role are the whole play's too (public); include_role's
  are its own unless `public: true`.
- `defaults/main`, `vars/main`: .yml, .yaml, .json or no extension, or a folder of such files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuconf.errors import Location, PlaybookError, did_you_mean
from gpuconf.files import yamlsrc
from gpuconf.playbook.argspecs import validation_task
from gpuconf.playbook.models import RoleRef, TaskDef

# the playbook's Loader (gpuconf/playbook/loader.py), typed Any: it imports this module
Loader = Any
ROLE_KEYS = ("role", "tags", "when", "become", "become_user", "vars")
# a role's folders of Ansible plugins (Python that Ansible would load): gpuconf runs none
PLUGIN_DIRS = ("library", "module_utils", "filter_plugins", "test_plugins", "lookup_plugins", "action_plugins",
               "callback_plugins", "connection_plugins", "vars_plugins", "inventory_plugins", "strategy_plugins",
               "become_plugins", "cache_plugins", "cliconf_plugins", "netconf_plugins", "terminal_plugins",
               "httpapi_plugins", "doc_fragments")


@dataclass
class Loaded:
    """What one role contributes to the roles around it: its defaults (dependencies' and its own)
    and its exported vars (dependencies' vars/main.yml and its own)."""

    defaults: dict[str, Any] = field(default_factory=dict)
    exports: dict[str, Any] = field(default_factory=dict)


@dataclass
class Parent:
    """A role whose dependency is being loaded: its vars, params and defaults reach the dependency."""

    name: str
    vars: dict[str, Any]
    params: dict[str, Any]
    defaults: dict[str, Any]
    entry: str = "main"   # its tasks file being read
    path: str = ""
    # the roles that imported or included it, nearest first, with their paths (Ansible's
    # ansible_parent_role_names and ansible_parent_role_paths; none for a dependency)
    lineage: tuple[tuple[str, str], ...] = ()


def lineage_of(params: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The lineage an include's variables carry (a task of an imported or included role)."""
    return tuple(zip(params.get("ansible_parent_role_names") or (), params.get("ansible_parent_role_paths") or ()))


@dataclass
class RoleCall:
    """How a role is being loaded: from the play's roles, a dependency, or import/include_role."""

    tags: set[str]
    tasks_from: str = "main"
    vars_from: str = "main"
    defaults_from: str = "main"
    handlers_from: str = "main"
    blocks: tuple[tuple[int, str], ...] = ()
    public: bool = True
    # import_role/include_role's allow_duplicates (None: the role's meta says, as for `roles:`; those
    # two run a role again unless they say false)
    allow_duplicates: bool | None = None
    validate: bool = True   # rolespec_validate: false leaves out the argument_specs check
    dependency: bool = False   # a meta/main.yml dependency: a role may not depend on itself
    parents: tuple[Parent, ...] = ()


def role_ref(item: Any, where: Location, node: Any, validate: Any) -> RoleRef:
    if isinstance(item, str):
        return RoleRef(role=item)
    if isinstance(item, dict):
        data = dict(item)
        if "role" not in data and "name" in data:
            data["role"] = data.pop("name")
        ref: RoleRef = validate(RoleRef, data, node, ROLE_KEYS, "role")
        return ref
    raise PlaybookError("a role is a name or a mapping with 'role:'", where)


def find_role(loader: Loader, name: str, where: Location) -> Path:
    dirs: list[Path] = loader.role_dirs
    for base in dirs:
        if (base / name).is_dir():
            return base / name
    available = [p.name for base in loader.role_dirs if base.is_dir() for p in base.iterdir() if p.is_dir()]
    looked = ", ".join(str(base) for base in loader.role_dirs)
    raise PlaybookError(f"role '{name}' not found (looked in {looked}){did_you_mean(name, available)}", where)


def refuse_plugins(path: Path, name: str, where: Location) -> None:
    """A role with Ansible plugins is refused when it is read (an include_role's, when the
    playbook loads, where its name is no template)."""
    plugins = [folder for folder in PLUGIN_DIRS if (path / folder).is_dir()]
    if plugins:
        raise PlaybookError(f"role '{name}' has {plugins[0]}/: gpuconf loads no plugins (it runs no Python of a "
                            "role's; its task types, filters, tests and lookups are its own: docs/ansible.md, "
                            "'Refused'); do that work with gpuconf's, or remove the folder", where)


def role_file(folder: Path, name: str) -> Path | None:
    """`folder/name` as Ansible finds it: .yml, .yaml, .json or no extension (or a folder); a name
    that leads outside the role's folder is refused, as Ansible refuses it."""
    if not (folder / name).resolve().is_relative_to(folder.resolve()):
        raise PlaybookError(f"Unable to retrieve file contents: could not find or access '{name}' as it is not inside "
                            f"the expected role path {folder}", Location(str(folder), 1, 1))
    if name.endswith((".yml", ".yaml", ".json")):
        return folder / name if (folder / name).exists() else None
    for candidate in (folder / f"{name}.yml", folder / f"{name}.yaml", folder / f"{name}.json", folder / name):
        if candidate.exists():
            return candidate
    return None


def _files(path: Path) -> list[Path]:
    """A vars file, or the files of a folder named without an extension (`vars/main/`): a path with
    an extension is one file, and the bounded reader refuses what is no regular file."""
    if path.is_dir() and not path.suffix:
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".yml", ".yaml", ".json", ""))
    return [path]


def mapping(folder: Path, name: str, what: str) -> dict[str, Any]:
    """A role's defaults or vars file (or a folder of them, merged in name order), as a mapping."""
    path = role_file(folder, name)
    if path is None:
        return {}
    merged: dict[str, Any] = {}
    for file in _files(path):
        data = yamlsrc.load_file(file)
        if data is None:
            continue
        if not isinstance(data, dict):
            raise PlaybookError(f"{what} must be a mapping", Location(str(file), 1, 1))
        merged.update(yamlsrc.plain(data))
    return merged


def load_role(loader: Loader, ref: RoleRef, where: Location, call: RoleCall, tasks: list[TaskDef],
              handlers: list[TaskDef]) -> Loaded:
    stack = tuple(p.name for p in call.parents)
    if call.dependency and ref.role in stack:
        raise PlaybookError(f"role dependency cycle: {' -> '.join(stack + (ref.role,))}", where)
    if any(p.name == ref.role and p.entry == call.tasks_from for p in loader.role_stack):
        raise PlaybookError(f"role '{ref.role}' imports its own {call.tasks_from} tasks: a recursion with no end",
                            where)
    path = find_role(loader, ref.role, where)
    refuse_plugins(path, ref.role, where)
    meta = loader._optional(path / "meta" / "main.yml")
    if meta is not None and not isinstance(meta, dict):
        raise PlaybookError("meta/main.yml must be a mapping", Location(str(path / "meta" / "main.yml"), 1, 1))
    identity = ref.role + repr(sorted(ref.params.items())) + repr(sorted(ref.vars.items()))
    allowed = call.allow_duplicates if call.allow_duplicates is not None else bool((meta or {}).get("allow_duplicates"))
    # a role loaded again runs on a host only where its earlier loading did not complete there
    # (Ansible's role_complete: engine/hostrun.py), so each loading is kept, marked
    once = "" if allowed else identity
    own_defaults = mapping(path / "defaults", call.defaults_from, "defaults/main.yml")
    own_vars = mapping(path / "vars", call.vars_from, "vars/main.yml")
    # import_role or include_role in a role: that role, then the ones that brought it
    lineage = ((call.parents[-1].name, call.parents[-1].path),) + call.parents[-1].lineage \
        if call.parents and not call.dependency else ()
    here = Parent(ref.role, {**(call.parents[-1].vars if call.parents else {}), **own_vars, **ref.vars},
                  {**(call.parents[-1].params if call.parents else {}), **ref.params},
                  {**(call.parents[-1].defaults if call.parents else {}), **own_defaults}, call.tasks_from,
                  str(path), lineage)
    (loader.dependent_role_names if call.dependency else loader.play_role_names).append(ref.role)
    loaded = Loaded()
    deps = (meta or {}).get("dependencies") or []
    if not isinstance(deps, list):
        raise PlaybookError("dependencies must be a list of roles", yamlsrc.locate(meta, ("dependencies",)))
    for index, dep in enumerate(deps):
        dep_where = deps.location(index) if isinstance(deps, yamlsrc.YList) else where
        dep_ref = role_ref(dep, dep_where, dep, loader.validate)
        dep_call = RoleCall(call.tags | set(ref.tags), blocks=call.blocks, public=call.public,
                            parents=call.parents + (here,), dependency=True)
        found = load_role(loader, dep_ref, dep_where, dep_call, tasks, handlers)
        loaded.defaults.update(found.defaults)
        loaded.exports.update(found.exports)
    defaults = {**loaded.defaults, **here.defaults}
    role_vars = {**(call.parents[-1].vars if call.parents else {}), **loaded.exports, **own_vars, **ref.vars}
    loaded.defaults.update(own_defaults)
    loaded.exports.update(own_vars)
    loader.loaded_roles[identity] = loaded
    specs = loader._optional(path / "meta" / "argument_specs.yml")
    validation = validation_task(ref.role, path / "meta" / "argument_specs.yml", specs, ref.params,
                                 call.tasks_from) if specs is not None else None
    playbook_dir = loader.playbook.parent  # then the playbook's own templates/ and files/, as Ansible searches
    search = [path / "templates", path / "files", path,
              playbook_dir / "templates", playbook_dir / "files", playbook_dir]
    role_tags = call.tags | set(ref.tags)
    task_file = role_file(path / "tasks", call.tasks_from)
    if call.tasks_from != "main" and task_file is None:
        raise PlaybookError(f"role '{ref.role}' has no tasks file {path / 'tasks' / call.tasks_from}", where)
    loader.role_stack.append(here)   # an import_role in its tasks is its child (vars, params, defaults)
    try:
        role_tasks = loader._role_file(task_file, role_tags, search, ref.role, call.blocks) if task_file else []
    finally:
        loader.role_stack.pop()
    if validation is not None and call.validate:  # Ansible's first task of a role with a spec (playbook/argspecs.py)
        holder = yamlsrc.YDict({"tasks": validation})
        holder.file = validation.file
        role_tasks = loader._tasks(validation, holder, "tasks", role_tags, search, role=ref.role,
                                   here=path / "tasks", blocks=call.blocks) + role_tasks
    handler_file = role_file(path / "handlers", call.handlers_from)
    role_handlers = loader._role_file(handler_file, set(), search, ref.role, handler=True) if handler_file else []
    if call.public:
        loader.defaults.update(loaded.defaults)
        loader.role_vars.update(loaded.exports)
    instance = next(loader.block_ids)
    for handler in role_handlers:   # notify finds a role's handler as "ROLE : name" too
        handler.handler_names += tuple(f"{ref.role} : {name}" for name in handler.handler_names)
    for task in role_tasks + role_handlers:
        if task.role_instance:
            continue   # a role this one includes: that role's own
        task.role_instance, task.role_once = instance, once
        if lineage:
            task.include_params = {"ansible_parent_role_names": [name for name, _ in lineage],
                                   "ansible_parent_role_paths": [folder for _, folder in lineage],
                                   **task.include_params}
        task.role_params, task.role_vars, task.role_defaults = here.params, role_vars, defaults
        task.role_path = str(path)
        task.role_when = ([ref.when] if ref.when is not None else []) + task.role_when
        if task.become is None:
            task.become = ref.become
        if task.become_user is None:
            task.become_user = ref.become_user
    tasks += role_tasks
    handlers += role_handlers
    return loaded
