"""The planning half of a play on a host: its variables, each task's conditions, rendered and
validated params and declared reads, before anything runs (gpuconf/engine/hostrun.py runs them).

`plan()` turns a host's task list into a value, a HostPlan, with the host's facts not known yet:
each task's params and reads where they follow from variables alone, or the reason they wait for
the host's facts (a condition or a param that reads them, a loop, a step the engine runs itself).
The run uses the same methods once facts are in; `--list-tasks -v` prints the plan.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuconf.engine.context import Resolver, bounded
from gpuconf.engine.flow import item_task, loop_items
from gpuconf.engine.joint import EVERY_NAME, refusal, registered_names
from gpuconf.engine.options import RunOptions
from gpuconf.engine.plancache import PlanCache
from gpuconf.engine.secrets import SecretSet, redact_value, secret_values
from gpuconf.engine.validate import Unknowable, contains_unknowable
from gpuconf.engine.variables import FACT_NAMES, fact_aliases, task_variables
from gpuconf.errors import GpuconfError, TaskError
from gpuconf.facts.base import Fact
from gpuconf.playbook.models import ENGINE_ACTIONS, Play, TaskDef
from gpuconf.tasks.base import TaskType
from gpuconf.tasks.registry import TASK_TYPES, build_params
from gpuconf.templating.conditions import evaluate_when
from gpuconf.templating.render import Vars, Verbatim, render

UNKNOWABLE = Unknowable()  # stateless: one for every host, so that speculative plans can be shared


@dataclass(frozen=True)
class PlannedTask:
    """One task as planned before the host's facts are known: its validated params and the facts
    its check will read, or `waits`, why those are decided on the host once its facts are in."""

    task: TaskDef
    params: dict[str, Any] | None
    reads: tuple[str, ...]
    waits: str = ""
    condition: str = ""  # a condition that reads the host's facts, judged there


@dataclass(frozen=True)
class HostPlan:
    host: str
    play: str
    tasks: tuple[PlannedTask, ...]


class HostPlanner:
    """Variables, conditions, params and reads of one play's tasks on one host."""

    def __init__(self, play: Play, host: str, host_vars: dict[str, Any], magic: dict[str, Any],
                 options: RunOptions, registered: dict[str, Any], plan_cache: PlanCache | None = None,
                 included: dict[str, Any] | None = None):
        self.play, self.host, self.options = play, host, options
        self.host_vars, self.magic, self.registered = host_vars, magic, registered
        self.included: dict[str, Any] = {} if included is None else included  # what include_vars set
        # what the roles an include_role made public on this host expose (beside the play's public roles)
        self.public_vars: dict[str, Any] = {}
        self.public_defaults: dict[str, Any] = {}
        # what this host's output must not show; its templates add what they make from a secret
        self.secrets = SecretSet(secret_values([options.extra_vars, play.vars, host_vars, play.role_defaults,
                                                play.role_vars]))
        self.plan_cache = plan_cache  # shared by the run's hosts (gpuconf/engine/plancache.py)
        self.facts: dict[str, Any] = {}
        self._magic: Verbatim | None = None
        self._fact_names: Verbatim = Verbatim({})
        self._registered = Verbatim(registered)

    # -- variables ------------------------------------------------------------
    def handler_name(self, name: str) -> str | None:
        """A templated handler name, rendered with the play's variables (None: it cannot be)."""
        try:
            return str(render(name, Vars(self.options.extra_vars, self.play.vars, self.host_vars, self.magic)))
        except GpuconfError:
            return None

    def flag(self, task: TaskDef, name: str) -> bool:
        """A boolean keyword of the task (ignore_errors, run_once, ignore_unreachable), a template
        rendered here; where neither the task nor its blocks say, its play's (ignore_errors and
        ignore_unreachable are play keywords too, as in Ansible)."""
        value = getattr(task.keywords, name)
        if name not in task.keywords.model_fields_set and getattr(self.play.keywords, name, None) is not None:
            value = getattr(self.play.keywords, name)
        if isinstance(value, str):
            return evaluate_when(value.strip().removeprefix("{{").removesuffix("}}"), self.task_vars(task))
        return bool(value)

    def task_vars(self, task: TaskDef, facts: Any = None) -> Vars:
        facts = self.facts if facts is None else facts
        if self._magic is None or self._magic["facts"] is not facts:  # built once per facts object, not per task
            # a fact's ansible_ name sits at Ansible's level of host facts: under play vars and set_fact
            aliases = fact_aliases(facts)
            self._magic = Verbatim({**{k: v for k, v in self.magic.items() if k not in FACT_NAMES},
                                    "facts": facts, "ansible_facts": facts})
            self._fact_names = Verbatim(aliases)
        return task_variables(self._magic, self.options.extra_vars, self._registered, task, self.play,
                              self.host_vars, self.secrets, self.included, (self.public_vars, self.public_defaults),
                              self._fact_names)

    def render_task(self, task: TaskDef, facts: Any = None) -> tuple[Vars, dict[str, Any]] | None:
        """Vars and rendered (not yet validated) params, or None when `when` is false."""
        return self._render(task, self.task_vars(task, facts))

    def _render(self, task: TaskDef, variables: Vars) -> tuple[Vars, dict[str, Any]] | None:
        if not self.holds(task, variables):
            return None
        return variables, render(task.params, variables)

    @staticmethod
    def holds(task: TaskDef, variables: Vars) -> bool:
        """The task's conditions (its roles' `when`, then its own) are all true."""
        return all(evaluate_when(condition, variables) for condition in task.role_when) and (
            task.keywords.when is None or evaluate_when(task.keywords.when, variables))

    @staticmethod
    def false_condition(task: TaskDef, variables: Vars) -> Any:
        """The first of the task's conditions that is false, as written (Ansible registers it)."""
        conditions = [*task.role_when, *([task.keywords.when] if task.keywords.when is not None else [])]
        for condition in conditions:
            for one in condition if isinstance(condition, list) else [condition]:
                if not evaluate_when(one, variables):
                    return one
        return None

    def prepare(self, task: TaskDef, facts: Any = None) -> tuple[Vars, Any] | None:
        """Vars and rendered params, or None when `when` is false. Params are shared with the
        run's other hosts that look up the same objects (gpuconf/engine/plancache.py): the task
        whole (`params`: conditions and params), and its params alone (`params only`), since a
        condition such as `facts.nvlink_fabric == 'none'` reads this host's own facts object."""
        variables = self.task_vars(task, facts)
        task_type = TASK_TYPES[task.type]
        cache = self.plan_cache if not task.item_vars and type(task_type).resolve is TaskType.resolve else None
        if cache is None:
            if not self.holds(task, variables):
                return None
            return variables, self._params(task, task_type, variables)
        hit, params = cache.get(task, variables, kind="params")
        if hit:
            return None if params is None else (variables, params)
        whole: dict[str, tuple[Any, bool]] = {}
        variables.reads = whole
        holds = self.holds(task, variables)
        variables.reads = None
        if not holds:
            cache.put(task, whole, None, kind="params")
            return None
        # fresh Vars: a variable the conditions rendered would be served from their cache and
        # not be recorded among the params' own lookups
        variables = self.task_vars(task, facts)
        hit, params = cache.get(task, variables, kind="params only")
        if hit:
            return variables, params
        own: dict[str, tuple[Any, bool]] = {}
        variables.reads = own
        params = self._params(task, task_type, variables)
        variables.reads = None
        cache.put(task, own, params, kind="params only")
        cache.put(task, whole | own, params, kind="params")
        return variables, params

    @staticmethod
    def _params(task: TaskDef, task_type: TaskType, variables: Vars) -> Any:
        values = task_type.resolve(render(task.params, variables), Resolver(variables, task.search_paths))
        try:
            return build_params(task.type, values)
        except ValueError as exc:
            raise TaskError(f"{task.type}: {exc}") from None

    def facts_of(self, tasks: list[TaskDef], speculative: bool = False,
                  left: list[TaskDef] | None = None) -> list[Any]:
        """Facts the tasks' checks will read. `speculative` renders before host
        facts are known: conditions on facts count as true, and tasks whose
        params depend on facts are left for later (appended to `left`), so that
        one round trip can carry both the host facts and nearly every task's facts."""
        facts = []
        for task in tasks:
            if task.type in ENGINE_ACTIONS or task.become_user or task.keywords.delegate_to:
                continue  # set_fact and debug read nothing; the others read as someone else, or elsewhere
            if speculative:
                found = self._loop_facts(task, True) if task.keywords.items is not None \
                    else self._speculative_facts(task)
                if not found and left is not None:
                    left.append(task)  # read nothing known yet: planned again once the facts are in
                facts += found
                continue
            if task.keywords.items is not None:
                facts += self._loop_facts(task, speculative)
                continue
            try:
                prepared = self.prepare(task)
            except (GpuconfError, Exception):  # noqa: BLE001 - the task itself reports this later
                continue
            if prepared is not None:
                facts += self.reads(task, prepared[1])
        return facts

    def _loop_facts(self, task: TaskDef, speculative: bool) -> list[Any]:
        """The facts of every item of a loop whose items are known now (not from facts, when speculative)."""
        try:
            variables = self.task_vars(task, UNKNOWABLE if speculative else None)
            every = loop_items(task, variables)
            items = [item_task(task, item, index, variables, every) for index, item in enumerate(every)]
        except (GpuconfError, Exception):  # noqa: BLE001 - the task itself reports this later
            return []
        if speculative:  # not through the plan cache: an item's task is a new object on every host
            return [fact for item in items for fact in self._speculative_facts(item, use_cache=False)]
        return self.facts_of(items)

    def _speculative_facts(self, task: TaskDef, use_cache: bool = True) -> list[Any]:
        """The facts of a task rendered with facts unknowable; none if they depend on facts."""
        variables = self.task_vars(task, UNKNOWABLE)
        if self.plan_cache is not None and use_cache:
            hit, cached = self.plan_cache.get(task, variables)
            if hit:
                return list(cached)
            variables.reads = {}
        try:
            rendered = self._render(task, variables)
            # the rendered values, not the validated model, are checked for what is not known
            # yet: cheaper, and a field that coerced an unknowable value cannot hide it
            if rendered is None or contains_unknowable(rendered[1]):
                facts = []
            else:
                values = TASK_TYPES[task.type].resolve(rendered[1], Resolver(rendered[0], task.search_paths))
                facts = self.reads(task, build_params(task.type, values))
        except (GpuconfError, Exception):  # noqa: BLE001 - the task itself reports this later
            return []
        if self.plan_cache is not None and use_cache and variables.reads is not None:
            self.plan_cache.put(task, variables.reads, facts)
        return facts


    @staticmethod
    def reads(task: TaskDef, params: Any) -> list[Fact]:
        return [bounded(f, task.keywords.timeout) for f in TASK_TYPES[task.type].reads(params)]

    def joinable(self, first: TaskDef, upcoming: list[TaskDef]) -> list[tuple[TaskDef, Any]]:
        """The tasks right after `first` that may apply together with it, with their params
        (gpuconf/engine/joint.py): up to the first that may not, or whose condition is false."""
        found: list[tuple[TaskDef, Any]] = []
        registers = registered_names([first])
        for task in upcoming:
            if refusal(first, task) is not None:
                break
            variables = self.task_vars(task)
            variables.reads = {}   # which variables its conditions and params look up
            try:
                params = self._params(task, TASK_TYPES[task.type], variables) if self.holds(task, variables) else None
            except Exception:  # noqa: BLE001 - the task reports it at its turn
                break
            if params is None or registers & set(variables.reads) or EVERY_NAME in variables.reads:
                break
            found.append((task, params))
            registers |= registered_names([task])
        return found


    # -- the plan as a value ---------------------------------------------------
    def plan(self, tasks: list[TaskDef]) -> HostPlan:
        """What each task will do here, as far as it is known before the host's facts."""
        return HostPlan(self.host, self.play.name, tuple(self._planned(task) for task in tasks))

    def _planned(self, task: TaskDef) -> PlannedTask:
        if task.type in ENGINE_ACTIONS:
            return PlannedTask(task, None, (), "a step the engine runs itself")
        if task.keywords.items is not None:
            return PlannedTask(task, None, (), "a loop: its items are rendered on the host")
        variables = self.task_vars(task, UNKNOWABLE)
        looked: dict[str, tuple[Any, bool]] = {}
        variables.reads = looked
        try:
            holds = self.holds(task, variables)
            variables.reads = None
            conditions = [*task.role_when, *([task.keywords.when] if task.keywords.when is not None else [])]
            on_host = " and ".join(str(c) for c in conditions) if any(
                isinstance(value, Unknowable) for value, _ in looked.values()) else ""
            if not holds:
                return PlannedTask(task, None, (), "its condition is false: skipped")
            rendered = render(task.params, variables)
            if contains_unknowable(rendered):
                return PlannedTask(task, None, (), "its params read the host's facts", on_host)
            values = TASK_TYPES[task.type].resolve(rendered, Resolver(variables, task.search_paths))
            params = build_params(task.type, values)
        except (GpuconfError, Exception) as exc:  # noqa: BLE001 - the run reports it on the task
            return PlannedTask(task, None, (), f"fails on the host: {self.secrets.redact(str(exc))}")
        shown = redact_value(params.model_dump(mode="json"), self.secrets)
        return PlannedTask(task, shown, tuple(f.key for f in self.reads(task, params)), "", on_host)
