"""`gpuconf remediate --check`: each node's plan and the budget it would spend, from one read-only
check, the scheduler's states and the history as they are. Nothing is changed: no node, no
scheduler state, no journal entry (the history is read when it exists).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from gpuconf.remediate import plan, restart_app
from gpuconf.remediate.breaker import Breaker, counted, fleet_size, state
from gpuconf.remediate.decision import APP, action_table
from gpuconf.remediate.history import Record
from gpuconf.remediate.lemon import LemonRule
from gpuconf.scheduler.interface import Node

WORDS = {
    plan.NOTHING: "in sync: nothing",
    plan.FOREIGN: "drained by someone else: not touched",
    plan.RESUME: "drained by gpuconf and clean now: resume",
    plan.LEMON: "a lemon: drain it as one",
    plan.STILL_LEMON: "still a lemon: stays drained",
    plan.UNREACHABLE: "unreachable: nothing decided",
    plan.NOT_IN_SCHEDULER: "not known to the scheduler",
    plan.HARDWARE_HELD: "a hardware hold: stays drained for a person",
}


@dataclass(frozen=True)
class NodePlan:
    host: str
    node: str
    action: str  # plan's word (plan.REMEDIATE, plan.RESUME, ...)
    text: str  # the plan in words: the deciding finding, the catalog row, the steps
    takes_out: bool  # in service now and would be drained
    changes: tuple[str, ...] = ()  # what its apply would change, in order (a firmware update's stages)


def node_plan(host: str, name: str, verdict: plan.Verdict, node: Node | None, lemon: bool,
              reports: Sequence[Record] = (), now: float = 0.0, app_window: float = 3600.0) -> NodePlan:
    action = plan.decide(verdict, node, lemon)
    takes_out = action in (plan.REMEDIATE, plan.LEMON) and node is not None and node.in_service
    decision = verdict.decision
    if action == plan.REMEDIATE and takes_out and decision is not None and decision.kind == APP:
        escalated = restart_app.judge(reports, decision, now, app_window)[1]
        if escalated is None:
            return NodePlan(host, name, action, f"restart_app, decided by {decision.row}: {decision.finding}; "
                            "steps: reported, left in service", False)
        verdict = dataclasses.replace(verdict, decision=escalated)
    if action != plan.REMEDIATE:
        words = WORDS[action]
        if action in (plan.FOREIGN, plan.STILL_LEMON, plan.HARDWARE_HELD) and node is not None:
            words += f" ({node.state}, reason: {node.reason or '(none)'})"
        return NodePlan(host, name, action, words, takes_out)
    decision = verdict.decision
    if decision is None:
        return NodePlan(host, name, action, f"remediate: drain, wait, apply, verify, resume; finding: "
                        f"{plan.first_line(verdict.finding)}", takes_out, verdict.changes)
    steps = action_table().get(decision.action, {}).get("what_gpuconf_does", "apply and verify")
    return NodePlan(host, name, action, f"{decision.action}, decided by {decision.row}: {decision.finding}"
                    + (f" (+{decision.others} more covered)" if decision.others else "") + f"; steps: {steps}",
                    takes_out)


def preview(hosts: dict[str, str], verdicts: dict[str, plan.Verdict], states: dict[str, Node],
            records: list[Record], events: list[tuple[float, str, str]], limit: int, lemon: LemonRule,
            breaker: Breaker, now: float, app_window: float = 3600.0, gpu_hosts: set[str] | None = None) -> list[str]:
    """The lines `remediate --check` prints."""
    plans = []
    for host, name in sorted(hosts.items()):
        verdict = verdicts.get(host, plan.Verdict(host, False, "gpuconf: not checked", unreachable=True))
        mine = [r for r in records if r.host == host]
        lemon_now = not any(r.open for r in mine) and lemon.is_lemon(mine, now)
        plans.append(node_plan(host, name, verdict, states.get(name), lemon_now, mine, now, app_window))
    lines = []
    for p in plans:
        lines.append(f"{p.host}" + (f" ({p.node})" if p.node != p.host else "") + f": {p.text}")
        lines += [f"    apply {number}/{len(p.changes)}: {change}" for number, change in enumerate(p.changes, 1)]
    out_now = sorted(h for h, n in hosts.items() if n in states and not states[n].in_service)
    wanted = [p.host for p in plans if p.takes_out]
    first = max(0, min(len(wanted), limit - len(out_now)))
    current = state(events)
    failing = counted(records, current.since, breaker.window, now)
    bound = breaker.limit(fleet_size(gpu_hosts or set(), set(hosts))) if breaker.on else 0
    if current.tripped:
        first = 0
    elif breaker.on:  # the loop's waves take no more than may still fail before the breaker trips
        first = min(first, max(0, bound - len(failing)))
    lines.append(f"budget: --max-unavailable {limit}; {len(out_now)} node(s) in scope out of service now"
                 + (f" ({', '.join(out_now)})" if out_now else "")
                 + f"; {len(wanted)} more to take out, {first} in the first wave")
    if current.tripped:
        lines.append(f"circuit breaker: tripped ({current.tripped}); no node is taken out until "
                     "gpuconf remediate --reset-breaker")
    elif breaker.on:
        lines.append(f"circuit breaker: {len(failing)} of {bound} within the window")
    lines.append("check mode: nothing was changed")
    return lines
