"""One node's steps of a remediation (loop.py runs them in waves): resume a verified node, drain
it as a lemon or a hardware hold, leave a long job's node, reboot and resume through the scheduler
after reading the node again, and leave it to whoever took it over. Also the loop's `Settings`
(its `Hooks`, the engine's check and apply, are hooks.py's).
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from gpuconf.remediate import decision as decisions
from gpuconf.remediate import ladder, plan
from gpuconf.remediate import summary as out
from gpuconf.remediate.breaker import Breaker
from gpuconf.remediate.decision import Decision
from gpuconf.remediate.history import History, Record
from gpuconf.remediate.hold import hold_reason, hold_record
from gpuconf.remediate.hooks import Hooks
from gpuconf.remediate.lemon import LemonRule
from gpuconf.remediate.watch import Claims, NotRebooted, Stopped, TakenOver, Watch, whose
from gpuconf.scheduler.interface import Node, Scheduler


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
    hold_after_reboots: int = 1  # reboots a fault must survive (within reboot_window) before the hold
    reboot_window: float = 86400.0
    run_id: str = ""


class NodeSteps:
    """The steps on one node, shared by the loop's waves (Remediation in loop.py)."""

    hosts: dict[str, str]
    scheduler: Scheduler
    hooks: Hooks
    history: History
    settings: Settings
    say: Callable[[str], None]
    stop: threading.Event
    clock: Callable[[], float]
    summary: out.Summary
    claims: Claims
    watch: Watch
    _lock: threading.Lock
    _verdicts: dict[str, plan.Verdict]
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
        detail = ladder.recovered(self.history, rid) if applied else ""
        self.history.finish(rid, outcome, detail)
        self.summary.set(host, name, outcome, detail)

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
        self.claims.rebooting(name)
        self.scheduler.reboot(name)

    def _reboots_left(self, host: str, decision: Decision) -> int:
        """How many more reboots the node gets for this fault before it is a hardware hold: the
        catalog's count for its code (else --hold-after-reboots), less the reboots gpuconf gave it
        for the same fault within --reboot-window (this run's included)."""
        need = decisions.reboots_before_hold(decision.code, self.settings.hold_after_reboots)
        since = self.clock() - self.settings.reboot_window
        done = sum(1 for r in self.history.records(host) if r.code == decision.code and r.action
                   for at, step, _ in self.history.steps(r.id) if step == "reboot" and at >= since)
        return need - done

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
