"""The remediation loop: check every host once, then take the nodes that need it in waves
bounded by the budget: drain, wait for jobs to end, apply, verify, resume.

It works through three interfaces, so that it is tested without hosts or a cluster: the
`Scheduler` (gpuconf/scheduler/interface.py), the `Hooks` that check and apply hosts (command.py runs
the engine for them), and the `History` (its journal step is written before each step). One node's
steps, the hooks and the settings are in steps.py.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gpuconf.connection.base import HostBusy
from gpuconf.errors import GpuconfError
from gpuconf.remediate import ladder, plan, restart_app
from gpuconf.remediate import summary as out
from gpuconf.remediate.breaker import Fuse
from gpuconf.remediate.decision import APP, Decision
from gpuconf.remediate.history import DRIFT, FAULT, History, Record
from gpuconf.remediate.hooks import Hooks
from gpuconf.remediate.steps import NodeSteps, Settings
from gpuconf.remediate.watch import Claims, Stopped, TakenOver, Watch
from gpuconf.scheduler.interface import Node, Scheduler


class Remediation(NodeSteps):
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
            # a remediation carried on that took its hardware action already: the breaker counts it, and
            # finishing it (verified, or held) costs nothing more
            counted = {h for h in pending if (r := self._records.get(h)) is not None and r.action}
            tripped = self.fuse.tripped()
            if tripped is not None:  # many nodes failing at once: the cause is not the nodes
                self.summary.breaker = tripped
                for host in [h for h in pending if h not in counted]:
                    self.summary.set(host, self.hosts[host], out.NOT_STARTED, "the circuit breaker is open",
                                     drifted=True)
                    self._line(host, "not started: the circuit breaker is open (gpuconf remediate --reset-breaker)")
                pending = [h for h in pending if h in counted]
                if not pending:
                    return
            states = self._states()
            room = self.fuse.room()  # no wave takes out more nodes than may still fail before the breaker trips
            taken = self._hosts_of_wave(pending, states)
            others = [h for h in taken if h not in counted]
            wave = plan.Wave(number + 1, [h for h in taken if h in counted] + others[:room])
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
            release = self.hooks.claim(host)
        except GpuconfError as exc:  # another remediate (another state directory) works on the node
            detail = f"another gpuconf remediate works on it: {exc}" if isinstance(exc, HostBusy) else \
                f"its remediation lock could not be taken: {exc}"
            self.summary.set(host, name, out.NOT_STARTED, detail, drifted=not verdict.clean)
            self._line(host, f"not started: {detail}")
            return
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
        finally:
            release()

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
                detail = ladder.recovered(self.history, rid)
                self.history.finish(rid, out.RESUMED, detail)
                self.summary.set(host, name, out.RESUMED, detail)
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


__all__ = ["Hooks", "Remediation", "Settings"]
