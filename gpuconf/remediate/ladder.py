"""The recovery ladder of one drained, idle node: evidence, then the node actions its decision
names, each verified by the check before the node goes back into service.

    reset_gpu, drain_and_reset   collect, reset the GPU(s), apply, verify; refused, failed or the
                                 fault still there: reboot, verify; still there: hardware hold
    reboot_node                  collect, reboot, apply, verify; still there: hardware hold
    recover_imex_domain          restart the IMEX daemon, apply, verify; still failing: failed
    (no action, drift)           apply, verify; failing: failed
    a firmware update failed     (in the apply) hardware hold at once, no verify (firmware.py)

Every step is journalled before it is taken (the next run carries a killed one on). What each
action does and NVIDIA's source for it: gpuconf/facts/recovery_actions.csv, docs/remediate.md.
The restart_app findings never get here: the node stays in service (restart_app.py).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

from gpuconf.errors import GpuconfError
from gpuconf.remediate import plan
from gpuconf.remediate.breaker import RECOVERED
from gpuconf.remediate.decision import Decision
from gpuconf.remediate.history import History
from gpuconf.remediate.hooks import Hooks
from gpuconf.remediate.watch import Watch
from gpuconf.scheduler.interface import Node

NODE_ACTIONS = ("reset", "reboot", "imex")  # the journal's steps that are a hardware action


class Remediation(Protocol):
    """What the ladder uses of the loop (gpuconf/remediate/loop.py's Remediation)."""

    hosts: dict[str, str]
    history: History
    hooks: Hooks
    watch: Watch

    def _line(self, host: str, text: str) -> None: ...

    def _reboot(self, host: str) -> None: ...

    def _check_stop(self) -> None: ...

    def _settle_reboots(self, states: dict[str, Node], only: str | None = None) -> None: ...

    def _states(self) -> dict[str, Node]: ...

    def _reboots_left(self, host: str, decision: Decision) -> int: ...


@dataclass
class Result:
    """How the ladder ended: verified (resume), a fault the node actions did not clear after a
    reboot (hold, with the check that said so), or failed (error or the check's finding)."""

    verified: bool
    after: plan.Verdict
    error: str | None = None
    hold: bool = False
    taken: tuple[str, ...] = ()  # the node actions carried out ("reset", "reboot", "imex")


def recovered(history: History, rid: int) -> str:
    """The history's detail of a verified remediation that needed a node action ("" if none), from its
    journal: a run stopped after its reset and carried on by the next keeps the mark (the breaker counts it)."""
    taken = list(dict.fromkeys(step for _, step, _ in history.steps(rid) if step in NODE_ACTIONS))
    action = history.record(rid).action
    return f"{RECOVERED} {action} by {', '.join(taken)}" if taken and action else ""


def climb(run: Remediation, host: str, rid: int, verdict: plan.Verdict) -> Result:
    """The node is drained under gpuconf's reason and idle; take it up the ladder."""
    decision = verdict.decision
    steps = list(decision.steps) if decision is not None else []
    if steps and decision is not None:
        run.history.set_action(rid, decision.action, decision.code)  # journalled before its first node action
        evidence(run, host, rid)
    applied, error, rebooted = False, None, False
    taken: list[str] = []
    after = verdict
    while True:
        if steps and decision is not None:
            step = steps.pop(0)
            if not take(run, host, rid, step, decision):
                continue  # refused or failed: the next step is its fallback
            taken.append(step)
            rebooted = rebooted or step == "reboot"
        if not applied:
            run.watch.still_ours(run.hosts[host])  # a person's drain during a node action: nothing applied
            run.history.step(rid, "apply")
            run._line(host, "apply")
            error = run.hooks.apply(host, lambda: run._reboot(host))
            applied = True
            run._check_stop()
            run._settle_reboots(run._states(), only=run.hosts[host])
            run.watch.still_ours(run.hosts[host])
            held = run.hooks.held(host) if error is not None else None
            if held is not None:  # a firmware update the BMC failed: the hardware's, held without a verify
                return Result(False, dataclasses.replace(verdict, decision=held), error, hold=True, taken=tuple(taken))
        run.history.step(rid, "verify")
        run._line(host, "verify")
        after = run.hooks.check([host]).get(host, plan.Verdict(host, False, "not checked", unreachable=True))
        run._check_stop()
        if error is None and after.clean:
            return Result(True, after, taken=tuple(taken))
        if error is None and after.decision is not None and rebooted and not steps and decision is not None \
                and run._reboots_left(host, decision) > 0:  # --hold-after-reboots: another reboot first
            steps.append("reboot")
        if error is None and after.decision is not None and steps:
            run._line(host, f"the fault is still there: {after.decision.finding}; next: {steps[0]}")
            continue
        return Result(False, after, error, hold=rebooted and after.decision is not None, taken=tuple(taken))


def evidence(run: Remediation, host: str, rid: int) -> None:
    """The evidence bundle, before a reset or a reboot erases it; a bundle that cannot be had is
    said and journalled, and the recovery goes on (a node is not kept broken for want of a log)."""
    run.history.step(rid, "collect")
    run._line(host, "collect: evidence before the repair")
    try:
        path = run.hooks.collect(host)
    except (GpuconfError, OSError) as exc:  # the host's failure, or this machine's (a full disk)
        run.history.step(rid, "collect", f"not collected: {exc}")
        run._line(host, f"collect: not collected: {plan.first_line(str(exc))}")
        return
    run.history.add_bundle(host, path, rid)
    run._line(host, f"collect: {path}")


def take(run: Remediation, host: str, rid: int, step: str, decision: Decision) -> bool:
    """One node action; False when it was refused or failed (the ladder goes on to its fallback)."""
    name = run.hosts[host]
    run.watch.still_ours(name)
    run.history.step(rid, step, decision.text())
    run._line(host, f"recovery: {step}: {decision.text()}")
    if step == "reboot":
        run._reboot(host)
        run._settle_reboots(run._states(), only=name)
        run.watch.still_ours(name)
        return True
    try:
        outcome = run.hooks.node_action(host, step, decision)
    except (GpuconfError, OSError) as exc:
        outcome_text, done = f"{step} failed: {plan.first_line(str(exc))}", False
    else:
        done = outcome.done
        outcome_text = ("refused: " if outcome.refused else "" if done else "failed: ") + outcome.said
        if outcome.not_started:
            outcome_text += f"; not started again: {', '.join(outcome.not_started)}"
    run.history.step(rid, step, outcome_text)
    run._line(host, f"{step}: {outcome_text}")
    run._check_stop()
    run.watch.still_ours(name)  # whoever drained it meanwhile decides from now on
    return done

