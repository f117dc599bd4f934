"""One action per unhealthy node, from NVIDIA's recovery actions that the health findings name.

A node's findings may ask for several actions (an Xid that wants a reset, another that wants a
reboot, the driver's `gpu_recovery_action`). The strongest wins, because it covers the others: a
reboot resets every GPU, and a hardware hold keeps the node out of service whatever else it needs.
What each action makes gpuconf do, and NVIDIA's source for it, is data beside the Xid and SXid
catalogs (gpuconf/facts/recovery_actions.csv, documented in docs/remediate.md); the ranking is here.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from gpuconf.facts.common import packaged_table
from gpuconf.results import Finding

HOLD, REBOOT, RESET, IMEX, PLAYBOOK, APP = "hold", "reboot", "reset", "imex", "playbook", "app"
# the kind of step each action takes, weakest first; a kind covers every weaker one (a reset stops and
# starts the IMEX daemon; a reboot resets every GPU)
RANK = (APP, PLAYBOOK, IMEX, RESET, REBOOT, HOLD)
KIND = {
    "restart_app": APP, "recover_imex_domain": IMEX,
    "reset_gpu": RESET, "reset_bus": RESET, "drain": RESET, "drain_and_reset": RESET,
    "reboot_node": REBOOT,
    "drain_p2p": HOLD, "contact_support": HOLD,
}
# the node actions of each kind, in order: the next is the fallback when the one before is refused,
# fails, or leaves the fault in place (gpuconf/remediate/ladder.py runs them)
STEPS = {APP: (), PLAYBOOK: (), IMEX: ("imex",), RESET: ("reset", "reboot"), REBOOT: ("reboot",), HOLD: ()}
# the actions that reset every GPU (and NVSwitch) of the node together: Fabric Manager guide, D.9
RESET_ALL = ("drain_and_reset",)


@dataclass(frozen=True)
class Decision:
    """The action that decided a node's remediation, and the finding and catalog row behind it."""

    action: str  # NVIDIA's name for it (reboot_node, contact_support, ...)
    kind: str  # HOLD, REBOOT, RESET or PLAYBOOK
    finding: str  # the deciding finding's message
    row: str  # the catalog row it came from: "xid_catalog.csv: 79", "nvidia-smi gpu_recovery_action"
    code: str = ""  # "Xid 79", "SXid 12028", or "" (the driver's recovery action)
    gpu: int | None = None
    bus_id: str | None = None
    others: int = 0  # more findings that asked for an action, covered by this one
    buses: tuple[str, ...] = ()  # every GPU whose failed findings ask for a reset (the ones to reset)
    count: int | None = None  # the deciding finding's count (an Xid's lines this boot), when it has one

    @property
    def hold(self) -> bool:
        return self.kind == HOLD

    @property
    def steps(self) -> tuple[str, ...]:
        """The node actions to take, each the fallback of the one before ("reset", "reboot", "imex")."""
        return STEPS.get(self.kind, ())

    @property
    def reboots(self) -> bool:
        return "reboot" in self.steps

    @property
    def resets_all(self) -> bool:
        """Every GPU of the node at once: the action says so, or no finding named its GPU."""
        return self.action in RESET_ALL or not self.buses

    def text(self) -> str:
        more = f" (+{self.others} more covered)" if self.others else ""
        return f"{self.action} ({self.kind}) from {self.row}: {self.finding}{more}"


def kind_of(action: str) -> str:
    return KIND.get(action, PLAYBOOK)


def row_of(finding: Finding) -> tuple[str, str]:
    """(table row, code) of a finding, from its fields: the row that decided it (an Xid's or SXid's
    catalog row, the per-line decode row, the driver's recovery action), else the probe that said it."""
    code = str(finding.code) if finding.code else ""
    return finding.rule or f"health probe {finding.probe}", code


def decide_action(findings: list[Finding], strict: bool = False) -> Decision | None:
    """The strongest action the failed findings (and the warnings, under --strict) ask for; None
    when none asks for one (drift, a task that failed without naming a recovery: the playbook's
    apply and verify, as before). An Xid the catalog does not know asks for contact_support
    (gpuconf.facts.xid.xid_entry): when it fails, it is a hold."""
    judged = ("failure", "warning") if strict else ("failure",)
    asking = [f for f in findings if f.severity in judged and f.action and f.action != "none"]
    if not asking:
        return None
    best = max(asking, key=lambda f: RANK.index(kind_of(f.action or "")))  # the first of the strongest
    row, code = row_of(best)
    action = best.action or ""
    buses = tuple(dict.fromkeys(f.bus_id for f in asking if f.bus_id and kind_of(f.action or "") == RESET))
    return Decision(action, kind_of(action), best.message, row, code, best.gpu, best.bus_id, len(asking) - 1, buses,
                    best.count)


@cache
def reboot_overrides() -> dict[str, int]:
    """xid_reboots.csv: the codes whose fault the node gets more (or fewer) reboots for before it is a
    hardware hold than --hold-after-reboots says, each with its source."""
    return {row["code"]: int(row["hold_after_reboots"]) for row in packaged_table("xid_reboots.csv")}


def reboots_before_hold(code: str, default: int) -> int:
    """How many reboots a fault must survive (within the window) before the node is held for it."""
    return reboot_overrides().get(code, default) if code else default


@cache
def action_table() -> dict[str, dict[str, str]]:
    """recovery_actions.csv by action: what gpuconf does, the fallback, NVIDIA's source."""
    return {row["action"]: row for row in packaged_table("recovery_actions.csv")}
