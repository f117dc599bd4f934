"""One play on one host: facts, then each entry of the task list in order (blocks, the
deadline, an interrupt, max_fail_percentage), then the handlers.

Three objects work together here, each over its own state: the HostPlanner (engine/planner.py)
decides variables, conditions, params and reads; the Entries (engine/entry.py) run loops,
run_once and --step; the TaskExecutor (engine/executor.py) checks, applies and re-checks one
task. All three record through one HostLog (engine/hostlog.py). What the run shares with the
host (options, processors, clock, delegates) comes in one RunScope (engine/scope.py).

Exceptions become results here and in the executor, nowhere else: a lost connection makes the
host unreachable, a failed fact gathering fails the host.
"""
from __future__ import annotations

import time

from gpuconf.engine.batch import Batch
from gpuconf.engine.boundary import internal_error
from gpuconf.engine.delegate import Delegates
from gpuconf.engine.entry import Entries
from gpuconf.engine.executor import HostUnreachable, TaskExecutor
from gpuconf.engine.flow import BlockRun, failed_task_vars
from gpuconf.engine.hostlog import HostLog
from gpuconf.engine.includes import DYNAMIC, Includes, Outcome, tasks_need_host
from gpuconf.engine.meta import Next, run_meta
from gpuconf.engine.options import not_run_results, task_selected
from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.scope import RunScope
from gpuconf.engine.session import HostSession
from gpuconf.errors import ConnectError, RemoteError, TaskError
from gpuconf.facts import gather
from gpuconf.playbook.models import TaskDef
from gpuconf.results import Status, TaskResult
from gpuconf.tasks.registry import TASK_TYPES

HANDLER_CLAIMS = -1_000_000   # run_once claims of handlers (engine/batch.py): below every task's index


class PlayOnHost:
    """The host's facts, then each task's check and apply in order, then the handlers."""

    def __init__(self, planner: HostPlanner, session: HostSession, scope: RunScope, batch: Batch | None = None):
        self.planner, self.session, self.scope, self.batch = planner, session, scope, batch
        self.play, self.host, self.options = planner.play, planner.host, planner.options
        self.clock = scope.clock
        session.redact = planner.secrets.redact  # -vvv shows requests with them masked
        self.delegates = Delegates(scope.open_delegate, planner.secrets.redact)  # delegate_to: a session per target
        self.log = HostLog(planner, scope.processors)
        self.executor = TaskExecutor(planner, session, self.log, self.options, self.delegates, scope.host_facts,
                                     scope.inventory, scope.warnings.warn)
        self.entries = Entries(planner, self.executor, self.log, scope.processors, self.clock.stopped, batch)
        self.includes = Includes(planner, self.log, self.executor)
        self.ended_roles: set[int] = set()   # meta: end_role, by role instance
        # a role that runs once a host (TaskDef.role_once): the loadings where a task ran, and the
        # roles completed (a later loading is skipped), as Ansible's role_complete
        self.roles_ran: set[int] = set()
        self.roles_done: set[str] = set()
        self.failed_task: tuple[TaskDef, TaskResult] | None = None   # the last failure (ansible_failed_task)
        self.failed_by_batch = False   # any_errors_fatal: another host's failure ended this one's play

    def run(self) -> list[TaskResult]:
        tasks = [t for t in self.play.tasks if task_selected(t, self.options.tags, self.options.skip_tags)]
        try:
            self.scope.processors.task_started(self.host, "gathering facts")
            self._gather_facts(tasks)
            self._run_tasks(tasks)
        except HostUnreachable:
            pass
        except ConnectError as exc:
            self.log.add(self.log.result(None, Status.UNREACHABLE, error=exc.message))
        except RemoteError as exc:  # the batched fact gathering: runner missing, sudo, host busy
            self._gather_failed(str(exc))
        except Exception as exc:  # noqa: BLE001 - the failure boundary (engine/boundary.py)
            self._gather_failed(*internal_error(exc, self.host, "gather facts"))
        finally:
            self.delegates.close()
        return self.log.results

    def _gather_facts(self, tasks: list[TaskDef]) -> None:
        """The host facts and nearly every task's reads, in one round trip."""
        if self.session.reopen is not None and not self._reached():
            return   # unreachable when the play began (ignore_unreachable): each task tries it again
        left: list[TaskDef] = []
        first = self.planner.facts_of(tasks, speculative=True, left=left)
        if self.play.keywords.gather_facts or any(TASK_TYPES[t.type].host_facts for t in tasks
                                                  if t.type in TASK_TYPES):
            first = gather.fact_requests() + first   # the host facts a task declared: gathered all the same
        if first or self.session.connection.connects:   # a play that asks its host nothing never connects
            self.session.fetch(first)
        self.executor.refresh_facts()
        # A task planned above reads the same once the facts are in (its params did not depend
        # on them): only the others are planned again. Usually nothing is left: no round trip.
        later = self.planner.facts_of(left)
        if later or self.session.connection.connects:
            self.session.fetch(later)

    def _reached(self) -> bool:
        """A host unreachable when the play began: gathering its facts tries it again (an ignored
        unreachable gathering, under the play's ignore_unreachable, leaves it to the tasks)."""
        if not self.play.keywords.gather_facts:
            return False
        try:
            assert self.session.reopen is not None
            self.session.reopen()
            return True
        except ConnectError as exc:
            if self.play.keywords.ignore_unreachable is not True:
                raise
            result = self.log.result(None, Status.UNREACHABLE, error=exc.message)
            result.task, result.ignored = "gather facts", True
            self.log.add(result)
            return False

    def _run_tasks(self, tasks: list[TaskDef], nested: bool = False) -> Outcome:
        """Each task in order, with its block's rescue and always; then (for the play's own list)
        the handlers. `nested`: the tasks a dynamic include brought (engine/includes.py)."""
        if nested and not self.session.connection.connects and self.scope.open_host is not None \
                and tasks_need_host(tasks):
            self.scope.open_host(self.session)   # what the include brought reads or writes here
        applied = self.executor.applied
        blocks = BlockRun(tasks)
        self.entries.rescue_blocks |= blocks.has_rescue
        role_ends = {t.role_instance: i for i, t in enumerate(tasks) if t.role_once}
        for index, task in enumerate(tasks):
            if index and task.section != tasks[index - 1].section and not nested and self.flush_handlers():
                return Outcome(stop=True)   # the end of pre_tasks, or of roles and tasks: a handler failed
            if self.clock.stopped() and id(task) not in applied:  # what was done is still reported
                if not self.clock.deadline_reached():  # interrupted: no new task starts, and the report
                    self._interrupted(tasks[index:])  # says which ones it left out
                    return Outcome(stop=True)
                if not (self.options.check_mode and self._answerable(task)):
                    self.mark_not_run([task])
                    if not nested:
                        self._task_done(index)
                    continue
            if nested and not task_selected(task, self.options.tags, self.options.skip_tags):
                continue   # a task an include brought, which the tags leave out
            why = None if id(task) in applied else blocks.why_not(task)
            step, results = self._step(task, tasks[index + 1:], None if nested else index, why)
            self._role_progress(task, results, role_ends.get(task.role_instance) == index)
            if step == Next.FAIL_HOST:   # no rescue takes it; any_errors_fatal still tells the batch
                self._fatal(task, index, results, nested)
                return Outcome(failures=results, stop=True, fatal=True)
            if step == Next.CLEAR_ERRORS:
                blocks.clear()
            # A health probe that found a failure has still run fine: the other probes go on.
            failures = [r for r in results if r.status == Status.FAILED and not r.ignored and not r.unhealthy]
            if failures and task.type not in DYNAMIC:
                self.failed_task = (task, failures[0])   # the failure itself (an include passes it on)
            elif failures and self.failed_task is not None and blocks.rescuing(task):
                # a failure inside a dynamic include that a block around the include rescues (a task
                # of the list itself tells its rescue in its tally: engine/entry.py)
                self.planner.registered.update(failed_task_vars(*self.failed_task))
                for result in failures:   # and the recap counts it rescued, as a failure of the list itself
                    if result.counts_as in (None, "failed"):
                        result.counts_as = "rescued"
            met = self._fatal(task, index, failures, nested)
            if met is False:
                return Outcome(stop=True)
            injected = met is not None and not failures and self.batch is not None and index in self.batch.fatal
            if injected:   # Ansible shows nothing on this host: its block fails all the same
                failures = [self.log.result(task, Status.FAILED, error="any_errors_fatal: it failed on another host")]
            blocks.after(index, failures)
            if blocks.host_failed:
                self.failed_by_batch = self.failed_by_batch or injected
                for later in tasks[index + 1:]:  # applied with the failed task: reported all the same
                    if id(later) in applied:
                        self.entries.run_entry(later, [])
                if nested:
                    return Outcome(failures=failures or [r for r in results if r.status == Status.FAILED])
                if self._forces_handlers():
                    self.flush_handlers()
                return Outcome(failures=failures, stop=True)
            if step == Next.END_BATCH and self.batch is not None:
                self.batch.end()
            if step in (Next.END_HOST, Next.END_BATCH):
                return Outcome(stop=True)
            if nested:
                if self.batch is not None and (self.batch.ended or self.batch.budget_spent()):
                    return Outcome(stop=True)
            elif met is None and not self._task_done(index):  # another host's failure ended the play
                if self.batch is not None and self.batch.ended:
                    return Outcome(stop=True)   # meta: end_play on another host
                limit = self.play.keywords.max_fail_percentage or 0
                self.mark_not_run(tasks[index + 1:], reason="max_fail_percentage",
                                  error=f"not run: max_fail_percentage {limit:g} % exceeded in play "
                                        f"'{self.play.name}' (another host failed)")
                return Outcome(stop=True)
        if not nested:
            self.flush_handlers()
        return Outcome()

    def _role_progress(self, task: TaskDef, results: list[TaskResult], last: bool) -> None:
        """A role that runs once a host: a task of it ran (ok, changed or failed; not skipped nor
        unreachable); past its last task, having run one, it is complete on this host."""
        if not task.role_once:
            return
        if any(r.status not in (Status.SKIPPED, Status.UNREACHABLE) and not r.not_run for r in results):
            self.roles_ran.add(task.role_instance)
        if last and task.role_instance in self.roles_ran:
            self.roles_done.add(task.role_once)

    def _step(self, task: TaskDef, upcoming: list[TaskDef], index: int | None,
              why: str | None) -> tuple[Next, list[TaskResult]]:
        """One task of a list: what comes next, and its results."""
        if task.role_instance in self.ended_roles:
            return Next.GO_ON, []   # meta: end_role ended its role: Ansible shows nothing of the rest
        if task.role_once in self.roles_done and task.role_instance not in self.roles_ran:
            return Next.GO_ON, []   # its role completed on this host before: Ansible shows nothing of it
        if why is not None:  # never silently absent: a rescue that did not run says why (Ansible never
            # runs it: nothing is registered nor counted)
            self.log.finish(task, self.log.result(task, Status.SKIPPED, message=why, counts_as=""), time.monotonic(),
                            register=False)
            return Next.GO_ON, []
        if task.type == "meta":
            try:
                step = run_meta(task, self.planner, self.log, self.executor.running_handlers)
            except TaskError as exc:
                result = self.log.result(task, Status.FAILED, error=str(exc))
                self.log.finish(task, result, time.monotonic(), register=False)
                return Next.GO_ON, [result]
            if step == Next.FLUSH:   # a handler's failure is the flush's: its block's rescue takes it
                return step, self.flush_handlers()
            elif step == Next.END_ROLE:
                self.ended_roles.add(task.role_instance)
            return step, []
        if task.type in DYNAMIC:
            if task.keywords.run_once and self.batch is not None and index is not None \
                    and self.planner.flag(task, "run_once"):   # the include on the batch's first host alone
                first, owner, done, shared = self.batch.claim(index, self.host)
                if not first:
                    self.batch.wait_for(owner, done, self.clock.stopped)
                    self.planner.registered.update(shared)   # what its run_once tasks (apply) set, for all
                    return Next.GO_ON, []
                before = dict(self.planner.registered)
                try:
                    outcome = self.includes.run(task, lambda brought: self._run_tasks(brought, nested=True))
                finally:
                    if (task.params.get("apply") or {}).get("run_once"):
                        shared.update({k: v for k, v in self.planner.registered.items()
                                       if k not in before or before[k] is not v})
                    done.set()
                return self._included(outcome)
            outcome = self.includes.run(task, lambda brought: self._run_tasks(brought, nested=True))
            return self._included(outcome)
        return Next.GO_ON, self.entries.run_entry(task, upcoming, index)

    @staticmethod
    def _included(outcome: Outcome) -> tuple[Next, list[TaskResult]]:
        if outcome.fatal:
            return Next.FAIL_HOST, outcome.failures
        return (Next.END_HOST if outcome.stop and not outcome.failures else Next.GO_ON), outcome.failures

    def flush_handlers(self) -> list[TaskResult]:
        """Run the notified handlers, in the order they are defined, each once (engine/handlers.py);
        their failures (a handler that fails fails its host, or the block the flush is in)."""
        notifications, executor = self.executor.notifications, self.executor
        executor.running_handlers = True
        failures: list[TaskResult] = []
        try:
            while due := notifications.next_due():
                for handler in due:
                    if self.clock.stopped():
                        if self.clock.deadline_reached():
                            self.mark_not_run([handler], handler=True)
                        continue
                    if handler.type in DYNAMIC:
                        failures += self.includes.run(handler, lambda brought: self._run_tasks(brought, nested=True)
                                                      ).failures
                        continue
                    if handler.type == "meta":
                        results = self._step(handler, [], None, None)[1]
                    else:   # run_once: a handler's own claim on the batch, apart from the tasks'
                        results = self.entries.run_entry(handler, [], HANDLER_CLAIMS - handler.handler_key)
                    failures += [r for r in results if r.status == Status.FAILED and not r.ignored]
        finally:
            executor.running_handlers = False
            notifications.end_flush()
        return failures

    def _fatal(self, task: TaskDef, index: int, failures: list[TaskResult], nested: bool) -> bool | None:
        """any_errors_fatal (the play's, or the task's or its block's): a failure here is told to the
        batch, and the hosts meet; None where it does not apply, else whether the host goes on."""
        fatal = task.keywords.any_errors_fatal if task.keywords.any_errors_fatal is not None \
            else self.play.keywords.any_errors_fatal
        if not fatal or self.batch is None or nested:
            return None
        if failures:
            self.batch.fail_all(index)
        return self._task_done(index) or index in self.batch.fatal

    def _forces_handlers(self) -> bool:
        """force_handlers: the play's, else --force-handlers: a host that failed still runs the
        handlers notified before its failure."""
        forced = self.play.keywords.force_handlers
        return self.options.force_handlers if forced is None else forced

    def _task_done(self, index: int) -> bool:
        return self.batch is None or self.batch.task_done(self.host, index, self.clock.stopped)

    def _gather_failed(self, error: str, trace: str | None = None) -> None:
        result = self.log.result(None, Status.FAILED, error=error, traceback=trace)
        result.task = "gather facts"
        self.log.add(result)

    def _answerable(self, task: TaskDef) -> bool:
        """After the deadline a check still reports a task whose facts are all in hand: no round trip."""
        try:
            prepared = self.planner.prepare(task)
        except Exception:  # noqa: BLE001 - it is not answerable; it is marked not run
            return False
        if prepared is None:
            return True  # `when` is false: nothing to read
        return all(f.key in self.session.cache for f in self.planner.reads(task, prepared[1]))

    def mark_not_run(self, tasks: list[TaskDef], handler: bool = False, reason: str = "deadline",
                     error: str = "") -> None:
        for result in not_run_results(self.play, self.host, tasks, self.options.deadline, handler, reason, error):
            self.log.add(result)

    def _interrupted(self, left: list[TaskDef]) -> None:
        """SIGINT: the tasks not started, and the handlers notified but never run (a restart that a
        changed file asked for is work left undone, as much as a task)."""
        self.mark_not_run(left, reason="interrupted")
        self.mark_not_run(self.executor.notifications.waiting(), handler=True, reason="interrupted")
