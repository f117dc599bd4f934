"""One play on one host: facts, then each task's check (and apply), then handlers.

Exceptions become results here and nowhere else: a task that raises is a
failed (or unknown) task, a lost connection makes the host unreachable.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpuconf.engine.actions import run_action
from gpuconf.engine.boundary import internal_error
from gpuconf.engine.context import HostApply, Resolver, bounded, read_facts
from gpuconf.engine.delegate import Delegates, reads_elsewhere, task_session
from gpuconf.engine.entry import read_command, run_entry
from gpuconf.engine.flow import BlockRun, RunOnce, item_task, judge, loop_items
from gpuconf.engine.options import RunOptions, not_run_results, task_selected
from gpuconf.engine.plancache import PlanCache
from gpuconf.engine.registered import KnownOnlyAfterApply, registered_value
from gpuconf.engine.secrets import SecretSet, mark_known, redact_result, secret_values
from gpuconf.engine.session import HostSession
from gpuconf.engine.validate import Unknowable, contains_unknowable
from gpuconf.engine.variables import fact_aliases, task_variables
from gpuconf.errors import ConnectError, GpuconfError, RemoteError, TaskError, TemplateError
from gpuconf.facts import gather
from gpuconf.facts.base import FactUnavailable
from gpuconf.playbook.models import ENGINE_ACTIONS, Play, TaskDef
from gpuconf.results import ChangeReport, RunEvents, Status, TaskResult
from gpuconf.tasks.base import Refused, TaskType, Unknown, Verdict
from gpuconf.tasks.registry import TASK_TYPES, build_params
from gpuconf.templating import Vars, Verbatim, evaluate_when, render

UNKNOWABLE = Unknowable()  # stateless: one for every host, so that speculative plans can be shared


class HostUnreachable(Exception):
    pass


class PlayOnHost:
    def __init__(self, play: Play, host: str, host_vars: dict[str, Any], magic: dict[str, Any],
                 session: HostSession, options: RunOptions, registered: dict[str, Any],
                 emit: Callable[[TaskResult], None], stop: Callable[[], bool],
                 deadline_reached: Callable[[], bool] = lambda: False, events: RunEvents | None = None,
                 plan_cache: PlanCache | None = None, run_once: RunOnce | None = None,
                 host_facts: dict[str, Any] | None = None, delegate: Callable[[str], HostSession] | None = None):
        self.play, self.host, self.session, self.options = play, host, session, options
        # what this host's output must not show; its templates add what they make from a secret
        self.secrets = SecretSet(secret_values([options.extra_vars, play.vars, host_vars, play.role_defaults]))
        if session is not None:  # (planning alone has none)
            session.redact = self.secrets.redact  # -vvv shows requests with them masked
        self.delegates = Delegates(delegate, self.secrets.redact)  # delegate_to: a session per target
        self.host_vars, self.magic, self.registered = host_vars, magic, registered
        self.emit, self.stop = emit, stop
        self.deadline_reached = deadline_reached
        self.events = events or RunEvents()
        self.plan_cache = plan_cache  # shared by the run's hosts (gpuconf/engine/plancache.py)
        self.facts: dict[str, Any] = {}
        self.task_host: dict[str, Any] = {}  # the host facts tasks declared (gathered with or without gather_facts)
        self._magic: Verbatim | None = None
        self._registered = Verbatim(registered)
        self.results: list[TaskResult] = []
        self.notified: list[str] = []
        self._seen: dict[str, Any] = {}  # the data of the running task's last check
        self.run_once = run_once
        self.host_facts: dict[str, Any] = host_facts if host_facts is not None else {}

    # -- variables ------------------------------------------------------------
    def task_vars(self, task: TaskDef, facts: Any = None) -> Vars:
        facts = self.facts if facts is None else facts
        if self._magic is None or self._magic["facts"] is not facts:  # built once per facts object, not per task
            self._magic = Verbatim(dict(self.magic, facts=facts, ansible_facts=facts, **fact_aliases(facts)))
        return task_variables(self._magic, self.options.extra_vars, self._registered, task, self.play,
                              self.host_vars, self.secrets)

    def render_task(self, task: TaskDef, facts: Any = None) -> tuple[Vars, dict[str, Any]] | None:
        """Vars and rendered (not yet validated) params, or None when `when` is false."""
        return self._render(task, self.task_vars(task, facts))

    def _render(self, task: TaskDef, variables: Vars) -> tuple[Vars, dict[str, Any]] | None:
        if not self._holds(task, variables):
            return None
        return variables, render(task.params, variables)

    @staticmethod
    def _holds(task: TaskDef, variables: Vars) -> bool:
        """The task's conditions (its roles' `when`, then its own) are all true."""
        return all(evaluate_when(condition, variables) for condition in task.role_when) and (
            task.keywords.when is None or evaluate_when(task.keywords.when, variables))

    def prepare(self, task: TaskDef, facts: Any = None) -> tuple[Vars, Any] | None:
        """Vars and rendered params, or None when `when` is false. Params are shared with the
        run's other hosts that look up the same objects (gpuconf/engine/plancache.py): the task
        whole (`params`: conditions and params), and its params alone (`params only`), since a
        condition such as `facts.nvlink_fabric == 'none'` reads this host's own facts object."""
        variables = self.task_vars(task, facts)
        task_type = TASK_TYPES[task.type]
        cache = self.plan_cache if not task.item_vars and type(task_type).resolve is TaskType.resolve else None
        if cache is None:
            if not self._holds(task, variables):
                return None
            return variables, self._params(task, task_type, variables)
        hit, params = cache.get(task, variables, kind="params")
        if hit:
            return None if params is None else (variables, params)
        whole: dict[str, tuple[Any, bool]] = {}
        variables.reads = whole
        holds = self._holds(task, variables)
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

    def _facts_of(self, tasks: list[TaskDef], speculative: bool = False,
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
                facts += self._reads(task, prepared[1])
        return facts

    def _loop_facts(self, task: TaskDef, speculative: bool) -> list[Any]:
        """The facts of every item of a loop whose items are known now (not from facts, when speculative)."""
        try:
            variables = self.task_vars(task, UNKNOWABLE if speculative else None)
            items = [item_task(task, item, index, variables)
                     for index, item in enumerate(loop_items(task, variables))]
        except (GpuconfError, Exception):  # noqa: BLE001 - the task itself reports this later
            return []
        if speculative:  # not through the plan cache: an item's task is a new object on every host
            return [fact for item in items for fact in self._speculative_facts(item, use_cache=False)]
        return self._facts_of(items)

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
                facts = self._reads(task, build_params(task.type, values))
        except (GpuconfError, Exception):  # noqa: BLE001 - the task itself reports this later
            return []
        if self.plan_cache is not None and use_cache and variables.reads is not None:
            self.plan_cache.put(task, variables.reads, facts)
        return facts

    # -- the play -------------------------------------------------------------
    def run(self) -> list[TaskResult]:
        tasks = [t for t in self.play.tasks if task_selected(t, self.options.tags, self.options.skip_tags)]
        try:
            self.events.task_started(self.host, "gathering facts")
            left: list[TaskDef] = []
            first = self._facts_of(tasks, speculative=True, left=left)
            if self.play.keywords.gather_facts or any(TASK_TYPES[t.type].host_facts for t in tasks
                                                      if t.type in TASK_TYPES):
                first = gather.fact_requests() + first   # the host facts a task declared: gathered all the same
            self.session.fetch(first)
            self.refresh_facts()
            # A task planned above reads the same once the facts are in (its params did not depend
            # on them): only the others are planned again. Usually nothing is left: no round trip.
            self.session.fetch(self._facts_of(left))
            blocks = BlockRun(tasks)
            for index, task in enumerate(tasks):
                if self.stop():
                    if not self.deadline_reached():  # interrupted: no new task starts, and the report
                        self._interrupted(tasks[index:])  # says which ones it left out
                        break
                    if not (self.options.check_mode and self._answerable(task)):
                        self.mark_not_run([task])
                        continue
                why = blocks.why_not(task)
                if why is not None:  # never silently absent: a rescue that did not run says why
                    self._finish(task, self._result(task, Status.SKIPPED, message=why), time.monotonic())
                    results: list[TaskResult] = []
                else:
                    results = self.run_entry(task, tasks[index + 1:])
                # A health probe that found a failure has still run fine: the other probes go on.
                blocks.after(index, [r for r in results if r.status == Status.FAILED and not r.ignored
                                     and not r.unhealthy])
                if blocks.host_failed:
                    break
            else:
                self.run_handlers()
        except HostUnreachable:
            pass
        except ConnectError as exc:
            self.results.append(redact_result(self._result(None, Status.UNREACHABLE, error=exc.message),
                                              self.secrets))
            self.emit(self.results[-1])
        except RemoteError as exc:  # the batched fact gathering: runner missing, sudo, host busy
            self._gather_failed(str(exc))
        except Exception as exc:  # noqa: BLE001 - the failure boundary (engine/boundary.py)
            self._gather_failed(*internal_error(exc, self.host, "gather facts"))
        finally:
            self.delegates.close()
        return self.results

    def run_entry(self, task: TaskDef, upcoming: list[TaskDef]) -> list[TaskResult]:
        """One task of the list: once, once per loop item, or (run_once) on one host for the batch."""
        return run_entry(self, task, upcoming)

    def _gather_failed(self, error: str, trace: str | None = None) -> None:
        result = self._result(None, Status.FAILED, error=error, traceback=trace)
        result.task = "gather facts"
        self.results.append(redact_result(result, self.secrets))
        self.emit(result)

    def refresh_facts(self) -> None:
        values = {f.key: self.session.cache.get(f.key) for f in gather.fact_requests()}
        if all(v is not None for v in values.values()):
            self.task_host = gather.assemble(values)
            if self.play.keywords.gather_facts:  # the `facts` of templates, as Ansible's gather_facts
                self.facts.clear()
                self.facts.update(self.task_host)
                self.host_facts[self.host] = self.facts  # hostvars[this host].facts, for the other hosts

    def run_handlers(self) -> None:
        for handler in self.play.handlers:
            names = {handler.name, *handler.keywords.listen}
            if not names & set(self.notified):
                continue
            if not self.stop():
                self.events.task_started(self.host, handler.name)
                self.run_task(handler, [], is_handler=True)
            elif self.deadline_reached():
                self.mark_not_run([handler], handler=True)

    def _answerable(self, task: TaskDef) -> bool:
        """After the deadline a check still reports a task whose facts are all in hand: no round trip."""
        try:
            prepared = self.prepare(task)
        except Exception:  # noqa: BLE001 - it is not answerable; it is marked not run
            return False
        if prepared is None:
            return True  # `when` is false: nothing to read
        return all(f.key in self.session.cache for f in self._reads(task, prepared[1]))

    def mark_not_run(self, tasks: list[TaskDef], handler: bool = False, reason: str = "deadline") -> None:
        for result in not_run_results(self.play, self.host, tasks, self.options.deadline, handler, reason):
            self.results.append(result)
            self.emit(result)

    def _interrupted(self, left: list[TaskDef]) -> None:
        """SIGINT: the tasks not started, and the handlers notified but never run (a restart that a
        changed file asked for is work left undone, as much as a task)."""
        self.mark_not_run(left, reason="interrupted")
        pending = [h for h in self.play.handlers if {h.name, *h.keywords.listen} & set(self.notified)]
        self.mark_not_run(pending, handler=True, reason="interrupted")

    # -- one task -------------------------------------------------------------
    def _result(self, task: TaskDef | None, status: Status, **kw: Any) -> TaskResult:
        return TaskResult(
            host=self.host, play=self.play.name, task=task.name if task else "connect", status=status,
            type=task.type if task else "", role=task.role if task else None,
            location=str(task.location) if task else "", secret=bool(task and task.keywords.no_log), **kw)

    def run_task(self, task: TaskDef, upcoming: list[TaskDef], is_handler: bool = False) -> TaskResult:
        started = time.monotonic()
        self._seen = {}
        try:
            result = self._run_task(task, upcoming)
        except ConnectError as exc:
            if task.keywords.delegate_to:  # the delegate is unreachable, not this host: the task failed
                result = self._result(task, Status.FAILED, error=f"delegate_to: {exc.message}")
            else:
                result = self._result(task, Status.UNREACHABLE, error=exc.message)
                self._finish(task, result, started)
                raise HostUnreachable() from None
        except KnownOnlyAfterApply as exc:
            result = self._result(task, Status.UNKNOWN, error=f"{exc.message} (check mode)")
        except TemplateError as exc:
            where = f"{exc.location}: " if exc.location else ""  # a template file's own file:line
            result = self._result(task, Status.FAILED, error=f"{where}{exc.message} in task '{task.name}' "
                                  f"({task.location}) on host {self.host}")
        except (Refused, TaskError) as exc:  # what it read or ran is still registered (a probe's output, an rc)
            result = self._result(task, Status.FAILED, error=str(exc), data={**self._seen, **exc.data})
        except RemoteError as exc:
            result = self._result(task, Status.FAILED, error=str(exc))
        except (Unknown, FactUnavailable) as exc:
            result = self._result(task, Status.UNKNOWN, error=str(exc), findings=list(getattr(exc, "findings", [])))
        except GpuconfError as exc:
            result = self._result(task, Status.FAILED, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - the failure boundary (engine/boundary.py)
            error, trace = internal_error(exc, self.host, task.name, task.role)
            result = self._result(task, Status.FAILED, error=error, traceback=trace)
        result.handler = is_handler
        if task.keywords.changed_when is not None or task.keywords.failed_when is not None:
            judge(task, result, self.task_vars(task), self.options.check_mode)
        result.ignored = result.status == Status.FAILED and task.keywords.ignore_errors
        self._finish(task, result, started)
        return result

    def _finish(self, task: TaskDef, result: TaskResult, started: float, register: bool = True) -> None:
        result.duration = round(time.monotonic() - started, 3)
        if task.keywords.register and register:
            self.registered[task.keywords.register] = mark_known(registered_value(task.keywords.register, result),
                                                                 self.secrets)
        self.results.append(redact_result(result, self.secrets))
        self.emit(result)

    @staticmethod
    def _reads(task: TaskDef, params: Any) -> list[Any]:
        return [bounded(f, task.keywords.timeout) for f in TASK_TYPES[task.type].reads(params)]

    def _check(self, task: TaskDef, params: Any) -> Verdict:
        reads = self._reads(task, params)
        facts = read_facts(task_session(self, task), reads, self.task_host, task.become, self.options.today,
                           TASK_TYPES[task.type].host_facts)
        verdict = TASK_TYPES[task.type].check(params, facts)
        self._seen = dict(verdict.data)  # registered even if the task then fails (a probe's output)
        return verdict

    def _run_task(self, task: TaskDef, upcoming: list[TaskDef]) -> TaskResult:
        if task.type in ENGINE_ACTIONS:
            rendered = self.render_task(task)  # only `when`: the action renders its own values
            if rendered is None:
                return self._result(task, Status.SKIPPED, message="condition is false")
            message, data = run_action(task, rendered[0], self.registered)
            return self._result(task, Status.OK, message=message, data=data)
        prepared = self.prepare(task)
        if prepared is None:
            return self._result(task, Status.SKIPPED, message="condition is false")
        _, params = prepared
        task_type = TASK_TYPES[task.type]
        verdict = self._check(task, params)
        if not verdict.changes:
            return self._done(task, Status.OK, verdict)
        if (self.options.check_mode or reads_elsewhere(task)) and task.keywords.check_mode is False \
                and task.type == "command":
            return read_command(self, task, verdict)  # a read: in check mode, or delegated to another host
        if self.options.check_mode:
            reboot = any(change.reboot for change in verdict.changes)
            if reboot:
                self._mark_reboot(task.name)
            self.notified += task.keywords.notify
            return self._done(task, Status.WOULD_CHANGE, verdict, reboot=reboot)
        if task.type == "reboot" and self._reboot_held():
            result = self._done(task, Status.REBOOT_PENDING, verdict, reboot=True)  # the host still needs it
            result.message = f"{verdict.message}: not done in local mode (an image build); --reboot allows it"
            return result

        def refresh() -> list[Any]:
            # read again in the round trip that applies: what the re-check, the next tasks and the
            # handlers this play will run need, so that none of them costs a round trip of its own
            if task_session(self, task) is not self.session:  # it ran elsewhere or as another user
                return self._reads(task, params)
            return self._reads(task, params) + self._facts_of(upcoming + self._handlers_due(task))

        via = self.options.reboot_via
        apply = HostApply(task_session(self, task), task.become, task.keywords.timeout, refresh,
                          on_reboot=lambda _: self.refresh_after_reboot(refresh),
                          reboot_via=None if via is None else lambda: via(self.host))
        data = task_type.apply(apply, params, list(verdict.changes)) or {}
        self.refresh_facts()
        recheck = self._check(task, params)
        left = [c for c in recheck.changes if c.verify and not c.reboot]
        if left and not any(c.ops for c in verdict.changes):
            # nothing to run, only to verify (a probe, a port coming up): now it has failed
            raise TaskError("; ".join(c.summary for c in left))
        if left:
            raise TaskError("not idempotent: after apply, check still finds: " + "; ".join(c.summary for c in left))
        reboot = any(c.reboot for c in verdict.changes) or any(c.reboot and c.verify for c in recheck.changes)
        if reboot:
            self._mark_reboot(task.name)
        self.notified += task.keywords.notify
        result = self._done(task, Status.CHANGED, verdict, findings=list(recheck.findings), reboot=reboot)
        result.stdout, result.stderr = str(data.get("stdout", "")), str(data.get("stderr", ""))
        result.data.update(data)
        return result

    def _reboot_held(self) -> bool:
        """In local mode the host is the machine gpuconf runs on (a build VM): never reboot it unasked."""
        return self.session.connection.spec.connection == "local" and not self.options.allow_reboot

    def _mark_reboot(self, reason: str) -> None:
        self.session.reboot_required = True
        if reason not in self.session.reboot_reasons:
            self.session.reboot_reasons.append(reason)

    def refresh_after_reboot(self, refresh: Callable[[], list[Any]] | None = None) -> None:
        """Host facts after a reboot, with what the task and the ones after it will read."""
        self.session.fetch(gather.fact_requests() + (refresh() if refresh else []))
        self.refresh_facts()

    def _handlers_due(self, task: TaskDef) -> list[TaskDef]:
        """Handlers notified so far or by `task` that run after it (all of them, for a task)."""
        handlers = self.play.handlers
        later = handlers[next(i for i, h in enumerate(handlers) if h is task) + 1:] \
            if any(h is task for h in handlers) else handlers
        notified = set(self.notified) | set(task.keywords.notify)
        return [h for h in later if {h.name, *h.keywords.listen} & notified]

    def _done(self, task: TaskDef, status: Status, verdict: Verdict, findings: list[Any] | None = None,
              reboot: bool = False) -> TaskResult:
        """The result of a check (or of apply, with the re-check's `findings`). A health
        finding of severity failure makes the task failed; warnings are counted."""
        reports = [ChangeReport(c.summary, c.diff, c.before, c.after, [op.description for op in c.ops])
                   for c in verdict.changes]
        findings = list(verdict.findings if findings is None else findings)
        failures = [f.message for f in findings if f.severity == "failure"]
        error = None
        if failures:
            status = Status.FAILED
            error = "; ".join(failures[:3]) + (f"; +{len(failures) - 3} more" if len(failures) > 3 else "")
        return self._result(task, status, message=verdict.message, changes=reports, reboot_required=reboot,
                            data=dict(verdict.data), findings=findings, error=error)
