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
from gpuconf.engine.flow import BlockRun
from gpuconf.engine.hostlog import HostLog
from gpuconf.engine.options import not_run_results, task_selected
from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.scope import RunScope
from gpuconf.engine.session import HostSession
from gpuconf.errors import ConnectError, RemoteError
from gpuconf.facts import gather
from gpuconf.playbook.models import TaskDef
from gpuconf.results import Status, TaskResult
from gpuconf.tasks.registry import TASK_TYPES


class PlayOnHost:
    """The host's facts, then each task's check and apply in order, then the handlers."""

    def __init__(self, planner: HostPlanner, session: HostSession, scope: RunScope, batch: Batch | None = None):
        self.planner, self.session, self.scope, self.batch = planner, session, scope, batch
        self.play, self.host, self.options = planner.play, planner.host, planner.options
        self.clock = scope.clock
        session.redact = planner.secrets.redact  # -vvv shows requests with them masked
        self.delegates = Delegates(scope.open_delegate, planner.secrets.redact)  # delegate_to: a session per target
        self.log = HostLog(planner, scope.processors)
        self.executor = TaskExecutor(planner, session, self.log, self.options, self.delegates, scope.host_facts)
        self.entries = Entries(planner, self.executor, self.log, scope.processors, self.clock.stopped, batch)

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
        left: list[TaskDef] = []
        first = self.planner.facts_of(tasks, speculative=True, left=left)
        if self.play.keywords.gather_facts or any(TASK_TYPES[t.type].host_facts for t in tasks
                                                  if t.type in TASK_TYPES):
            first = gather.fact_requests() + first   # the host facts a task declared: gathered all the same
        self.session.fetch(first)
        self.executor.refresh_facts()
        # A task planned above reads the same once the facts are in (its params did not depend
        # on them): only the others are planned again. Usually nothing is left: no round trip.
        self.session.fetch(self.planner.facts_of(left))

    def _run_tasks(self, tasks: list[TaskDef]) -> None:
        applied = self.executor.applied
        blocks = BlockRun(tasks)
        for index, task in enumerate(tasks):
            if self.clock.stopped() and id(task) not in applied:  # what was done is still reported
                if not self.clock.deadline_reached():  # interrupted: no new task starts, and the report
                    self._interrupted(tasks[index:])  # says which ones it left out
                    return
                if not (self.options.check_mode and self._answerable(task)):
                    self.mark_not_run([task])
                    self._task_done(index)
                    continue
            why = None if id(task) in applied else blocks.why_not(task)
            if why is not None:  # never silently absent: a rescue that did not run says why
                self.log.finish(task, self.log.result(task, Status.SKIPPED, message=why), time.monotonic())
                results: list[TaskResult] = []
            else:
                results = self.entries.run_entry(task, tasks[index + 1:], index)
            # A health probe that found a failure has still run fine: the other probes go on.
            blocks.after(index, [r for r in results if r.status == Status.FAILED and not r.ignored
                                 and not r.unhealthy])
            if blocks.host_failed:
                for later in tasks[index + 1:]:  # applied with the failed task: reported all the same
                    if id(later) in applied:
                        self.entries.run_entry(later, [])
                return
            if not self._task_done(index):  # another host's failure ended the play (max_fail_percentage)
                limit = self.play.keywords.max_fail_percentage
                self.mark_not_run(tasks[index + 1:], reason="max_fail_percentage",
                                  error=f"not run: max_fail_percentage {limit:g} % exceeded in play "
                                        f"'{self.play.name}' (another host failed)")
                return
        self._run_handlers()

    def _task_done(self, index: int) -> bool:
        return self.batch is None or self.batch.task_done(self.host, index, self.clock.stopped)

    def _gather_failed(self, error: str, trace: str | None = None) -> None:
        result = self.log.result(None, Status.FAILED, error=error, traceback=trace)
        result.task = "gather facts"
        self.log.add(result)

    def _run_handlers(self) -> None:
        for handler in self.play.handlers:
            names = {handler.name, *handler.keywords.listen}
            if not names & set(self.executor.notified):
                continue
            if not self.clock.stopped():
                self.scope.processors.task_started(self.host, handler.name)
                self.executor.run_task(handler, [], is_handler=True)
            elif self.clock.deadline_reached():
                self.mark_not_run([handler], handler=True)

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
        notified = set(self.executor.notified)
        pending = [h for h in self.play.handlers if {h.name, *h.keywords.listen} & notified]
        self.mark_not_run(pending, handler=True, reason="interrupted")
