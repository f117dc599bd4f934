"""One task on one host: its check, its apply (alone, or joined with the package tasks after it),
the re-check, and its result. Exceptions become results here and nowhere else (with the play's
own boundary in engine/hostrun.py): a task that raises is a failed (or unknown) task, a lost
connection makes the host unreachable (HostUnreachable, for the play to stop on).

The executor plans through the host's HostPlanner (engine/planner.py) and records through its
HostLog (engine/hostlog.py); it knows nothing of loops, run_once or the play's order.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuconf.engine.actions import run_action
from gpuconf.engine.boundary import internal_error
from gpuconf.engine.context import HostApply, read_facts
from gpuconf.engine.delegate import Delegates, delegate_target, reads_elsewhere
from gpuconf.engine.flow import judge, retried_out, until_holds
from gpuconf.engine.handlers import Notifications
from gpuconf.engine.hostlog import HostLog
from gpuconf.engine.inventory_actions import add_host, group_by
from gpuconf.engine.meta import play_meets
from gpuconf.engine.options import RunOptions
from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.registered import KnownOnlyAfterApply, skipped_value
from gpuconf.engine.session import HostSession
from gpuconf.errors import ConnectError, GpuconfError, RemoteError, TaskError, TemplateError
from gpuconf.facts import gather
from gpuconf.facts.base import Fact, FactUnavailable, user_command
from gpuconf.playbook.checkmode import mode
from gpuconf.playbook.models import ENGINE_ACTIONS, TaskDef
from gpuconf.results import ChangeReport, Finding, Status, TaskResult
from gpuconf.tasks.base import Refused, Unknown, Verdict
from gpuconf.tasks.registry import TASK_TYPES
from gpuconf.templating.render import render


class HostUnreachable(Exception):
    """The host's connection is lost: its play ends (the task's result is recorded already)."""


class TaskExecutor:
    """Check, apply and re-check of one task at a time on one host."""

    def __init__(self, planner: HostPlanner, session: HostSession, log: HostLog, options: RunOptions,
                 delegates: Delegates, host_facts: dict[str, Any], inventory: Any = None,
                 warn: Callable[[str], None] | None = None):
        self.planner, self.session, self.log, self.options = planner, session, log, options
        self.delegates = delegates
        self.inventory = inventory   # the run's, for add_host and group_by
        self.host_facts = host_facts  # the run's: hostvars[this host].facts, for the other hosts
        self.task_host: dict[str, Any] = {}  # the host facts tasks declared (gathered with or without gather_facts)
        # the host's notified handlers (engine/handlers.py), and whether a flush is running them
        self.notifications = Notifications(planner.play.handlers, planner.handler_name, warn)
        self.running_handlers = False
        self._seen: dict[str, Any] = {}  # the data of the running task's last check
        # tasks already applied together with one before them (engine/joint.py): their params and
        # verdict, re-checked and reported at their turn
        self.applied: dict[int, tuple[Any, Verdict]] = {}

    # -- the host's facts -------------------------------------------------------
    def refresh_facts(self) -> None:
        values = {f.key: self.session.cache.get(f.key) for f in gather.fact_requests()}
        if all(v is not None for v in values.values()):
            self.task_host = gather.assemble(values)
            if self.planner.play.keywords.gather_facts:  # the `facts` of templates, as Ansible's gather_facts
                self.planner.facts.clear()
                self.planner.facts.update(self.task_host)
                self.host_facts[self.planner.host] = self.planner.facts

    def refresh_after_reboot(self, refresh: Callable[[], list[Fact]] | None = None) -> None:
        """Host facts after a reboot, with what the task and the ones after it will read."""
        self.session.fetch(gather.fact_requests() + (refresh() if refresh else []))
        self.refresh_facts()

    def task_session(self, task: TaskDef) -> HostSession:
        """The session that reads and writes for `task`: its delegate's or its host's, as its
        `become_user`."""
        session = self.session
        if task.keywords.delegate_to:
            session = self.delegates.session(delegate_target(task, self.planner.task_vars(task)))
        return session.as_user(task.become_user)

    # -- one task -------------------------------------------------------------
    def run_task(self, task: TaskDef, upcoming: list[TaskDef], is_handler: bool = False) -> TaskResult:
        """Run `task` (`upcoming`: the tasks after it, whose reads ride on its round trips) and
        record its result; HostUnreachable when the host's connection is lost. With `until` (or
        `retries`) it runs again, every `delay` seconds, until that holds, as Ansible's does."""
        started = time.monotonic()
        keywords = task.keywords
        if keywords.until is None and keywords.retries is None:
            outcome = self._attempt(task, upcoming, started)
        else:
            attempts = 1 + (max(0, keywords.retries) if keywords.retries is not None else 3)
            for attempt in range(1, attempts + 1):
                outcome = self._attempt(task, upcoming, started)
                if attempts == 1:
                    break
                outcome.data["attempts"] = attempt
                if until_holds(task, outcome, self.planner.task_vars(task)):
                    break
                if attempt < attempts:
                    time.sleep(keywords.delay)
            else:
                retried_out(outcome, attempts - 1)
        outcome.handler = is_handler or self.running_handlers
        self.notify(task, outcome)
        outcome.ignored = self.planner.flag(task, "ignore_errors") if outcome.status == Status.FAILED else \
            outcome.status == Status.UNREACHABLE and self.planner.flag(task, "ignore_unreachable")
        self.log.finish(task, outcome, started)
        return outcome

    def _attempt(self, task: TaskDef, upcoming: list[TaskDef], started: float) -> TaskResult:
        self._seen = {}
        result = self.log.result
        task_error = False   # the task's own `when` or arguments could not be rendered: it never ran
        try:
            outcome = self._run_task(task, upcoming)
        except ConnectError as exc:
            if task.keywords.delegate_to:  # the delegate is unreachable, not this host: the task failed
                outcome = result(task, Status.FAILED, error=f"delegate_to: {exc.message}")
            elif self.planner.flag(task, "ignore_unreachable"):   # the host goes on to its next task
                outcome = result(task, Status.UNREACHABLE, error=exc.message)
            else:
                self.log.finish(task, result(task, Status.UNREACHABLE, error=exc.message), started)
                raise HostUnreachable() from None
        except KnownOnlyAfterApply as exc:
            outcome = result(task, Status.UNKNOWN, error=f"{exc.message} (check mode)")
        except TemplateError as exc:
            task_error = exc.location is None
            where = f"{exc.location}: " if exc.location else ""  # a template file's own file:line
            outcome = result(task, Status.FAILED, error=f"{where}{exc.message} in task '{task.name}' "
                             f"({task.location}) on host {self.planner.host}")
        except (Refused, TaskError) as exc:  # what it read or ran is still registered (a probe's output, an rc)
            outcome = result(task, Status.FAILED, error=str(exc), data={**self._seen, **exc.data})
            if task.type == "command" and "rc" in exc.data:
                outcome.data["changed"] = True  # it ran: Ansible's command has changed, whatever its exit
        except RemoteError as exc:
            outcome = result(task, Status.FAILED, error=str(exc))
        except Unknown as exc:
            outcome = result(task, Status.UNKNOWN, error=str(exc), findings=list(exc.findings))
        except FactUnavailable as exc:
            outcome = result(task, Status.UNKNOWN, error=str(exc))
        except GpuconfError as exc:
            outcome = result(task, Status.FAILED, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - the failure boundary (engine/boundary.py)
            error, trace = internal_error(exc, self.planner.host, task.name, task.role)
            outcome = result(task, Status.FAILED, error=error, traceback=trace)
        if (task.keywords.changed_when is not None or task.keywords.failed_when is not None) and not task_error:
            # as Ansible: they judge a result; a task error (its when, its arguments) has none
            judge(task, outcome, self.planner.task_vars(task), self.options.check_mode)
        return outcome

    def notify(self, task: TaskDef, result: TaskResult) -> None:
        """A changed result (after changed_when) notifies the task's handlers, their names rendered
        with its variables; a name that finds no handler fails the task, as in Ansible."""
        if not task.keywords.notify or result.status not in (Status.CHANGED, Status.WOULD_CHANGE):
            return
        try:
            variables = self.planner.task_vars(task)
            self.notifications.notify([str(render(name, variables)) for name in task.keywords.notify])
        except (TemplateError, TaskError) as exc:
            result.status, result.error = Status.FAILED, str(exc)

    def _check(self, task: TaskDef, params: Any) -> Verdict:
        reads = self.planner.reads(task, params)
        facts = read_facts(self.task_session(task), reads, self.task_host, task.become, self.options.today,
                           TASK_TYPES[task.type].host_facts)
        verdict = TASK_TYPES[task.type].check(params, facts)
        self._seen = dict(verdict.data)  # registered even if the task then fails (a probe's output)
        return verdict

    def _run_task(self, task: TaskDef, upcoming: list[TaskDef], join: bool = True) -> TaskResult:
        applied = self.applied.pop(id(task), None)
        if applied is not None:  # applied together with a task before it: only its re-check is left
            return self._applied_result(task, *applied, {})
        if task.type in ENGINE_ACTIONS:
            rendered = self.planner.render_task(task)  # only `when`: the action renders its own values
            if rendered is None:
                return self._skipped(task)
            play = self.planner.play
            if task.type in ("group_by", "add_host"):
                params = render(task.params, rendered[0])
                message, data = group_by(self.inventory, self.planner.host, params) if task.type == "group_by" \
                    else add_host(self.inventory, params)
                return self.log.result(task, Status.CHANGED if data.pop("changed", True) else Status.OK,
                                       message=message, data=data)
            message, data = run_action(task, rendered[0], self.planner.registered, self.planner.included,
                                       Path(play.location.file).parent if play.location.file else None)
            return self.log.result(task, Status.OK, message=message, data=data)
        prepared = self.planner.prepare(task)
        if prepared is None:
            return self._skipped(task)
        _, params = prepared
        task_type = TASK_TYPES[task.type]
        if self.session.reopen is not None and not task.keywords.delegate_to and not task_type.controller_only:
            self.session.reopen()   # unreachable when the play began (ignore_unreachable): tried again
        verdict = self._check(task, params)
        if not verdict.changes:
            return self._done(task, Status.OK, verdict)
        told = mode(task, self.planner.play)   # check_mode on the task, its block or its play
        if (self.options.check_mode or reads_elsewhere(task)) and told is False and task_type.reads_when_told:
            return self._read_command(task, verdict)  # a read: in check mode, or delegated to another host
        if self.options.check_mode or told is True:
            pending = task_type.check_mode_data(params)
            if pending is not None and pending.pop("skipped", False):
                return self.log.result(task, Status.SKIPPED, message=pending["msg"], data=pending)
            reboot = any(change.reboot for change in verdict.changes)
            if reboot:
                self._mark_reboot(task.name)
            result = self._done(task, Status.WOULD_CHANGE, verdict, reboot=reboot)
            result.data.update(pending or {})
            return result
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

    def _skipped(self, task: TaskDef) -> TaskResult:
        """`when` is false: skipped, registering which condition was (as Ansible does)."""
        return self.log.result(task, Status.SKIPPED, message="condition is false",
                               data=skipped_value(self.planner.false_condition(task, self.planner.task_vars(task))))

    def _read_command(self, task: TaskDef, verdict: Verdict) -> TaskResult:
        """`check_mode: false` on a command: its author says it only reads, so check mode runs it,
        as a read (a read-only request, under the shared run lock): ok, with its output registered."""
        text = verdict.changes[0].ops[0].command
        read = user_command(str(text), lambda output: output, timeout=task.keywords.timeout or 60)
        out = self.task_session(task).get(read, task.become)
        data = {"rc": out.rc, "stdout": out.stdout, "stderr": out.stderr}
        if out.rc != 0 or out.timed_out:
            raise TaskError(f"{text} failed (exit {out.rc}): {(out.stderr or out.stdout).strip()[-800:]}", data=data)
        result = self.log.result(task, Status.OK, message=f"ran (check_mode: false): {text}", data=data)
        result.stdout, result.stderr = out.stdout, out.stderr
        return result

    def _host_apply(self, task: TaskDef, applying: list[tuple[TaskDef, Any]], upcoming: list[TaskDef]) -> HostApply:
        """What apply() gets for `task` (and the tasks applied with it, `applying`)."""
        def refresh() -> list[Fact]:
            # read again in the round trip that applies: what the re-check, the next tasks and the
            # handlers this play will run need, so that none of them costs a round trip of its own
            reads = [fact for one, params in applying for fact in self.planner.reads(one, params)]
            if self.task_session(task) is not self.session:  # it ran elsewhere or as another user
                return reads
            return reads + self.planner.facts_of(upcoming + [h for one, _ in applying for h in self.handlers_due(one)])

        via = self.options.reboot_via
        host = self.planner.host
        return HostApply(self.task_session(task), task.become, task.keywords.timeout, refresh,
                         on_reboot=lambda _: self.refresh_after_reboot(refresh),
                         reboot_via=None if via is None else lambda: via(host))

    def _joins(self) -> bool:
        """Tasks may apply together: not where the hosts of a batch meet after each task
        (max_fail_percentage) or each task is asked for (--step)."""
        play = self.planner.play
        return play.keywords.max_fail_percentage is None and self.options.step is None and not play_meets(play)

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
        for later, later_params in self.planner.joinable(task, upcoming):
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
            self.applied[id(later)] = (later_params, later_verdict)
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

    def handlers_due(self, task: TaskDef) -> list[TaskDef]:
        """Handlers notified so far or by `task` that run after it (all of them, for a task)."""
        handlers = self.planner.play.handlers
        later = handlers[next(i for i, h in enumerate(handlers) if h is task) + 1:] \
            if any(h is task for h in handlers) else handlers
        notified = {key for name in task.keywords.notify if "{{" not in name
                    for key in self.notifications.find(name)} | self.notifications.pending
        return [h for h in later if h.handler_key in notified]

    def _done(self, task: TaskDef, status: Status, verdict: Verdict, findings: list[Finding] | None = None,
              reboot: bool = False) -> TaskResult:
        """The result of a check (or of apply, with the re-check's `findings`). A health
        finding of severity failure makes the task failed; warnings are counted."""
        reports = [ChangeReport(c.summary, c.diff, c.before, c.after, [op.description for op in c.ops])
                   for c in verdict.changes]
        found = list(verdict.findings if findings is None else findings)
        failures = [f.message for f in found if f.fails]
        error = None
        if failures:
            status = Status.FAILED
            error = "; ".join(failures[:3]) + (f"; +{len(failures) - 3} more" if len(failures) > 3 else "")
        return self.log.result(task, status, message=verdict.message, changes=reports, reboot_required=reboot,
                               data=dict(verdict.data), findings=found, error=error)
