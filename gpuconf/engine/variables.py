"""The one variable layering, used by `validate`, `check`, `apply` and `gpuconf inventory --host`.

Highest precedence first, Ansible's levels (docs/variables.md has the table):

    magic variables (inventory_hostname, group_names, groups, hostvars, play_hosts, facts, ...),
      role_name and role_path
    extra vars (-e)
    a loop's item (`item`, or loop_control.loop_var)
    include params (the `vars:` of include_tasks, import_tasks, include_role, import_role)
    role params (`- role: x` with `a: 1`)
    registered results and set_fact
    include_vars
    task vars (a block's below its tasks')
    role vars (the task's role: vars/main.yml, then its entry's `vars:`), then the play's roles'
    play vars_files over play vars
    the inventory (inventory.host_vars: group vars, group_vars/ files, host vars, host_vars/ files)
    role defaults (the task's role's, then the play's roles')
"""
from __future__ import annotations

import sys
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from gpuconf.inventory.hosts import Inventory
from gpuconf.playbook.models import Play, TaskDef
from gpuconf.templating.render import OMIT, Vars, Verbatim, render


class LazyGroups(Mapping[str, list[str]]):
    """`groups`: every group's hosts, computed when a template asks for one."""

    def __init__(self, inventory: Inventory):
        self.inventory = inventory
        self.cache: dict[str, list[str]] = {}
        self.seen = inventory.version

    def __getitem__(self, name: str) -> list[str]:
        if name not in self.inventory.groups:
            raise KeyError(name)
        if self.inventory.version != self.seen:   # add_host or group_by changed the run's inventory
            self.cache.clear()
            self.seen = self.inventory.version
        if name not in self.cache:
            self.cache[name] = self.inventory.group_members(name)
        return self.cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.inventory.groups)

    def __len__(self) -> int:
        return len(self.inventory.groups)

    def __repr__(self) -> str:  # `{{ groups }}` in a string shows the groups, not an object
        return repr(dict(self))


class LazyHostvars(Mapping[str, Any]):
    """`hostvars`: every host's inventory variables, merged when a template asks for one, with
    `facts` (and `ansible_facts`) once the run has gathered that host's facts."""

    def __init__(self, inventory: Inventory, host_facts: Mapping[str, Any] | None = None,
                 registered: Mapping[str, Mapping[str, Any]] | None = None,
                 included: Mapping[str, Mapping[str, Any]] | None = None):
        self.inventory = inventory
        self.host_facts = host_facts if host_facts is not None else {}
        self.registered = registered if registered is not None else {}  # register and set_fact, per host
        self.included = included if included is not None else {}  # include_vars, per host

    def __getitem__(self, name: str) -> dict[str, Any]:
        if name not in self.inventory.hosts:
            raise KeyError(name)
        facts = self.host_facts.get(name)
        registered = {**(self.included.get(name) or {}), **(self.registered.get(name) or {})}
        if not facts:
            return {**self.inventory.host_vars(name), "inventory_hostname": name, **registered}
        return {**self.inventory.host_vars(name), "inventory_hostname": name, "facts": facts,
                "ansible_facts": facts, **fact_aliases(facts), **registered}

    def __iter__(self) -> Iterator[str]:
        return iter(self.inventory.hosts)

    def __len__(self) -> int:
        return len(self.inventory.hosts)

    def __repr__(self) -> str:
        return repr(dict(self))


# Ansible's top-level fact names, where gpuconf has the fact (facts.* is the whole set)
ANSIBLE_FACTS = {
    "ansible_hostname": ("hostname",), "ansible_nodename": ("hostname",), "ansible_architecture": ("architecture",),
    "ansible_kernel": ("kernel",), "ansible_processor_vcpus": ("cpus",), "ansible_memtotal_mb": ("memory_mb",),
    "ansible_distribution_version": ("os", "version_id"),
}
FACT_NAMES = frozenset([*ANSIBLE_FACTS, "ansible_distribution", "ansible_os_family"])   # what fact_aliases gives


def fact_aliases(facts: Any) -> dict[str, Any]:
    """`ansible_hostname` and the others, from gathered facts (unknowable facts give unknowable ones)."""
    if not isinstance(facts, Mapping):
        names = [*ANSIBLE_FACTS, "ansible_distribution", "ansible_os_family"]
        return {name: facts for name in names} if facts is not None else {}
    aliases: dict[str, Any] = {}
    for name, path in ANSIBLE_FACTS.items():
        value: Any = facts
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is not None:
            aliases[name] = value
    os = facts.get("os")
    if isinstance(os, Mapping) and os.get("id"):  # names from the platform's one table (gpuconf/facts/platform.py)
        distribution = os.get("distribution") or str(os["id"]).capitalize()
        aliases.update(ansible_distribution=distribution, ansible_os_family=os.get("family") or distribution)
    return aliases


def group_names(inventory: Inventory, host: str) -> list[str]:
    """Ansible's `group_names`: the host's groups, sorted, without `all` and `ungrouped`."""
    return sorted(g for g in inventory.host_groups(host) if g not in ("all", "ungrouped"))


def magic_variables(inventory: Inventory, host: str, play_hosts: list[str], check_mode: bool, facts: Any,
                    shared: dict[str, Any] | None = None, batch: list[str] | None = None,
                    tags: Collection[str] = (), skip: Collection[str] = ()) -> dict[str, Any]:
    """What a task on `host` sees besides the variables it was given. `shared` holds the
    run-wide lazy `groups`/`hostvars`, so that every host's tasks use one copy. `batch` is the
    host's `serial` batch (Ansible's `ansible_play_batch`, and `play_hosts`); all the play's hosts without serial."""
    shared = shared if shared is not None else {"groups": LazyGroups(inventory), "hostvars": LazyHostvars(inventory)}
    batch = play_hosts if batch is None else batch
    run_tags, skip_tags = sorted(tags) or ["all"], sorted(skip)   # Ansible's ansible_run_tags, ansible_skip_tags
    return {
        "ansible_playbook_python": sys.executable,
        # where the host is reached (its `ansible_host`, else its name), as Ansible's connection sets it
        "ansible_host": inventory.host_vars(host).get("ansible_host", host),
        "inventory_hostname": host, "inventory_hostname_short": host.split(".", 1)[0],
        "group_names": group_names(inventory, host), "groups": shared["groups"], "hostvars": shared["hostvars"],
        "play_hosts": batch, "ansible_play_hosts": play_hosts, "ansible_play_batch": batch,
        "ansible_play_hosts_all": play_hosts,
        "ansible_check_mode": check_mode, "ansible_run_tags": run_tags, "ansible_skip_tags": skip_tags,
        "facts": facts, "ansible_facts": facts, **fact_aliases(facts),
        "omit": OMIT,
    }


def play_variables(play: Play, playbook: Path, inventory: Inventory) -> dict[str, Any]:
    """The magic variables of a play: where its playbook and inventory are, its name and roles."""
    source = Path(inventory.source.split(", ")[0])
    named, dependent = play.role_names
    dependent = list(dict.fromkeys(dependent))
    return {"playbook_dir": str(playbook.resolve().parent), "ansible_play_name": play.name,
            "inventory_dir": str(source.resolve().parent if source.is_file() else source.resolve()) if source.exists()
            else None, "inventory_file": str(source.resolve()) if source.is_file() else None,
            "ansible_play_role_names": named, "role_names": named, "ansible_dependent_role_names": dependent,
            "ansible_role_names": list(dict.fromkeys(dependent + named))}


def connection_variables(inventory: Inventory, host: str, extra_vars: Mapping[str, Any],
                         names: Collection[str]) -> dict[str, Any]:
    """The host's inventory variables with those in `names` (its connection's) rendered where they
    are templates, as Ansible renders `ansible_python_interpreter="{{ ansible_playbook_python }}"`."""
    variables = inventory.host_vars(host)
    templated = [k for k in names if isinstance(variables.get(k), str) and "{{" in variables[k]]
    if not templated:
        return variables
    scope = Vars(Verbatim(magic_variables(inventory, host, [host], False, None)), extra_vars, variables)
    return {**variables, **{k: render(variables[k], scope) for k in templated}}


def task_variables(magic: Verbatim, extra_vars: Mapping[str, Any], registered: Mapping[str, Any],
                   task: TaskDef, play: Play, host_vars: Mapping[str, Any], secrets: Any = None,
                   included: Mapping[str, Any] | None = None,
                   public: tuple[Mapping[str, Any], Mapping[str, Any]] = ({}, {}),
                   fact_names: Mapping[str, Any] | None = None) -> Vars:
    """The layers of one task on one host, highest precedence first: Ansible's 22 levels
    (docs/variables.md). `magic` is verbatim (never rendered as a template): build it once per host
    and facts, not per task. `secrets`, the host's SecretSet (engine/secrets.py), learns each string
    a template makes from a secret. `included`: what include_vars set on the host; `public`: the
    vars and defaults of the roles an include_role made public there; `fact_names`: the facts'
    ansible_ names (ansible_nodename, ...), at Ansible's level of host facts."""
    item = Verbatim(task.item_vars) if task.item_vars else {}  # a loop's item: from the host or rendered already
    own: dict[str, Any] = {"role_name": task.role, "role_path": task.role_path} if task.role else {}
    told = task.keywords.check_mode if task.keywords.check_mode is not None else play.keywords.check_mode
    if told is not None:
        own["ansible_check_mode"] = told
    every = AllVars()
    own["vars"] = every   # Ansible's `vars`: every variable the task sees
    target = str(task.keywords.delegate_to or "").strip()
    if target and "{{" not in target:   # Ansible's ansible_delegated_vars: the delegate's own variables
        hostvars = magic["hostvars"] if "hostvars" in magic else {}
        own["ansible_delegated_vars"] = {target: dict(hostvars[target]) if target in hostvars else {
            "inventory_hostname": target, "ansible_host": target}}
    variables = Vars(Verbatim(own), magic, extra_vars, item, task.include_params, task.role_params,
                     registered, included or {}, task.keywords.vars, task.role_vars, public[0], play.role_vars,
                     play.vars, fact_names or {}, host_vars, task.role_defaults, public[1], play.role_defaults,
                     secrets=secrets)
    every.variables = variables
    return variables


class AllVars(Mapping[str, Any]):
    """The `vars` magic variable: the task's own variables, looked up as its templates look them up."""

    def __init__(self) -> None:
        self.variables: Mapping[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        return self.variables[key]

    def __contains__(self, key: object) -> bool:
        return key in self.variables

    def __iter__(self) -> Iterator[str]:
        return iter(self.variables)

    def __len__(self) -> int:
        return len(self.variables)

    def __repr__(self) -> str:
        return "<every variable of the task>"
