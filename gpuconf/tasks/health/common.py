"""What every health probe shares: findings, the verdict, and the probe base class.

A probe judges what it reads into `Finding`s (ok / warning / failure), one per GPU
where the observation is about a GPU. `verdict()` turns them into a `Verdict` with no
changes: the engine marks the task failed when a finding is a failure, and counts
warnings (failures only under `--strict`). A probe that cannot read what it judges
(nvidia-smi hung, the driver is not loaded) raises `Unknown` carrying a failure
finding that says why, so the result is `unknown` and never a pass.
"""
from __future__ import annotations

from typing import ClassVar, Literal, TypedDict

from pydantic import Field

from gpuconf.facts.base import Fact, FactUnavailable, Parsed
from gpuconf.results import Finding
from gpuconf.tasks.base import Change, Facts, P, Params, TaskType, Unknown, Verdict, drift

Severity = Literal["ok", "warning", "failure"]
OK: Severity = "ok"
WARNING: Severity = "warning"
FAILURE: Severity = "failure"
_RANK = {OK: 0, WARNING: 1, FAILURE: 2}


class Where(TypedDict):
    """Where a finding is, as `Finding`'s own fields: the GPU's index and its PCI address."""

    gpu: int | None
    bus_id: str | None


class WhereRead(Where):
    """Where a finding is, and the value read there (`Finding.value`)."""

    value: object


def gpu_name(index: int | None, bus_id: str | None) -> str:
    """`GPU 3 (0000:07:00.0)`: how every message names a GPU."""
    if index is None:
        return f"GPU at {bus_id}" if bus_id else "GPU"
    return f"GPU {index} ({bus_id})" if bus_id else f"GPU {index}"


def worst(findings: list[Finding]) -> str:
    """The most severe severity among `findings` (`ok` when there are none)."""
    return max((f.severity for f in findings), key=lambda severity: _RANK[severity], default=OK)


def summarise(findings: list[Finding], most: int = 3) -> str:
    """The messages of the most severe findings, e.g. for the task's one-line message."""
    level = worst(findings)
    chosen = [f.message for f in findings if f.severity == level]
    text = "; ".join(chosen[:most])
    return text + (f"; +{len(chosen) - most} more" if len(chosen) > most else "")


def verdict(findings: list[Finding], changes: list[Change] | None = None, **data: object) -> Verdict:
    """A probe's result: its findings, no state changes (remedies aside: each is a Change
    with verify=False, an action the engine's re-check does not expect to vanish)."""
    return Verdict(list(changes or ()), summarise(findings), data, list(findings))


def after_pending_reboot(facts: Facts, what: str) -> Verdict | None:
    """Drift that waits for the pending reboot (a state read now would be the old boot's), or None."""
    if not facts.reboot_pending:
        return None
    return drift(Change(f"{what}: judged after the pending reboot ({facts.reboot_pending[0]})", reboot=True))


def read_or_unknown(facts: Facts, fact: Fact[Parsed], probe: str, what: str) -> Parsed:
    """The fact's value; `Unknown` with a failure finding when it cannot be read (hung, failed)."""
    try:
        return facts[fact]
    except FactUnavailable as exc:
        raise Unknown(str(exc), findings=[Finding(probe, FAILURE, f"{what} cannot be read: {exc}")]) from None


class NvidiaSmiParams(Params):
    """Parameters of probes that read the shared nvidia-smi fact."""

    nvidia_smi_timeout: float = Field(10, gt=0, description="seconds nvidia-smi may take before it counts as "
                                      "driver_unresponsive (its process group is killed)")


class HealthProbe(TaskType[P]):
    """Base of the health probes: read-only, `check()` is `verdict(judge())`.

    `probe` names the probe in findings and reports (`gpuconf_health{probe=...}`).
    Remedies (opt-in) are Changes returned next to the findings: check mode reports them,
    apply runs them.
    """

    probe: ClassVar[str] = ""

    def judge(self, params: P, facts: Facts) -> list[Finding]:
        raise NotImplementedError

    def check(self, params: P, facts: Facts) -> Verdict:
        return verdict(self.judge(params, facts))
