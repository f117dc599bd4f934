"""The remediation loop: check every host once, then take the nodes that need it in waves
bounded by the budget: drain, wait for jobs to end, apply, verify, resume.

It works through three interfaces, so that it is tested without hosts or a cluster: the
`Scheduler` (gpuconf/scheduler/interface.py), the `Hooks` that check and apply hosts (command.py runs
the engine for them), and the `History` (its journal step is written before each step).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from gpuconf.errors import GpuconfError
from gpuconf.remediate import ladder, plan, reset, restart_app
from gpuconf.remediate import summary as out
from gpuconf.remediate.breaker import Breaker, Fuse
from gpuconf.remediate.decision import APP, Decision
from gpuconf.remediate.history import DRIFT, FAULT, History, Record
from gpuconf.remediate.hold import hold_reason, hold_record
from gpuconf.remediate.lemon import LemonRule
from gpuconf.remediate.watch import Claims, NotRebooted, Stopped, TakenOver, Watch, whose
from gpuconf.scheduler.interface import Node, Scheduler


class Hooks(Protocol):
    def check(self, hosts: list[str]) -> dict[str, plan.Verdict]:
        """The read-only check (playbook and health gate) of these hosts."""
        ...

    def apply(self, host: str, reboot: Callable[[], None]) -> str | None:
        """Converge the host; a reboot a task needs calls `reboot` (the scheduler's, which may refuse
        with a GpuconfError). An error, or None."""
        ...

    def serials(self, host: str) -> dict[str, str]:
        """The host's GPU serials by PCI address, for a hardware hold ({} when they cannot be read)."""
        ...

    def collect(self, host: str) -> str:
        """The host's evidence bundle (gpuconf collect): its path; a GpuconfError when it cannot be had."""
        ...

    def node_action(self, host: str, step: str, decision: Decision) -> reset.Outcome:
        """A node action of the ladder other than the reboot: "reset" (the GPUs), "imex" (the daemon)."""
        ...


@dataclass
class Settings:
    budget: plan.Budget
    drain_timeout: float = 600.0
    lemon: LemonRule = LemonRule()
    breaker: Breaker = Breaker()  # off unless --breaker
    poll: float = 2.0
    busy_retries: int = 1  # a node still busy at --drain-timeout is tried again in this many later waves
    reboot_timeout: float = 600.0  # a node that rebooted registers again with the scheduler within this
    resume_timeout: float = 120.0  # a resumed node answers the scheduler's ping within this
    app_window: float = 3600.0  # restart_app again within this: escalated to a GPU reset
    run_id: str = ""


class Remediation:
    def __init__(self, hosts: dict[str, str], scheduler: Scheduler, hooks: Hooks, history: History,
                 settings: Settings, say: Callable[[str], None] = lambda line: None,
                 stop: threading.Event | None = None, clock: Callable[[], float] = time.time):
        self.hosts = hosts  # inventory host -> scheduler node name, the scope
        self.scheduler, self.hooks, self.history, self.settings = scheduler, hooks, history, settings
        self.say = say
        self.stop = stop or threading.Event()
        self.clock = clock
        self.summary = out.Summary()
        self._lock = threading.Lock()
        self.claims = Claims(scheduler, history)
        self.watch = Watch(self._states, settings.poll, self.stop, self.claims)
        self.fuse = Fuse(settings.breaker, history, set(hosts), clock)

    # -- the run --------------------------------------------------------------
    def run(self) -> out.Summary:
        s = self.summary
        s.limit = self.settings.budget.limit(len(self.hosts))
        for left in self.history.open_records().values():  # a run killed mid-reboot: its reason, rewritten
            if left.host in self.hosts:
                self.claims.know(self.hosts[left.host], left.id, left.reason or left.finding)
        self._settle_reboots(self._states())
        for back in self._states().values():
            if self.claims.ours(back):
                self.claims.reassert(back)
        verdicts = self.hooks.check(sorted(self.hosts))
        if self.stop.is_set():  # an interrupted check left tasks out: nothing is judged on it
            for host, node_name in self.hosts.items():
                self.summary.set(host, node_name, out.NOT_STARTED, "the run was interrupted during the check")
            s.interrupted = True
            return s
        for host, seen in verdicts.items():  # the fleet the breaker's share is of
            if seen.gpus is not None:
                self.history.see_gpus(host, seen.gpus)
        states = self._states()
        open_records = {h: r for h, r in self.history.open_records().items() if h in self.hosts}
        pending: list[str] = []
        resumes: list[str] = []
        for host, node_name in sorted(self.hosts.items()):
            node = states.get(node_name)
            record = open_records.get(host)
            if record is not None:
                closing = plan.replay(record, node)
                if closing is not None:
                    self.history.finish(record.id, closing, "closed by the next run")
                    self._line(host, f"journal: the last run stopped at '{record.step}'; closed as {closing}")
                    record = open_records.pop(host)
                else:
                    self._line(host, f"journal: the last run stopped at '{record.step}'; carrying it on")
            verdict = verdicts.get(host, plan.Verdict(host, False, "gpuconf: not checked", unreachable=True))
            lemon = host not in open_records and self.settings.lemon.is_lemon(self.history.records(host), self.clock())
            action = plan.decide(verdict, node, lemon)
            if action == plan.REMEDIATE and record is None and node is not None and node.in_service \
                    and verdict.decision is not None and verdict.decision.kind == APP:
                verdict = verdicts[host] = self._restart_app(host, verdict, verdict.decision)
                if verdict.decision is not None and verdict.decision.kind == APP:
                    continue  # reported; the node stays in service
            if action == plan.HARDWARE_HELD and record is not None:  # a run killed right after the hold's drain
                self.history.finish(open_records.pop(host).id, out.HARDWARE, "closed by the next run")
            if action in (plan.REMEDIATE, plan.LEMON):
                pending.append(host)
            elif action == plan.RESUME:
                resumes.append(host)
            else:
                self._settled(host, action, node, verdict)
        self._verdicts, self._records = verdicts, open_records
        self._run_wave(plan.Wave(0, resumes), states, first=True)
        self._waves(pending, {h: 0 for h in pending})
        s.interrupted = self.stop.is_set()
        return s

    def _restart_app(self, host: str, verdict: plan.Verdict, decision: Decision) -> plan.Verdict:
        """An application's fault: reported and the node left in service, or, repeated within
        --restart-app-window, escalated to a GPU reset (the verdict the wave then works on)."""
        name = self.hosts[host]
        new, escalated = restart_app.judge(self.history.records(host), decision, self.clock(),
                                           self.settings.app_window)
        if escalated is not None:
            self._line(host, f"restart_app again within {plan.duration_text(self.settings.app_window)}: "
                       f"escalated to reset_gpu ({decision.finding})")
            return dataclasses.replace(verdict, decision=escalated)
        detail = restart_app.detail(decision)
        if new:
            rid = self.history.begin(host, name, verdict.finding, self.settings.run_id, step="report", cause=FAULT)
            self.history.finish(rid, restart_app.REPORTED, detail)
        self.summary.set(host, name, out.REPORTED, f"{decision.finding} ({'new' if new else 'seen before'})",
                         drifted=True)
        self._line(host, f"restart_app: {decision.finding}: reported, left in service")
        return verdict

    def _settled(self, host: str, action: str, node: Node | None, verdict: plan.Verdict) -> None:
        out.settled(self.summary, self.say, host, self.hosts[host], action, node, verdict, self.scheduler.name)

    def _waves(self, pending: list[str], tries: dict[str, int]) -> None:
        number = 0
        while pending and not self.stop.is_set():
            tripped = self.fuse.tripped()
            if tripped is not None:  # many nodes failing at once: the cause is not the nodes
                self.summary.breaker = tripped
                for host in pending:
                    self.summary.set(host, self.hosts[host], out.NOT_STARTED, "the circuit breaker is open",
                                     drifted=True)
                    self._line(host, "not started: the circuit breaker is open (gpuconf remediate --reset-breaker)")
                return
            states = self._states()
            room = self.fuse.room()  # no wave takes out more nodes than may still fail before the breaker trips
            wave = plan.Wave(number + 1, self._hosts_of_wave(pending, states)[:room])
            if not wave.nodes:
                out_now = [h for h, n in self.hosts.items() if n in states and not states[n].in_service]
                for host in pending:
                    self.summary.set(host, self.hosts[host], out.NOT_STARTED,
                                     f"the budget is spent: {len(out_now)} node(s) out of service "
                                     f"({', '.join(sorted(out_now))}), --max-unavailable {self.settings.budget}",
                                     drifted=True)
                    self._line(host, "not started: no budget left (--max-unavailable)")
                return
            number += 1
            self.summary.waves = number
            self._run_wave(wave, states)
            busy = [h for h in wave.nodes if self.summary.nodes[h].outcome == out.SKIPPED_BUSY]
            retry = [h for h in busy if tries[h] < self.settings.busy_retries]
            for host in retry:
                tries[host] += 1
            pending = [h for h in pending if h not in wave.nodes] + retry
        for host in pending:  # interrupted before they started
            self.summary.set(host, self.hosts[host], out.NOT_STARTED, "the run was interrupted", drifted=True)

    def _hosts_of_wave(self, pending: list[str], states: dict[str, Node]) -> list[str]:
        names = {self.hosts[h]: h for h in pending}
        wave = plan.next_wave([self.hosts[h] for h in pending], states, list(self.hosts.values()),
                              self.summary.limit, 0)
        return [names[n] for n in wave.nodes]

    def _run_wave(self, wave: plan.Wave, states: dict[str, Node], first: bool = False) -> None:
        if not wave.nodes:
            return
        if not first:
            self.say(f"wave {wave.number}: {', '.join(wave.nodes)}")
        with ThreadPoolExecutor(max_workers=len(wave.nodes)) as pool:
            list(pool.map(lambda host: self._node(host, states.get(self.hosts[host])), wave.nodes))

    # -- one node -------------------------------------------------------------
    def _node(self, host: str, node: Node | None) -> None:
        name = self.hosts[host]
        record = self._records.get(host)
        verdict = self._verdicts[host]
        try:
            self._check_stop()
            if verdict.clean:
                self._resume_verified(host, record)
            elif verdict.decision is not None and verdict.decision.hold:
                self._hold(host, record.id if record else None, verdict, verdict.decision)
            elif record is None and self.settings.lemon.is_lemon(self.history.records(host), self.clock()):
                self._lemon(host)
            else:
                self._remediate(host, record, verdict)
        except Stopped:
            step = self._journal_step(host)
            self.summary.set(host, name, out.INTERRUPTED, f"stopped at '{step}'", drifted=True)
            self._line(host, f"interrupted at '{step}': left drained with gpuconf's reason")
        except GpuconfError as exc:
            self.summary.set(host, name, out.ERROR, str(exc), drifted=True)
            self._line(host, f"error: {exc}")

    def _resume_verified(self, host: str, record: Record | None) -> None:
        name = self.hosts[host]
        applied = record is not None and record.step in ("collect", "reset", "imex", "reboot", "apply", "verify",
                                                         "resume", "fail")
        rid = record.id if record else self.history.begin(host, name, "verified clean", self.settings.run_id,
                                                          step="resume")
        if record is not None:
            self.history.step(rid, "resume")
        outcome = out.RESUMED if applied else out.VERIFIED
        try:
            self._resume(host)
        except TakenOver as taken:
            self._left_to_someone(host, rid, taken.node, drifted=False)
            return
        self.history.finish(rid, outcome)
        self.summary.set(host, name, outcome)

    def _lemon(self, host: str) -> None:
        name = self.hosts[host]
        reason = self.settings.lemon.reason(self.history.records(host), self.clock())
        verdict = self._verdicts[host]
        rid = self.history.begin(host, name, verdict.finding, self.settings.run_id, step="lemon",
                                 cause=verdict.cause or None, fingerprint=verdict.fingerprint)
        node = self._states().get(name)
        if self._foreign(node):  # drained meanwhile by someone else: their reason stays
            self._left_to_someone(host, rid, node, drifted=True)
            return
        self._line(host, f"drain: {reason}")
        self.claims.drain(name, rid, reason)
        self.history.finish(rid, out.LEMON, reason)
        self.summary.set(host, name, out.LEMON, reason, drifted=True)

    def _remediate(self, host: str, record: Record | None, verdict: plan.Verdict) -> None:
        name, reason = self.hosts[host], verdict.finding
        if record is None:
            rid = self.history.begin(host, name, reason, self.settings.run_id, step="drain",
                                     cause=verdict.cause or None, fingerprint=verdict.fingerprint)
        else:
            rid = record.id
            self.history.step(rid, "drain", reason)
        verified = False
        try:
            node = self._states().get(name)
            if self._foreign(node):  # drained by someone else since the wave was read
                raise TakenOver(node)
            # only a drain this run set for drift alone is lifted for a long job: a fault's stays until verified
            liftable = node is not None and node.in_service and verdict.cause == DRIFT and verdict.decision is None
            self._line(host, f"drain: {reason}")
            self.claims.drain(name, rid, reason)
            self.history.step(rid, "wait")
            if not self._wait_idle(host):
                self._busy(host, rid, liftable)
                return
            self.watch.still_ours(name)
            result = ladder.climb(self, host, rid, verdict)
            verified, after, error = result.verified, result.after, result.error
            if verified:
                self.history.step(rid, "resume")
                self._resume(host)
                self.history.finish(rid, out.RESUMED, result.recovered(verdict.decision))
                self.summary.set(host, name, out.RESUMED, result.recovered(verdict.decision))
                return
            if result.hold and after.decision is not None:  # the fault survived the reboot: the hardware's
                self._hold(host, rid, after, after.decision)
                return
            why = error or after.finding
            failed = plan.failed_reason(why)
            self.history.step(rid, "fail", failed)
            self.watch.still_ours(name)
            self._line(host, f"drain: {failed}")
            self.claims.drain(name, rid, failed)
            self.history.finish(rid, out.FAILED, plan.first_line(why))
            self.summary.set(host, name, out.FAILED, failed, drifted=True)
        except TakenOver as taken:
            self._left_to_someone(host, rid, taken.node, drifted=not verified)

    def _busy(self, host: str, rid: int, liftable: bool) -> None:
        """Jobs still run at --drain-timeout: a drift drain this run set is lifted (the node would hold
        the budget for the whole job), any other stays (a fault: no new job starts on it)."""
        name = self.hosts[host]
        detail = f"jobs still running after {plan.duration_text(self.settings.drain_timeout)}"
        if liftable:
            self.history.step(rid, "undrain")
            if self._resume(host):
                detail += "; resumed, to be retried in a later wave"
        else:
            detail += "; left drained until verified clean (not a drain this run set for drift alone)"
        self.history.finish(rid, out.SKIPPED_BUSY, detail)
        self.summary.set(host, name, out.SKIPPED_BUSY, detail, drifted=True)

    def _hold(self, host: str, rid: int | None, verdict: plan.Verdict, decision: Decision) -> None:
        """Drain the node as a hardware hold, for a person: the journal's `hold` step first, the
        hold's row once the drain is set."""
        name = self.hosts[host]
        serials = self.hooks.serials(host)
        reason = hold_reason(decision, serials)
        if rid is None:
            rid = self.history.begin(host, name, verdict.finding, self.settings.run_id, step="hold",
                                     cause=verdict.cause or None, fingerprint=verdict.fingerprint)
        else:
            self.history.step(rid, "hold", decision.text())
        node = self._states().get(name)
        if self._foreign(node):  # drained meanwhile by someone else: their reason stays
            self._left_to_someone(host, rid, node, drifted=True)
            return
        self._line(host, f"hardware hold: {decision.text()}")
        self._line(host, f"drain: {reason}")
        self.claims.drain(name, rid, reason)
        self.history.add_hold(hold_record(rid, host, name, decision, reason, serials, self.clock()))
        if not any(r.id == rid and r.bundle for r in self.history.records(host)):
            ladder.evidence(self, host, rid)  # for the RMA: the node is held as the fault left it
        self.history.finish(rid, out.HARDWARE, decision.text())
        self.summary.set(host, name, out.HARDWARE, reason, drifted=True)

    # -- helpers --------------------------------------------------------------
    def _resume(self, host: str) -> bool:
        """Resume the node if, read now, its drain is still gpuconf's own (TakenOver if someone else's);
        False when it is in service already."""
        name = self.hosts[host]
        node = self._states().get(name)
        if node is not None and node.in_service:
            return False
        if node is None or not self.claims.ours(node):
            raise TakenOver(node)
        self._line(host, "resume")
        self.scheduler.resume(name)
        if not self.watch.in_service(name, self.settings.resume_timeout):
            self._line(host, f"resumed, but not in service after {plan.duration_text(self.settings.resume_timeout)}")
        return True

    def _reboot(self, host: str) -> None:
        """The apply's reboot, through the scheduler, only while the drain is gpuconf's own; the
        scheduler keeps the reason the node has (gpuconf's) and never writes one of its own."""
        name = self.hosts[host]
        try:
            self.watch.still_ours(name)
        except TakenOver as taken:
            raise NotRebooted(f"not rebooted: {self._whose(host, taken.node)}") from None
        self._line(host, "reboot")
        self.scheduler.reboot(name)

    def _left_to_someone(self, host: str, rid: int, node: Node | None, drifted: bool) -> None:
        """Someone else drained (or resumed) the node while gpuconf worked on it: the remediation
        ends there, its journal closed, the node as they left it."""
        who = self._whose(host, node)
        self.history.finish(rid, out.FOREIGN, f"at '{self._journal_step(host)}': {who}")
        self.summary.set(host, self.hosts[host], out.FOREIGN, who, drifted=drifted)
        self._line(host, f"{who}: left to them, not touched any further")

    def _whose(self, host: str, node: Node | None) -> str:
        return whose(node, self.hosts[host], self.scheduler.name)

    def _wait_idle(self, host: str) -> bool:
        """Until the node's jobs have ended (True), or --drain-timeout (False)."""
        timeout = self.settings.drain_timeout
        if self.watch.idle(self.hosts[host], timeout,
                           lambda node: self._line(host, f"wait: jobs still running ({node.state})")):
            return True
        self._line(host, f"still busy after {plan.duration_text(timeout)}: skipped")
        return False

    def _settle_reboots(self, states: dict[str, Node], only: str | None = None) -> None:
        """Wait for the nodes gpuconf asked to reboot to register again (their reboot flag gone)."""
        self.watch.reboots([n for n, node in states.items() if node.rebooting and self.claims.ours(node)
                            and (only is None or n == only) and n in self.hosts.values()],
                           self.settings.reboot_timeout)

    def _states(self) -> dict[str, Node]:
        states = self.scheduler.nodes(self.hosts.values())
        out_now = sum(1 for n in states.values() if not n.in_service)
        with self._lock:
            self.summary.max_out_of_service = max(self.summary.max_out_of_service, out_now)
        return states

    def _foreign(self, node: Node | None) -> bool:
        """Unknown to the scheduler, or out of service for a reason that is not gpuconf's."""
        return node is None or (not node.in_service and not self.claims.ours(node))

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise Stopped()

    def _journal_step(self, host: str) -> str:
        records = self.history.records(host)
        return records[-1].step if records else "?"

    def _line(self, host: str, text: str) -> None:
        self.say(f"{host}: {text}")
