"""The kernel's own account: Xid errors, lockups and taint, for this boot only.

"Since this boot" without writing anything to the host (check mode must not): the
kernel ring buffer that `dmesg` prints starts empty at every boot, so it only holds
this boot's lines; when dmesg is not readable the journal's current boot is read
instead (`journalctl -k -b 0`). Old lines from earlier boots (kept in
`/var/log/kern.log` or a persistent journal) are therefore never read and never
re-alarm. Within a boot, each (GPU, Xid code) is one finding, with the number of
lines as its value: an Xid stays reported until the next boot, which is when most of
them stop mattering (a GPU reset or reboot is their remedy). The boot id is in the
result's data, so a consumer can tell one boot's report from the next.

The remote runner filters the log (`grep`, `tail`) so that only candidate records travel, each
whole: a matching line brings its record's other lines (the address of a lost GPU is on the
first line of a record whose last line says it fell off the bus).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic import Field

from gpuconf.facts import gather
from gpuconf.facts.base import Fact, FileState, Output, command, file_state
from gpuconf.facts.kernel import (
    decode_taint,
    find_lockups,
    find_lost_gpus,
    parse_sxid_events,
    parse_xid_events,
    summarise_sxid_events,
    summarise_xid_events,
)
from gpuconf.facts.kernel_log import LockupLine
from gpuconf.facts.sxid import SXidSummary
from gpuconf.facts.xid import (
    FAIL,
    INFO,
    LOST_CANDIDATES,
    WARN,
    LostGpu,
    RecoveryAction,
    XidSummary,
    after_resets,
    recovery_from_text,
)
from gpuconf.results import FaultCode, Finding
from gpuconf.tasks.base import Facts, Params, Unknown, Verdict
from gpuconf.tasks.health.common import FAILURE, OK, WARNING, HealthProbe, NvidiaSmiParams, Severity, gpu_name, verdict
from gpuconf.tasks.health.hardware import PCI_FACT
from gpuconf.tasks.health.pci import index_of, sysfs_gpu_addresses
from gpuconf.tasks.health.readings import GpuReadings, gpu_readings, optional_readings, smi_indexes

# "Xid" also keeps the NVSwitch driver's "SXid" lines
CANDIDATES = r"Xid|gpuconf: |lockup|blocked for more than|detected stall|nvidia_(unlocked_)?ioctl|" + LOST_CANDIDATES
JOURNAL = ["journalctl", "-k", "-b", "0", "-o", "short-monotonic", "--no-pager", "-q"]


@dataclass(frozen=True)
class KernelLog:
    """This boot's candidate log lines; `source` is dmesg, journal or none (unreadable)."""

    boot_id: str
    source: str
    text: str
    error: str = ""


def parse_kernel_log(out: Output) -> KernelLog:
    """dmesg's output, or the journal's when dmesg failed; `none` when both failed (the
    error is the last one's first lines) or the read timed out. The boot id is added by
    `read_log`."""
    if out.timed_out:
        return KernelLog("", "none", "", f"the read did not finish within {out.timeout or 20:g} s")
    if out.rc != 0:
        error = " ".join((out.stderr or out.stdout).strip().splitlines()[:2])
        return KernelLog("", "none", "", error or f"exit {out.rc}")
    source = "journal" if out.argv[:1] == ("journalctl",) else "dmesg"
    return KernelLog("", source, out.stdout)  # as printed: a last line without its newline may be cut


def kernel_log() -> Fact[KernelLog]:
    return command(["dmesg"], parse_kernel_log, timeout=20, key="health:kernel-log", alternatives=[JOURNAL],
                   grep=CANDIDATES, tail=5000, records=True)


def _boot_id(state: FileState) -> str:
    return (state.text or "").strip() if state.exists else ""


def read_log(facts: Facts, probe: str, findings: list[Finding] | None = None) -> KernelLog:
    """This boot's log, or `Unknown` (with a failure finding) when neither source is readable."""
    log: KernelLog = facts[kernel_log()]
    if log.source == "none":
        message = (f"cannot read this boot's kernel log (dmesg, journalctl -k -b 0): {log.error or 'denied'} "
                   "(set become: true)")
        raise Unknown(message, findings=[*(findings or []), Finding(probe, FAILURE, message, value="unreadable")])
    return replace(log, boot_id=_boot_id(facts[gather.BOOT_ID]))


LOG_READS = [kernel_log(), gather.BOOT_ID]


SEVERITY: dict[str, Severity] = {FAIL: FAILURE, WARN: WARNING, INFO: OK}


class XidParams(NvidiaSmiParams):
    severity_by_code: dict[int, Severity] = Field(
        default_factory=dict, description="per-code overrides of the Xid catalog's severity, e.g. {13: ok}; a "
        "recovery action the line names still decides")


def _xid_finding(summary: XidSummary, params: XidParams, index: int | None, probe: str) -> Finding:
    entry, last = summary.first.entry, summary.last
    severity = SEVERITY[summary.severity]
    if last.recovery is None and summary.code in params.severity_by_code:
        severity = params.severity_by_code[summary.code]
    bus = summary.pci_address or summary.first.bus_id
    when = summary.first.log.timestamp
    named = f"{entry.mnemonic}, {entry.description}" if entry.known else "not in NVIDIA's Xid catalog"
    if last.decode is not None:
        named = f"{entry.mnemonic}, {last.decode.words}"
        if last.followed_by is not None and last.followed_by.recovery is not None:
            named += f"; the Xid 154 that follows decides: {last.followed_by.recovery.text}"
    action = None if summary.action == "none" else summary.action
    return Finding(probe, severity, f"{gpu_name(index, bus)}: Xid {summary.code} ({named}) x{summary.count} this "
                   "boot" + (f", first at {when}" if when else "") + (f"; action: {action}" if action else "")
                   + (f": {last.message[:160]}" if last.message else ""),
                   gpu=index, bus_id=bus, value=summary.count, action=action, code=FaultCode("Xid", summary.code),
                   count=summary.count, rule=summary.rule)


def _lost_findings(lost: tuple[LostGpu, ...], fallen_xid: set[str | None], indexes: dict[str, int],
                   sysfs_order: list[str]) -> list[Finding]:
    by_gpu: dict[str | None, list[LostGpu]] = {}
    for line in lost:
        by_gpu.setdefault(line.pci_address, []).append(line)
    findings = []
    for address, lines in by_gpu.items():
        if address is not None and address in fallen_xid:
            continue   # the Xid 79 line of the same GPU already fails it
        index = index_of(address, indexes, sysfs_order)
        findings.append(Finding("fallen_off_bus", FAILURE, f"{gpu_name(index, address)}: {lines[-1].message[:200]} "
                                f"(x{len(lines)} this boot; action: {lines[-1].action})", gpu=index, bus_id=address,
                                value=len(lines), action=lines[-1].action, count=len(lines),
                                rule="kernel log: GPU lost (no Xid 79 line)"))
    return findings


def _sxid_finding(summary: SXidSummary) -> Finding:
    entry, line = summary.entry, summary.first
    where = f"NVSwitch {summary.switch} ({summary.pci_address})" if summary.switch is not None \
        else f"NVSwitch {summary.pci_address}"
    verdict = {True: "Fatal", False: "Non-fatal", None: "no verdict"}[summary.fatal]
    named = (f"{entry.name}, {entry.category.replace('_', ' ')} in the Fabric Manager guide" if entry.known
             else "not in the Fabric Manager guide's SXid table")
    when = line.log.timestamp
    action = None if summary.action == "none" else summary.action
    return Finding("sxid", SEVERITY[summary.severity], f"{where}: SXid {summary.code} ({named}) {verdict} "
                   f"x{summary.occurrences} this boot" + (f", first at {when}" if when else "")
                   + (f"; action: {action}" if action else "") + (f": {line.message[:160]}" if line.message else ""),
                   bus_id=summary.pci_address, value=summary.occurrences, action=action,
                   code=FaultCode("SXid", summary.code), count=summary.occurrences,
                   rule=f"sxid_catalog.csv: {summary.code}")


def judge_xids(text: str, params: XidParams, indexes: dict[str, int], sysfs_order: list[str],
               source: str = "dmesg", probe: str = "xid") -> list[Finding]:
    """One finding per (GPU, Xid code) by NVIDIA's catalog (the recovery action a line
    names decides over it), one per GPU the log says was lost without an Xid 79, and one
    per (NVSwitch, SXid code) by the Fabric Manager guide's table (the line's Fatal or
    Non-fatal decides over it)."""
    findings = []
    summaries = summarise_xid_events(after_resets(parse_xid_events(text), text))
    for summary in summaries:
        findings.append(_xid_finding(summary, params, index_of(summary.pci_address, indexes, sysfs_order), probe))
    fallen = {s.pci_address for s in summaries if s.code == 79}
    findings += _lost_findings(find_lost_gpus(text), fallen, indexes, sysfs_order)
    sxids = after_resets(parse_sxid_events(text), text, gpus=False)
    findings += [_sxid_finding(summary) for summary in summarise_sxid_events(sxids)]
    if not findings:
        findings.append(Finding(probe, OK, f"no Xid errors in this boot's kernel log ({source})", value=0, count=0))
    return findings


def judge_recovery_actions(readings: GpuReadings | None, probe: str = "recovery_action") -> list[Finding]:
    """nvidia-smi's `gpu_recovery_action` now, per GPU: anything but None fails, naming the
    action (it persists after the Xid line has rotated away, and DCGM's health watch can say
    Healthy meanwhile). Nothing when nvidia-smi did not answer or this driver lacks the field."""
    findings = []
    for gpu in readings.gpus if readings else ():
        if gpu.recovery_action is None:
            continue
        action = RecoveryAction(recovery_from_text(gpu.recovery_action), gpu.recovery_action)
        if action.action == "none":
            findings.append(Finding(probe, OK, f"{gpu.label}: no recovery action pending", gpu=gpu.index,
                                    bus_id=gpu.bus_id, value=gpu.recovery_action))
        else:
            findings.append(Finding(probe, SEVERITY[action.severity], f"{gpu.label}: the driver asks for recovery "
                                    f"action {gpu.recovery_action} ({action.action})", gpu=gpu.index,
                                    bus_id=gpu.bus_id, value=gpu.recovery_action, action=action.action,
                                    rule="nvidia-smi gpu_recovery_action"))
    return findings


class NoXidErrors(HealthProbe[XidParams]):
    """No NVIDIA Xid errors in this boot's kernel log (`dmesg`, else `journalctl -k -b
    0`), each (GPU, code) counted once per boot and judged by NVIDIA's Xid catalog
    (gpuconf/facts/xid_catalog.csv: fail, warn or info, and the action the vendor names);
    the recovery action a line names (Xid 154 "... to 0x2 (Node Reboot Required)")
    decides over the catalog, and codes not in it warn. An NVRM line saying a GPU fell
    off the bus or is lost fails it, with or without an Xid line. NVSwitch SXid lines
    (`nvidia-nvswitchN: SXid (PCI:...): CODE, Fatal|Non-fatal, ...`) are judged per
    (switch, code) by the Fabric Manager guide's SXid table (gpuconf/facts/sxid_catalog.csv):
    a Fatal one fails and asks for the guide's recovery (a reboot, or a reset of all GPUs
    and NVSwitches); a non-fatal one warns, or is info when the guide says the switch
    corrected it. nvidia-smi's
    `gpu_recovery_action` is read on every check: anything but None fails, naming the
    action. Lines from earlier boots are never read."""

    name = "health_xid"
    probe = "xid"
    Params = XidParams

    def reads(self, params: XidParams) -> list[Fact]:
        return [*LOG_READS, PCI_FACT, gpu_readings(params.nvidia_smi_timeout)]

    def check(self, params: XidParams, facts: Facts) -> Verdict:
        log = read_log(facts, self.probe)
        readings = optional_readings(facts, params.nvidia_smi_timeout)
        order = sysfs_gpu_addresses(facts[PCI_FACT])
        findings = judge_xids(log.text, params, smi_indexes(readings), order, log.source, self.probe)
        return verdict(findings + judge_recovery_actions(readings), boot_id=log.boot_id)


class KernelParams(Params):
    expected_taint: str = Field("POE", description="taint letters that are expected (the NVIDIA driver sets P "
                                "proprietary, O out-of-tree, E unsigned); any other is a warning")


def judge_taint(taint_text: str | None, expected: str, probe: str = "kernel_taint") -> Finding:
    taint = decode_taint(taint_text or "")
    if taint is None:
        return Finding(probe, WARNING, f"cannot read /proc/sys/kernel/tainted: {(taint_text or '')[:40]!r}")
    unexpected = [f for f in taint.flags if f.letter not in expected]
    if unexpected:
        shown = ", ".join(f"{f.letter} ({f.description})" for f in unexpected)
        return Finding(probe, WARNING, f"kernel tainted {taint.letters or '-'} ({taint.value}): {shown}",
                       value=taint.value)
    return Finding(probe, OK, f"kernel taint {taint.letters or 'none'} ({taint.value}): only expected flags",
                   value=taint.value)


def judge_lockups(log_text: str, probe: str = "kernel_lockup") -> list[Finding]:
    found: dict[str, list[LockupLine]] = {}
    for lockup in find_lockups(log_text):
        found.setdefault(lockup.kind, []).append(lockup)
    if not found:
        return [Finding(probe, OK, "no lockup or NVRM ioctl hang lines in this boot's kernel log", value=0)]
    return [Finding(probe, WARNING, f"{len(items)} {kind.replace('_', ' ')} line(s) this boot: "
                    f"{items[0].line.message[:160]}", value=len(items), count=len(items))
            for kind, items in found.items()]


class KernelClean(HealthProbe[KernelParams]):
    """The kernel is not tainted beyond the `expected_taint` letters
    (`/proc/sys/kernel/tainted`) and this boot's log has no soft/hard lockup, hung task,
    RCU stall or NVIDIA ioctl (`nvidia_unlocked_ioctl`) stack lines. Warnings only."""

    name = "health_kernel"
    probe = "kernel"
    Params = KernelParams

    def reads(self, params: KernelParams) -> list[Fact]:
        return [file_state("/proc/sys/kernel/tainted"), *LOG_READS]

    def check(self, params: KernelParams, facts: Facts) -> Verdict:
        state = facts[file_state("/proc/sys/kernel/tainted")]
        findings = [judge_taint(state.text if state.exists else None, params.expected_taint)]
        log = read_log(facts, "kernel_lockup", findings)
        return verdict(findings + judge_lockups(log.text), boot_id=log.boot_id)
