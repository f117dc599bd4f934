"""`gpuconf gate`: the pre-job gate, judged on the node from its fast signals only.

Slurm runs it as the `Prolog` before every job (and the `Epilog` after it), so it must be quick
and read little: one `nvidia-smi --query-gpu` call (the health probes' fields and the fabric
probe's, as the engine's merged query asks for them), one kernel log read, `/proc` and sysfs.
No SSH, no inventory, no playbook. The judging here is pure (a `Signals` in, `GateFinding`s
out) and reuses the health probes' judges, so the gate and `gpuconf check` never disagree on
what a signal means; only the verdict words differ (the gate's are NHC-like: PASS, INFO,
WARNING, CRITICAL, UNKNOWN).

Every line of this boot's kernel log counts, but those a completed GPU reset answered (the
reset's own lines, which gpuconf's recovery writes and then verifies: gpuconf.facts.xid.after_resets),
as the health check counts them. Nothing a gate does moves what the next gate sees: prologs that
start together, and a manual `gpuconf gate`, cannot hide a fault from each other. Reading and
Slurm are in node.py.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuconf.facts.gather import pci_devices
from gpuconf.facts.nvidia import LoadedDriver, NvidiaSmiFailure, parse_proc_driver_version
from gpuconf.facts.nvidia.failure import DRIVER_UNRESPONSIVE
from gpuconf.facts.nvlink_fabric import NONE, nvlink_fabric
from gpuconf.results import Finding
from gpuconf.scheduler.interface import PREFIX, REASON_MAX
from gpuconf.tasks.health.fabric_state import FabricReport, judge_fabric_state
from gpuconf.tasks.health.kernel_log import XidParams, judge_recovery_actions, judge_xids
from gpuconf.tasks.health.memory import EccParams, judge_ecc
from gpuconf.tasks.health.pci import sysfs_gpu_addresses
from gpuconf.tasks.health.readings import GpuReadings, smi_indexes
from gpuconf.tasks.health.usage import judge_persistence

PASS, INFO, WARNING, CRITICAL, UNKNOWN = "PASS", "INFO", "WARNING", "CRITICAL", "UNKNOWN"
# worst last: the gate's verdict is its worst finding's
RANK = {PASS: 0, INFO: 1, WARNING: 2, UNKNOWN: 3, CRITICAL: 4}
FAILING = (CRITICAL, UNKNOWN)
# gpuconf's own drain (the `gpuconf: ` prefix), so that remediate takes the node up (docs/slurm.md)
REASON_PREFIX = f"{PREFIX} gate: "  # these fail the prolog: Slurm drains the node and requeues the job
# what to do about a finding whose judge names no action of its own (the Xid catalog's do)
ACTIONS = {"ecc": "reset_gpu", "driver": "reboot_node", "persistence": "enable_persistence",
           "fabric_state": "restart_fabric_manager", "nvidia_smi": "reboot_node", "kernel_log": "check_permissions"}


@dataclass(frozen=True)
class GateFinding:
    """One verdict of the gate, with the action that answers it (None: nothing to do)."""

    check: str
    verdict: str
    message: str
    action: str | None = None
    gpu: int | None = None
    bus_id: str | None = None
    code: str | None = None  # "Xid 79", "SXid 12028"
    count: int | None = None
    rule: str | None = None  # the table row that decided it

    def as_dict(self) -> dict[str, object]:
        return {"check": self.check, "verdict": self.verdict, "message": self.message, "action": self.action,
                "gpu": self.gpu, "bus_id": self.bus_id, "code": self.code, "count": self.count, "rule": self.rule}


@dataclass(frozen=True)
class Signals:
    """What the gate read. `readings`: the GPUs, or nvidia-smi's failure, or why it could not be read
    (text); `log`: this boot's candidate lines, or None when no kernel log could be read
    (`log_error` says why); `pci_files`: sysfs vendor/class/device files of the PCI devices."""

    readings: GpuReadings | NvidiaSmiFailure | str
    fabric: FabricReport | None
    log: str | None
    log_source: str
    boot_id: str
    driver_version_text: str | None  # /proc/driver/nvidia/version, None when absent
    pci_files: dict[str, str]
    log_error: str = ""


def _gate(finding: Finding, check: str | None = None, failure: str = CRITICAL) -> GateFinding:
    verdict = {"ok": PASS, "warning": WARNING, "failure": failure}[finding.severity]
    name = check or finding.probe
    action = finding.action or (ACTIONS.get(name) if verdict != PASS else None)
    return GateFinding(name, verdict, finding.message, action, finding.gpu, finding.bus_id,
                       str(finding.code) if finding.code else None, finding.count, finding.rule)


def _xid_verdicts(findings: list[Finding]) -> list[GateFinding]:
    """An Xid the catalog calls info is INFO, not PASS: it happened, and needs nothing."""
    gated = []
    for finding in findings:
        one = _gate(finding)
        if one.verdict == PASS and finding.count:
            one = dataclasses.replace(one, verdict=INFO, action=None)
        gated.append(one)
    return gated


def judge_driver(text: str | None, pinned: str | None) -> GateFinding:
    if text is None:
        return GateFinding("driver", CRITICAL, "the NVIDIA driver is not loaded (/proc/driver/nvidia/version is "
                           "absent)", ACTIONS["driver"])
    loaded = parse_proc_driver_version(text)
    if not isinstance(loaded, LoadedDriver):
        return GateFinding("driver", UNKNOWN, f"cannot read the loaded driver's version: {text.strip()[:120]!r}",
                           ACTIONS["driver"])
    if pinned and loaded.version != pinned:
        return GateFinding("driver", CRITICAL, f"driver {loaded.version} is loaded, pinned {pinned} (a reboot "
                           "loads the installed one)", ACTIONS["driver"])
    return GateFinding("driver", PASS, f"driver {loaded.version} loaded" + (", the pinned version" if pinned else ""))


def judge_gpus(signals: Signals) -> list[GateFinding]:
    """Recovery action, retired or remapped pages, persistence and the fabric, from the one query."""
    readings = signals.readings
    if isinstance(readings, str):
        verdict = CRITICAL if readings.startswith(DRIVER_UNRESPONSIVE) else UNKNOWN
        return [GateFinding("nvidia_smi", verdict, readings, ACTIONS["nvidia_smi"])]
    if isinstance(readings, NvidiaSmiFailure):
        return [GateFinding("nvidia_smi", CRITICAL, f"{readings.kind}: {readings.message}", ACTIONS["nvidia_smi"])]
    if readings.incomplete:
        return [GateFinding("nvidia_smi", UNKNOWN, f"nvidia-smi's output is incomplete: {readings.incomplete}")]
    if not readings.gpus:
        return [GateFinding("nvidia_smi", CRITICAL, "nvidia-smi reported no GPU", ACTIONS["nvidia_smi"])]
    found = [_gate(f) for f in judge_recovery_actions(readings)]
    found += [_gate(f) for f in judge_ecc(readings.gpus, EccParams.model_validate({}))]
    found += [_gate(f) for f in judge_persistence(readings.gpus, "warning")]
    pci = pci_devices(signals.pci_files)
    if nvlink_fabric(pci["gpus"], pci["nvswitches"]) != NONE and signals.fabric is not None:
        found += [_gate(f) for f in judge_fabric_state(signals.fabric, nvlink_fabric(pci["gpus"], pci["nvswitches"]))]
    return found


def judge_log(signals: Signals) -> list[GateFinding]:
    """This boot's Xid, SXid and fallen-off-the-bus lines that no completed GPU reset answered."""
    if signals.log is None:
        return [GateFinding("kernel_log", UNKNOWN, f"cannot read this boot's kernel log (dmesg, journalctl -k -b 0):"
                            f" {signals.log_error or 'denied'}", ACTIONS["kernel_log"])]
    readings = signals.readings if isinstance(signals.readings, GpuReadings) else None
    order = sysfs_gpu_addresses(pci_devices(signals.pci_files))
    findings = judge_xids(signals.log, XidParams.model_validate({}), smi_indexes(readings), order, signals.log_source)
    if len(findings) == 1 and findings[0].severity == "ok" and findings[0].count == 0:  # judge_xids' "none"
        return [GateFinding("xid", PASS, f"no Xid or SXid in this boot's kernel log ({signals.log_source})")]
    return _xid_verdicts(findings)


def judge(signals: Signals, pinned: str | None = None) -> list[GateFinding]:
    """Every finding of one gate."""
    return [judge_driver(signals.driver_version_text, pinned), *judge_gpus(signals), *judge_log(signals)]


def overall(findings: list[GateFinding]) -> str:
    return max((f.verdict for f in findings), key=RANK.__getitem__, default=PASS)


def reason(findings: list[GateFinding]) -> str | None:
    """The drain reason, `gpuconf: gate: <first critical or unknown finding>` (+N more), or None."""
    failing = sorted((f for f in findings if f.verdict in FAILING), key=lambda f: -RANK[f.verdict])
    if not failing:
        return None
    more = f" (+{len(failing) - 1} more)" if len(failing) > 1 else ""
    words = " ".join(failing[0].message.split())
    room = REASON_MAX - len(REASON_PREFIX) - len(more)
    return REASON_PREFIX + (words if len(words) <= room else words[: room - 1] + "…") + more
