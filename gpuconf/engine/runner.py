"""Run a playbook over an inventory: plays in order, hosts in parallel.

Each host keeps one connection for the whole run, reused by every play. A
play's hosts run in batches (`serial`); when a batch's failed plus
unreachable hosts exceed `max_fail_percentage`, or every host of a batch
failed (as Ansible does), no further batch starts.
Hosts that failed or were unreachable sit out the later plays.
"""
from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpuconf.connection.base import Connection, ConnectionSpec
from gpuconf.connection.lock import LOCK_PATH, check_lock
from gpuconf.connection.resolve import Reach, host_spec, local_spec, open_connection
from gpuconf.engine.after import OpenHosts
from gpuconf.engine.batch import Batch
from gpuconf.engine.boundary import internal_error
from gpuconf.engine.hostrun import PlayOnHost
from gpuconf.engine.includes import tasks_need_host
from gpuconf.engine.meta import play_meets
from gpuconf.engine.options import RunOptions, not_run_results, task_selected
from gpuconf.engine.plancache import PlanCache
from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.processors import Processor, Processors
from gpuconf.engine.reboot_wait import take_run_lock
from gpuconf.engine.scope import RunClock, RunScope
from gpuconf.engine.session import HostSession
from gpuconf.engine.variables import (
    LazyGroups,
    LazyHostvars,
    magic_variables,
    play_variables,
)
from gpuconf.errors import ConnectError, GpuconfError, TaskError
from gpuconf.inventory.hosts import Inventory
from gpuconf.inventory.patterns import match_hosts
from gpuconf.playbook.models import DELEGATE_LOCAL, Play, Playbook
from gpuconf.results import HostResult, RunResult, Status, TaskResult


def batch_sizes(serial: Any, total: int) -> list[int]:
    """Ansible's `serial`: an int, a percentage, or a list whose last repeats."""
    if not serial:
        return [total] if total else []
    steps = serial if isinstance(serial, list) else [serial]
    sizes, done, index = [], 0, 0
    while done < total:
        step = steps[min(index, len(steps) - 1)]
        if isinstance(step, str) and step.strip().endswith("%"):
            size = max(1, math.floor(total * float(step.strip()[:-1]) / 100))
        else:
            size = int(step)
        size = max(1, min(size, total - done))
        sizes.append(size)
        done += size
        index += 1
    return sizes


class Runner:
    """Run `playbook` on the hosts of `inventory` (narrowed by --limit already: gpuconf.inventory.patterns.narrow),
    telling each of `processors` what happens (engine/processors.py); their `run_completed` runs
    over the hosts' connections still open (engine/after.py). SIGINT: set `stop_event`."""

    def __init__(self, inventory: Inventory, playbook: Playbook, options: RunOptions,
                 processors: Sequence[Processor] = (),
                 connect: Callable[[ConnectionSpec, Reach], Connection] | None = None):
        self.inventory, self.playbook, self.options = inventory, playbook, options
        self.processors = Processors(processors)
        self._began: set[tuple[int, str]] = set()  # (play index, host) pairs that started
        self.budget_spent = ""  # why max_fail_percentage (or a batch that failed whole) stopped the run
        self.stop_reason = "max_fail_percentage"  # the not_run reason of the tasks it left out
        self.connect = connect or open_connection  # a test may give its own
        self.clock = RunClock(options.deadline)
        self.stop_event = self.clock.stop_event
        self.sessions: dict[str, HostSession] = {}
        self.registered: dict[str, dict[str, Any]] = {}
        self.host_facts: dict[str, Any] = {}  # each host's gathered facts, for hostvars[host].facts
        self.included: dict[str, dict[str, Any]] = {}  # what include_vars set, per host, for the run
        self.shared = {"groups": LazyGroups(inventory),
                       "hostvars": LazyHostvars(inventory, self.host_facts, self.registered, self.included)}
        self._local_lock = threading.Lock()   # this machine's run lock, taken once for its local hosts
        self._local_locked = False
        self._play_hosts: dict[int, list[str]] = {}
        self.plan_cache = PlanCache()  # speculative plans shared by the hosts (engine/plancache.py)
        self.scope = RunScope(options, self.processors, self.clock, self.plan_cache, self.host_facts,
                              self.delegate_session, inventory, self._open)

    def play_hosts(self, play: Play) -> list[str]:
        """The play's hosts (within --limit), resolved once per play (every host's `play_hosts`)."""
        if id(play) not in self._play_hosts:
            self._play_hosts[id(play)] = match_hosts(self.inventory, play.hosts)
        return self._play_hosts[id(play)]

    def planner(self, play: Play, host: str, batch: Batch | None = None) -> HostPlanner:
        """The planning of `play` on `host` (no connection): what the host's play starts from, and
        what --list-tasks -v prints. The host's registered variables carry over from play to play."""
        magic = magic_variables(self.inventory, host, self.play_hosts(play), self.options.check_mode, None,
                                self.shared, batch.hosts if batch is not None else None, self.options.tags,
                                self.options.skip_tags)
        magic.update(play_variables(play, self.playbook.path, self.inventory))
        if batch is not None:   # as Ansible: a host that failed is no longer among the play's hosts
            magic.update(play_hosts=batch.live(batch.hosts), ansible_play_batch=batch.live(batch.hosts),
                         ansible_play_hosts=batch.live(self.play_hosts(play)))
        return HostPlanner(play, host, self.inventory.host_vars(host), magic, self.options,
                           self.registered.setdefault(host, {}), self.plan_cache, self.included.setdefault(host, {}))

    def run(self) -> RunResult:
        result = RunResult(self.options.verb, str(self.playbook.path), self.inventory.source, time.time(),
                           detailed_exitcodes=self.options.detailed_exitcodes, deadline=self.options.deadline,
                           strict=self.options.strict)
        out_of_play: set[str] = set()
        try:
            for index, play in enumerate(self.playbook.plays):
                result.plays.append(play.name)
                hosts = [h for h in self.play_hosts(play) if h not in out_of_play]
                self.processors.play_started(play.name, hosts)
                if not self._run_play(index, play, hosts, result, out_of_play):
                    if self.budget_spent:
                        self._not_started(index, result, out_of_play, self.stop_reason, self.budget_spent)
                    elif self.clock.interrupted():  # SIGINT: the hosts and plays never started are listed
                        self._not_started(index, result, out_of_play, "interrupted")
                    elif self.clock.deadline_reached():
                        self._not_started(index, result, out_of_play)
                    break
            # while the connections are open and the run locks held
            open_hosts = OpenHosts(result, self.sessions, self.clock.stopped, self._open)
            result.sections.extend(self.processors.run_completed(result, open_hosts))
        finally:
            for name, session in self.sessions.items():
                session.release_lock()
                result.host(name).round_trips = session.connection.round_trips
                result.host(name).connects = session.connection.connects
                result.host(name).reboot_required = session.reboot_required
                session.connection.close()
            result.ended = time.time()
            result.interrupted = self.clock.interrupted()
            result.deadline_reached = self.clock.deadline_reached() or any(
                t.not_run == "deadline" for h in result.hosts.values() for t in h.tasks)
            result.budget_spent = self.budget_spent
            result.seal()
        return result

    def _not_started(self, first: int, result: RunResult, out_of_play: set[str], reason: str = "deadline",
                     error: str = "") -> None:
        """The deadline came, a batch spent the failure budget, or SIGINT stopped the run: every
        host's tasks in the plays it never started are `unknown`, with the reason."""
        for index in range(first, len(self.playbook.plays)):
            play = self.playbook.plays[index]
            if index > first:
                result.plays.append(play.name)
                self.processors.play_started(play.name, self.play_hosts(play))
            for host in self.play_hosts(play):
                if host not in out_of_play and (index, host) not in self._began:
                    self._mark_not_run(play, host, result, reason, error)

    def _mark_not_run(self, play: Play, host: str, result: RunResult, reason: str = "deadline",
                      error: str = "") -> None:
        tasks = [t for t in play.tasks if task_selected(t, self.options.tags, self.options.skip_tags)]
        for task in not_run_results(play, host, tasks, self.options.deadline, reason=reason, error=error):
            result.host(host).tasks.append(task)
            self.processors.task_completed(task)
        self.processors.host_completed(host)

    def _run_play(self, index: int, play: Play, hosts: list[str], result: RunResult, out_of_play: set[str]) -> bool:
        offset = 0
        sizes = batch_sizes(play.keywords.serial, len(hosts))
        for number, size in enumerate(sizes, 1):
            if self.clock.stopped():
                return False
            batch = hosts[offset: offset + size]
            offset += size
            # run_once, max_fail_percentage, any_errors_fatal, meta: end_play
            together = Batch(batch, play.keywords.max_fail_percentage,
                             lockstep=play_meets(play))
            with ThreadPoolExecutor(max_workers=max(1, min(self.options.forks, len(batch)))) as pool:
                outcomes = list(pool.map(lambda h, b=together: self._host(index, play, h, result, b), batch))
            bad = [h for h, ok in zip(batch, outcomes) if not ok]
            out_of_play.update(bad)
            if together.ended and any(t.params.get("_raw_params") == "end_play" for t in play.tasks
                                      if t.type == "meta"):
                return True   # meta: end_play: no later batch of this play starts
            limit = play.keywords.max_fail_percentage
            if limit is not None and batch and 100.0 * len(bad) / len(batch) > limit:
                self.budget_spent = (f"not run: max_fail_percentage {limit:g} % exceeded in play '{play.name}' "
                                     f"({len(bad)} of {len(batch)} hosts in the batch failed: {', '.join(bad)})")
                return False
            if batch and len(bad) == len(batch):
                # as Ansible's: when every host of a batch failed, the run stops there (no later batch,
                # no later play): the next would only repeat it
                self.budget_spent = (f"not run: every host of a batch failed in play '{play.name}' "
                                     f"({'serial batch ' + str(number) + ': ' if len(sizes) > 1 else ''}"
                                     f"{', '.join(bad)})")
                self.stop_reason = "batch_failed"
                return False
        return True

    def connection(self, host: str) -> Connection:
        """A new, unopened connection to `host`, as every verb makes them (gpuconf/connection/resolve.py)."""
        reach = self.options.reach
        return self.connect(host_spec(self.inventory, host, reach), reach)

    def _session(self, host: str) -> HostSession:
        if host not in self.sessions:
            connection = self.connection(host)
            trace = (lambda text: self.processors.remote(host, text)) if self.options.trace else None
            if trace is not None:
                spec = connection.spec
                trace(f"connect: {spec.connection} {spec.user + '@' if spec.user else ''}{spec.address}:{spec.port}"
                      f"{' (become)' if spec.become else ''}")
            self.sessions[host] = HostSession(host, connection, self.clock.deadline, trace)
        return self.sessions[host]

    def delegate_session(self, target: str) -> HostSession:
        """A new, opened session to a `delegate_to` target: an inventory host as the run reaches it,
        else localhost (or 127.0.0.1) as `-c local`. It takes no run lock (engine/delegate.py)."""
        if target in self.inventory.hosts:
            connection = self.connection(target)
        elif target in DELEGATE_LOCAL:
            reach = self.options.reach
            connection = self.connect(local_spec(target, reach), reach)
        else:
            raise TaskError(f"delegate_to: '{target}' is not in the inventory "
                            f"(delegate to localhost, 127.0.0.1 or an inventory host)")
        trace = (lambda text: self.processors.remote(target, text)) if self.options.trace else None
        session = HostSession(target, connection, self.clock.deadline, trace)
        connection.open()
        return session

    def _host(self, index: int, play: Play, host: str, run: RunResult, batch: Batch | None = None) -> bool:
        """Run the play on one host; False when the host failed or was unreachable."""
        ok = False
        try:
            ok = self._host_in_batch(index, play, host, run, batch)
            return ok
        finally:
            if batch is not None:  # the batch's other hosts stop waiting for this one
                batch.leave(host, failed=not ok)

    def _host_in_batch(self, index: int, play: Play, host: str, run: RunResult, batch: Batch | None) -> bool:
        self._began.add((index, host))
        if self.clock.interrupted():  # queued behind --forks when SIGINT came: it never connects
            self._mark_not_run(play, host, run, "interrupted")
            return True
        if self.clock.deadline_reached():
            self._mark_not_run(play, host, run)  # queued behind --forks: it never connected
            return True
        try:
            return self._host_play(play, host, run, batch)
        except Exception as exc:  # noqa: BLE001 - the failure boundary (engine/boundary.py)
            error, trace = internal_error(exc, host, "connect")
            task = TaskResult(host, play.name, "connect", Status.FAILED, error=error, traceback=trace)
            run.host(host).tasks.append(task)
            self.processors.task_completed(task)
            return False
        finally:
            self.processors.host_completed(host)

    def _host_play(self, play: Play, host: str, run: RunResult, batch: Batch | None = None) -> bool:
        host_result: HostResult = run.host(host)
        session: HostSession | None = None
        try:
            session = self._session(host)
            if not session.connection.connects and needs_host(play):
                self._open(session)
        except GpuconfError as exc:
            if session is not None and isinstance(exc, ConnectError) and may_ignore_unreachable(play):
                session.reopen = self._reopen(session)   # each task tries the host again
                return self._play_tasks(play, host, run, session, batch)
            host_result.unreachable = isinstance(exc, ConnectError)
            host_result.error = str(exc)
            task = TaskResult(host, play.name, "connect", Status.UNREACHABLE if host_result.unreachable
                              else Status.FAILED, error=str(exc))
            host_result.tasks.append(task)
            self.processors.task_completed(task)
            return False
        return self._play_tasks(play, host, run, session, batch)

    def _reopen(self, session: HostSession) -> Callable[[], None]:
        def reopen() -> None:
            self._open(session)
            session.reopen = None
        return reopen

    def _play_tasks(self, play: Play, host: str, run: RunResult, session: HostSession, batch: Batch | None) -> bool:
        host_result = run.host(host)
        on_host = PlayOnHost(self.planner(play, host, batch), session, self.scope, batch)
        results = on_host.run()
        host_result.tasks.extend(results)
        host_result.registered.extend(on_host.log.registrations)
        if on_host.failed_by_batch:   # any_errors_fatal: another host's failure was this one's too
            return False
        if any(r.status == Status.UNREACHABLE and not r.ignored for r in results):
            host_result.unreachable = True
            host_result.error = next(r.error for r in results if r.status == Status.UNREACHABLE and not r.ignored)
            return False
        return not any(r.status == Status.FAILED and not r.ignored for r in results)

    def _open(self, session: HostSession) -> None:
        """Connect to the host and take its run lock (a check: shared, per request)."""
        session.connection.open()
        self._lock(session)

    def _lock(self, session: HostSession) -> None:
        """Apply holds the host's run lock for the whole run; check takes it shared per request.
        Hosts on a local connection are this one machine: the first of them holds its lock for all."""
        if self.options.verb == "apply":
            owner = f"gpuconf apply {self.playbook.path.name} from {socket.gethostname()}"
            if session.connection.spec.connection != "local":
                take_run_lock(session, LOCK_PATH, self.options.lock_wait, owner)
                return
            with self._local_lock:   # hosts on a local connection are this one machine
                if not self._local_locked:
                    take_run_lock(session, LOCK_PATH, self.options.lock_wait, owner)
                    self._local_locked = True
        else:
            session.read_lock = check_lock(LOCK_PATH, self.options.lock_wait)


def may_ignore_unreachable(play: Play) -> bool:
    """Whether a task of the play may take its host's unreachability as ignored (its own
    ignore_unreachable, its block's or its play's, or a template): then a host that cannot be
    reached when the play begins goes through its tasks, each trying it again, as in Ansible."""
    return bool(play.keywords.ignore_unreachable) or any(
        task.keywords.ignore_unreachable for task in play.tasks + play.handlers)


def needs_host(play: Play) -> bool:
    """Whether the play asks its hosts anything: facts, or a task (or handler) that reads or writes
    there. A play of set_fact, debug, assert and meta steps never connects, as in Ansible (what a
    dynamic include brings opens the connection when it needs it: engine/includes.py)."""
    return play.keywords.gather_facts or tasks_need_host(play.tasks + play.handlers)

