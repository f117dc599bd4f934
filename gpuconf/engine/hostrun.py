"""One play on one host: facts, then each task's check (and apply), then handlers.

Exceptions become results here and nowhere else: a task that raises is a
failed (or unknown) task, a lost connection makes the host unreachable.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuconf.engine.actions import run_action
from gpuconf.engine.batch import Batch
from gpuconf.engine.boundary import internal_error
from gpuconf.engine.context import HostApply, read_facts
from gpuconf.engine.delegate import Delegates, reads_elsewhere
from gpuconf.engine.flow import judge
from gpuconf.engine.meta import MetaSteps
from gpuconf.engine.options import RunOptions, not_run_results, task_selected
from gpuconf.engine.plancache import PlanCache
from gpuconf.engine.registered import KnownOnlyAfterApply, registered_value
from gpuconf.engine.secrets import mark_known, redact_result
from gpuconf.engine.session import HostSession
from gpuconf.errors import ConnectError, GpuconfError, RemoteError, TaskError, TemplateError
from gpuconf.facts import gather
from gpuconf.facts.base import FactUnavailable
from gpuconf.playbook.checkmode import mode
from gpuconf.playbook.models import ENGINE_ACTIONS, Play, TaskDef
from gpuconf.results import ChangeReport, RunEvents, Status, TaskResult
from gpuconf.tasks.base import Refused, Unknown, Verdict
from gpuconf.tasks.registry import TASK_TYPES


class HostUnreachable(Exception):
    pass


class PlayOnHost(MetaSteps):
    """The executing half (HostPlanner plans, Entries runs loops and run_once): the host's facts,
    then each task's check and apply in order, then the handlers."""

    def __init__(self, play: Play, host: str, host_vars: dict[str, Any], magic: dict[str, Any],
                 session: HostSession, options: RunOptions, registered: dict[str, Any],
                 emit: Callable[[TaskResult], None], stop: Callable[[], bool],
                 deadline_reached: Callable[[], bool] = lambda: False, events: RunEvents | None = None,
                 plan_cache: PlanCache | None = None, batch: Batch | None = None,
                 host_facts: dict[str, Any] | None = None, delegate: Callable[[str], HostSession] | None = None,
                 included: dict[str, Any] | None = None):
        super().__init__(play, host, host_vars, magic, options, registered, plan_cache, included)
        self.session = session
        session.redact = self.secrets.redact  # -vvv shows requests with them masked
        self.delegates = Delegates(delegate, self.secrets.redact)  # delegate_to: a session per target
        self.emit, self.stop = emit, stop
        self.deadline_reached = deadline_reached
        self.events = events or RunEvents()
        self.task_host: dict[str, Any] = {}  # the host facts tasks declared (gathered with or without gather_facts)
        self.results: list[TaskResult] = []
        self._seen: dict[str, Any] = {}  # the data of the running task's last check
        # tasks already applied together with one before them (engine/joint.py): their params and
        # verdict, re-checked and reported at their turn
        self._applied: dict[int, tuple[Any, Verdict]] = {}
        self.batch = batch  # run_once and max_fail_percentage, with the other hosts of the batch
        self.host_facts: dict[str, Any] = host_facts if host_facts is not None else {}
        self.start_notifications()

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
            if first or self.session.connection.connects:   # a play that asks its host nothing never connects
                self.session.fetch(first)
            self.refresh_facts()
            # A task planned above reads the same once the facts are in (its params did not depend
            # on them): only the others are planned again. Usually nothing is left: no round trip.
            later = self._facts_of(left)
            if later or self.session.connection.connects:
                self.session.fetch(later)
            self.run_tasks(tasks)
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

    def _task_done(self, index: int) -> bool:
        return self.batch is None or self.batch.task_done(self.host, index, self.stop)

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

    def _answerable(self, task: TaskDef) -> bool:
        """After the deadline a check still reports a task whose facts are all in hand: no round trip."""
        try:
            prepared = self.prepare(task)
        except Exception:  # noqa: BLE001 - it is not answerable; it is marked not run
            return False
        if prepared is None:
            return True  # `when` is false: nothing to read
        return all(f.key in self.session.cache for f in self._reads(task, prepared[1]))

    def mark_not_run(self, tasks: list[TaskDef], handler: bool = False, reason: str = "deadline",
                     error: str = "") -> None:
        for result in not_run_results(self.play, self.host, tasks, self.options.deadline, handler, reason, error):
            self.results.append(result)
            self.emit(result)

    def _interrupted(self, left: list[TaskDef]) -> None:
        """SIGINT: the tasks not started, and the handlers notified but never run (a restart that a
        changed file asked for is work left undone, as much as a task)."""
        self.mark_not_run(left, reason="interrupted")
        self.mark_not_run(self.notifications.waiting(), handler=True, reason="interrupted")

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
        result.handler = is_handler or self.running_handlers
        if task.keywords.changed_when is not None or task.keywords.failed_when is not None:
            judge(task, result, self.task_vars(task), self.options.check_mode)
        self.notify(task, result)
        result.ignored = result.status == Status.FAILED and self.flag(task, "ignore_errors")
        self._finish(task, result, started)
        return result

    def _finish(self, task: TaskDef, result: TaskResult, started: float, register: bool = True) -> None:
        result.duration = round(time.monotonic() - started, 3)
        if task.keywords.register and register:
            self.registered[task.keywords.register] = mark_known(registered_value(task.keywords.register, result),
                                                                 self.secrets)
        self.results.append(redact_result(result, self.secrets))
        self.emit(result)

    def _check(self, task: TaskDef, params: Any) -> Verdict:
        reads = self._reads(task, params)
        facts = read_facts(self.task_session(task), reads, self.task_host, task.become, self.options.today,
                           TASK_TYPES[task.type].host_facts)
        verdict = TASK_TYPES[task.type].check(params, facts)
        self._seen = dict(verdict.data)  # registered even if the task then fails (a probe's output)
        return verdict

    def _run_task(self, task: TaskDef, upcoming: list[TaskDef], join: bool = True) -> TaskResult:
        applied = self._applied.pop(id(task), None)
        if applied is not None:  # applied together with a task before it: only its re-check is left
            return self._applied_result(task, *applied, {})
        if task.type in ENGINE_ACTIONS:
            rendered = self.render_task(task)  # only `when`: the action renders its own values
            if rendered is None:
                return self._result(task, Status.SKIPPED, message="condition is false")
            message, data = run_action(task, rendered[0], self.registered, self.included,
                                       Path(self.play.location.file).parent if self.play.location.file else None)
            return self._result(task, Status.OK, message=message, data=data)
        prepared = self.prepare(task)
        if prepared is None:
            return self._result(task, Status.SKIPPED, message="condition is false")
        _, params = prepared
        task_type = TASK_TYPES[task.type]
        verdict = self._check(task, params)
        if not verdict.changes:
            return self._done(task, Status.OK, verdict)
        told = mode(task, self.play)   # check_mode on the task, its block or its play
        if (self.options.check_mode or reads_elsewhere(task)) and told is False and task_type.reads_when_told:
            return self.read_command(task, verdict)  # a read: in check mode, or delegated to another host
        if self.options.check_mode or told is True:
            reboot = any(change.reboot for change in verdict.changes)
            if reboot:
                self._mark_reboot(task.name)
            return self._done(task, Status.WOULD_CHANGE, verdict, reboot=reboot)
        if task_type.reboots and self._reboot_held():
            result = self._done(task, Status.REBOOT_PENDING, verdict, reboot=True)  # the host still needs it
            result.message = f"{verdict.message}: not done in local mode (an image build); --reboot allows it"
            return result

        if join and task_type.batch and upcoming and self._joins():
            try:
                joined = self._apply_joined(task, params, verdict, upcoming)
            except TaskError as exc:  # the joint transaction failed: each task alone, with its own error
                if self.session.trace is not None:
                    self.session.trace(f"{task.name}: applied with the tasks after it, it failed ({exc}); "
                                       "each runs alone")
                return self._run_task(task, upcoming, join=False)
            if joined:
                return self._applied_result(task, params, verdict, {})
        data = task_type.apply(self._host_apply(task, [(task, params)], upcoming), params,
                               list(verdict.changes)) or {}
        return self._applied_result(task, params, verdict, data)

    def _host_apply(self, task: TaskDef, applying: list[tuple[TaskDef, Any]], upcoming: list[TaskDef]) -> HostApply:
        """What apply() gets for `task` (and the tasks applied with it, `applying`)."""
        def refresh() -> list[Any]:
            # read again in the round trip that applies: what the re-check, the next tasks and the
            # handlers this play will run need, so that none of them costs a round trip of its own
            reads = [fact for one, params in applying for fact in self._reads(one, params)]
            if self.task_session(task) is not self.session:  # it ran elsewhere or as another user
                return reads
            return reads + self._facts_of(upcoming + [h for one, _ in applying for h in self._handlers_due(one)])

        via = self.options.reboot_via
        return HostApply(self.task_session(task), task.become, task.keywords.timeout, refresh,
                         on_reboot=lambda _: self.refresh_after_reboot(refresh),
                         reboot_via=None if via is None else lambda: via(self.host))

    def _joins(self) -> bool:
        """Tasks may apply together: not where the hosts of a batch meet after each task
        (max_fail_percentage) or each task is asked for (--step)."""
        return self.play.keywords.max_fail_percentage is None and self.options.step is None

    def _apply_joined(self, task: TaskDef, params: Any, verdict: Verdict, upcoming: list[TaskDef]) -> bool:
        """Apply `task` together with the tasks right after it that may join it (engine/joint.py),
        in one round trip; False, having done nothing, when none may. They are re-checked and
        reported at their turn. A failure of the joint apply raises TaskError."""
        task_type = TASK_TYPES[task.type]
        first = task_type.batch_ops(params, list(verdict.changes))
        if first is None:
            return False
        parts, members = [first], []
        seen = self._seen
        for later, later_params in self.joinable(task, upcoming):
            try:
                later_verdict = self._check(later, later_params)
            except Exception:  # noqa: BLE001 - it reports that at its turn
                break
            if not later_verdict.changes:
                continue  # in sync now: checked again at its turn, after the transaction
            ops = TASK_TYPES[later.type].batch_ops(later_params, list(later_verdict.changes))
            if ops is None or task_type.join(parts + [ops]) is None:
                break
            parts.append(ops)
            members.append((later, later_params, later_verdict))
        self._seen = seen
        joined = task_type.join(parts)
        if not members or joined is None:
            return False
        applying = [(task, params), *((later, later_params) for later, later_params, _ in members)]
        task_type.apply_joined(self._host_apply(task, applying, upcoming), joined)
        for later, later_params, later_verdict in members:
            self._applied[id(later)] = (later_params, later_verdict)
        return True

    def _applied_result(self, task: TaskDef, params: Any, verdict: Verdict, data: dict[str, Any]) -> TaskResult:
        """The re-check after apply, and the task's result."""
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
        """Handlers notified so far or by `task` (its names as written) that run after it."""
        handlers = self.play.handlers
        later = handlers[next(i for i, h in enumerate(handlers) if h is task) + 1:] \
            if any(h is task for h in handlers) else handlers
        notified = {key for name in task.keywords.notify for key in self.notifications.find(name)
                    if "{{" not in name} | self.notifications.pending
        return [h for h in later if h.handler_key in notified]

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
