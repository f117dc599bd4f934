"""One action per unhealthy node, from NVIDIA's recovery actions that the health findings name.

A node's findings may ask for several actions (an Xid that wants a reset, another that wants a
reboot, the driver's `gpu_recovery_action`). The strongest wins, because it covers the others: a
reboot resets every GPU, and a hardware hold keeps the node out of service whatever else it needs.
What each action makes gpuconf do, and NVIDIA's source for it, is data beside the Xid and SXid
catalogs (gpuconf/facts/recovery_actions.csv, documented in docs/remediate.md); the ranking is here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from gpuconf.facts.common import packaged_table
from gpuconf.results import Finding

HOLD, REBOOT, RESET, PLAYBOOK = "hold", "reboot", "reset", "playbook"
# the kind of step each action takes, weakest first; a kind covers every weaker one
RANK = (PLAYBOOK, RESET, REBOOT, HOLD)
KIND = {
    "restart_app": PLAYBOOK, "recover_imex_domain": PLAYBOOK,
    "reset_gpu": RESET, "reset_bus": RESET, "drain": RESET, "drain_and_reset": RESET,
    "reboot_node": REBOOT,
    "drain_p2p": HOLD, "contact_support": HOLD,
}
CODE = re.compile(r"\b(S?Xid) (\d+)\b")


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

    @property
    def hold(self) -> bool:
        return self.kind == HOLD

    @property
    def reboots(self) -> bool:
        """A reset is not built yet: its documented fallback, a reboot, is taken."""
        return self.kind in (REBOOT, RESET)

    def text(self) -> str:
        more = f" (+{self.others} more covered)" if self.others else ""
        return f"{self.action} ({self.kind}) from {self.row}: {self.finding}{more}"


def kind_of(action: str) -> str:
    return KIND.get(action, PLAYBOOK)


def row_of(finding: Finding) -> tuple[str, str]:
    """(catalog row, code) of a finding: the Xid or SXid it names, else the probe that said it."""
    match = CODE.search(finding.message)
    if finding.probe in ("xid", "sxid", "fallen_off_bus") and match:
        word, number = match.groups()
        table = "sxid_catalog.csv" if word == "SXid" else "xid_catalog.csv"
        return f"{table}: {number}", f"{word} {number}"
    if finding.probe == "recovery_action":
        return "nvidia-smi gpu_recovery_action", ""
    return f"health probe {finding.probe}", ""


def decide_action(findings: list[Finding]) -> Decision | None:
    """The strongest action the failed findings ask for; None when none asks for one (drift, a
    task that failed without naming a recovery: the playbook's apply and verify, as before).
    An Xid the catalog does not know asks for contact_support (gpuconf.facts.xid.xid_entry): when it
    fails, it is a hold."""
    asking = [f for f in findings if f.severity == "failure" and f.action and f.action != "none"]
    if not asking:
        return None
    best = max(asking, key=lambda f: RANK.index(kind_of(f.action or "")))  # the first of the strongest
    row, code = row_of(best)
    action = best.action or ""
    return Decision(action, kind_of(action), best.message, row, code, best.gpu, best.bus_id, len(asking) - 1)


@cache
def action_table() -> dict[str, dict[str, str]]:
    """recovery_actions.csv by action: what gpuconf does, the fallback, NVIDIA's source."""
    return {row["action"]: row for row in packaged_table("recovery_actions.csv")}
