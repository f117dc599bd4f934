"""What a remediation run came to: per node, its outcome; for the run, the exit code, the
summary lines and the JSON report.

`foreign` is a node someone else holds: drained for their own reason before the run, or drained
(or resumed) by them while gpuconf worked on it, after which gpuconf touched it no further.

Exit codes (a bitmask, as check and apply): 0 every node in scope is in sync and was left in
service (or is drained by someone else and in sync); 2 drift or a failure is left on some node
(skipped busy, not started for the budget, drained by someone else, still a lemon); 4 a node
needs a person: its remediation failed, it is a lemon or a hardware hold, a scheduler command
failed, or the circuit breaker is open;
8 a host could not be reached; 130 the run was interrupted (every node it worked on is left
drained with a gpuconf reason, and the journal says where it stopped); 1 bad usage.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpuconf.remediate import plan
from gpuconf.results import EXIT_DRIFT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNREACHABLE
from gpuconf.scheduler.interface import Node

# outcomes of one node in one run
IN_SYNC, RESUMED, VERIFIED, FAILED, LEMON, STILL_LEMON = "in_sync", "resumed", "verified", "failed", "lemon", \
    "still_lemon"
SKIPPED_BUSY, FOREIGN, NOT_STARTED, UNREACHABLE, ERROR, INTERRUPTED = "skipped_busy", "foreign", "not_started", \
    "unreachable", "error", "interrupted"
NOT_IN_SCHEDULER = "not_in_scheduler"
HARDWARE, HARDWARE_HELD = "hardware", "hardware_held"  # drained as a hardware hold: now, or by an earlier run
REPORTED = "reported"  # restart_app: the finding reported, the node left in service (restart_app.py)
NEEDS_A_PERSON = (FAILED, LEMON, ERROR, NOT_IN_SCHEDULER, HARDWARE, HARDWARE_HELD)
LEFT_UNCONVERGED = (SKIPPED_BUSY, NOT_STARTED, STILL_LEMON, REPORTED)
TITLES = [(RESUMED, "resumed"), (VERIFIED, "verified and resumed"), (FAILED, "remediation failed (left drained)"),
          (HARDWARE, "hardware holds (drained for a person: gpuconf hardware lists them)"),
          (HARDWARE_HELD, "still hardware holds (left drained)"),
          (LEMON, "lemons (left drained)"), (STILL_LEMON, "still lemons (left drained)"),
          (SKIPPED_BUSY, "skipped, still busy at --drain-timeout (a drift resumed, a fault left drained)"),
          (REPORTED, "restart_app reported (the application's fault: left in service)"),
          (FOREIGN, "drained by someone else (left as they set it)"), (NOT_STARTED, "not started"),
          (UNREACHABLE, "unreachable"), (NOT_IN_SCHEDULER, "not known to the scheduler"),
          (ERROR, "errors"), (INTERRUPTED, "interrupted (left drained, the journal says where)")]


@dataclass
class NodeOutcome:
    host: str
    node: str
    outcome: str
    detail: str = ""
    drifted: bool = False  # the node's check was not clean when the run left it


@dataclass
class Summary:
    scope: int = 0
    limit: int = 0
    waves: int = 0
    interrupted: bool = False
    nodes: dict[str, NodeOutcome] = field(default_factory=dict)
    max_out_of_service: int = 0  # the most nodes in scope the run saw out of service at once
    breaker: str = ""  # why the circuit breaker is open, when it stopped the run taking nodes out

    def set(self, host: str, node: str, outcome: str, detail: str = "", drifted: bool = False) -> None:
        self.nodes[host] = NodeOutcome(host, node, outcome, detail, drifted)

    def of(self, outcome: str) -> list[NodeOutcome]:
        return [n for n in self.nodes.values() if n.outcome == outcome]

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        code = EXIT_FAILED | EXIT_DRIFT if self.breaker else EXIT_OK
        for node in self.nodes.values():
            if node.outcome in NEEDS_A_PERSON:
                code |= EXIT_FAILED | EXIT_DRIFT
            elif node.outcome in LEFT_UNCONVERGED or (node.outcome == FOREIGN and node.drifted):
                code |= EXIT_DRIFT
            elif node.outcome == UNREACHABLE:
                code |= EXIT_UNREACHABLE
        return code

    def lines(self) -> list[str]:
        lines = [f"remediate: {len(self.nodes)} node(s) in scope, at most {self.limit} out of service at once, "
                 f"{self.waves} wave(s)"]
        for outcome, title in TITLES:
            nodes = self.of(outcome)
            if nodes:
                lines.append(f"  {title} ({len(nodes)}):")
                lines += [f"    {n.host}" + (f" ({n.node})" if n.node != n.host else "") +
                          (f": {n.detail}" if n.detail else "") for n in nodes]
        if self.breaker:
            lines.append(f"  circuit breaker tripped: {self.breaker}; no node is taken out of service until a "
                         "person runs gpuconf remediate --reset-breaker")
        in_sync = self.of(IN_SYNC)
        if in_sync:
            lines.append(f"  in sync, in service: {len(in_sync)}")
        return lines

    def write(self, path: Path) -> None:
        data = {"scope": len(self.nodes), "max_unavailable": self.limit, "waves": self.waves,
                "interrupted": self.interrupted, "exit_code": self.exit_code,
                "max_out_of_service_seen": self.max_out_of_service, "breaker": self.breaker or None,
                "nodes": {h: asdict(n) for h, n in sorted(self.nodes.items())}}
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(path)


def settled(summary: Summary, say: Callable[[str], None], host: str, name: str, action: str, node: Node | None,
            verdict: plan.Verdict, scheduler: str) -> None:
    """A node the loop settles without working on it: in sync, someone else's, still a lemon or a
    hardware hold, unreachable, or unknown to the scheduler."""
    if action == plan.NOTHING:
        summary.set(host, name, IN_SYNC)
    elif action == plan.FOREIGN and node is not None:
        detail = f"{node.state}, reason: {node.reason or '(none)'}"
        summary.set(host, name, FOREIGN, detail, drifted=not verdict.clean)
        say(f"{host}: drained by someone else ({detail}): not touched")
    elif action == plan.STILL_LEMON and node is not None:
        summary.set(host, name, STILL_LEMON, node.reason or "", drifted=not verdict.clean)
        say(f"{host}: still a lemon: stays drained ({node.reason})")
    elif action == plan.HARDWARE_HELD and node is not None:
        summary.set(host, name, HARDWARE_HELD, node.reason or "", drifted=not verdict.clean)
        say(f"{host}: hardware hold: stays drained for a person ({node.reason})")
    elif action == plan.UNREACHABLE:
        summary.set(host, name, UNREACHABLE, plan.first_line(verdict.finding))
        say(f"{host}: unreachable: {plan.first_line(verdict.finding)}")
    else:
        summary.set(host, name, NOT_IN_SCHEDULER, f"{scheduler} has no node '{name}'")
        say(f"{host}: {scheduler} has no node '{name}' (slurm_node_name names it)")
