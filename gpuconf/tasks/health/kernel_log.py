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

The host filters the log (`grep`) so that only candidate lines travel.
"""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field, model_validator

from gpuconf.engine.results import Finding
from gpuconf.facts.base import Fact, Output, file_state, shell
from gpuconf.facts.kernel import (APPLICATION, ECC, FALLEN_OFF_BUS, GSP, NVLINK, UNKNOWN, classify_xid,
                                  decode_taint, find_lockups, parse_xid_events, summarise_xid_events)
from gpuconf.tasks.base import Check, CheckContext, Params, Unknown
from gpuconf.tasks.health.common import FAILURE, OK, WARNING, HealthProbe, NvidiaSmiParams, Severity, \
    gpu_name, verdict
from gpuconf.tasks.health.hardware import PCI_FACT
from gpuconf.tasks.health.pci import index_of, sysfs_gpu_addresses
from gpuconf.tasks.health.readings import gpu_readings, optional_readings, smi_indexes

CANDIDATES = r"Xid|lockup|blocked for more than|detected stall|nvidia_(unlocked_)?ioctl"
LOG_SCRIPT = (
    "printf '#boot %s\\n' \"$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)\"; "
    "if log=$(dmesg 2>/dev/null); then echo '#source dmesg'; "
    "elif log=$(journalctl -k -b 0 -o short-monotonic --no-pager -q 2>/dev/null); then echo '#source journal'; "
    "else echo '#source none'; dmesg 2>&1 | head -n 2 | sed 's/^/#error /'; exit 0; fi; "
    f"printf '%s\\n' \"$log\" | grep -E -i '{CANDIDATES}' | tail -n 5000; true"
)


@dataclass(frozen=True)
class KernelLog:
    """This boot's candidate log lines; `source` is dmesg, journal or none (unreadable)."""

    boot_id: str
    source: str
    text: str
    error: str = ""


def parse_kernel_log(out: Output) -> KernelLog:
    boot, source, errors, lines = "", "none", [], []
    for line in out.stdout.splitlines():
        if line.startswith("#boot "):
            boot = line[6:].strip()
        elif line.startswith("#source "):
            source = line[8:].strip()
        elif line.startswith("#error "):
            errors.append(line[7:])
        else:
            lines.append(line)
    return KernelLog(boot, source, "\n".join(lines), " ".join(errors).strip())


def kernel_log() -> Fact:
    return shell("health:kernel-log", LOG_SCRIPT, parse_kernel_log, timeout=20)


def read_log(ctx: CheckContext, probe: str, findings: list[Finding] | None = None) -> KernelLog:
    """This boot's log, or `Unknown` (with a failure finding) when neither source is readable."""
    log = ctx.get(kernel_log())
    if log.source == "none":
        message = (f"cannot read this boot's kernel log (dmesg, journalctl -k -b 0): {log.error or 'denied'} "
                   "(set become: true)")
        raise Unknown(message, findings=[*(findings or []), Finding(probe, FAILURE, message, value="unreadable")])
    return log


CATEGORY_SEVERITY: dict[str, Severity] = {FALLEN_OFF_BUS: FAILURE, ECC: FAILURE, GSP: FAILURE, NVLINK: FAILURE,
                                          APPLICATION: WARNING, UNKNOWN: WARNING}


class XidParams(NvidiaSmiParams):
    severity_by_category: dict[str, Severity] = Field(
        default_factory=lambda: dict(CATEGORY_SEVERITY),
        description="severity per Xid category (fallen_off_bus, ecc, gsp, nvlink: failure; application, "
                    "unknown: warning)")
    severity_by_code: dict[int, Severity] = Field(default_factory=dict,
                                                  description="per-code overrides, e.g. {13: ok}")

    @model_validator(mode="after")
    def _categories(self) -> "XidParams":
        unknown = sorted(set(self.severity_by_category) - set(CATEGORY_SEVERITY))
        if unknown:
            raise ValueError(f"unknown Xid categories {', '.join(unknown)} (known: {', '.join(CATEGORY_SEVERITY)})")
        return self


def judge_xids(text: str, params: XidParams, indexes: dict[str, int], sysfs_order: list[str],
               source: str = "dmesg", probe: str = "xid") -> list[Finding]:
    findings = []
    for summary in summarise_xid_events(parse_xid_events(text)):
        info = classify_xid(summary.code)
        severity = params.severity_by_code.get(summary.code,
                                               params.severity_by_category.get(summary.category, WARNING))
        index = index_of(summary.pci_address, indexes, sysfs_order)
        bus = summary.pci_address or summary.first.bus_id
        when = summary.first.log.timestamp
        detail = summary.last.message[:160]
        findings.append(Finding(
            probe, severity, f"{gpu_name(index, bus)}: Xid {summary.code} ({info.description}; {summary.category})"
            f" x{summary.count} this boot" + (f", first at {when}" if when else "") + (f": {detail}" if detail else ""),
            gpu=index, bus_id=bus, value=summary.count))
    if not findings:
        findings.append(Finding(probe, OK, f"no Xid errors in this boot's kernel log ({source})", value=0))
    return findings


class NoXidErrors(HealthProbe):
    """No NVIDIA Xid errors in this boot's kernel log (`dmesg`, else `journalctl -k -b
    0`), each (GPU, code) counted once per boot, classified by code
    (gpuconf.facts.xid): 79 fallen off the bus, 48/63/64/94/95 ECC, 119/120 GSP and
    32/74 NVLink are failures; 13/31/43/45 (usually the application) and codes not in
    the table are warnings. Lines from earlier boots are never read."""

    name = "health_xid"
    probe = "xid"
    Params = XidParams

    def facts(self, params: XidParams):
        return [kernel_log(), PCI_FACT, gpu_readings(params.nvidia_smi_timeout)]

    def check(self, ctx: CheckContext, params: XidParams) -> Check:
        log = read_log(ctx, self.probe)
        indexes = smi_indexes(optional_readings(ctx, params.nvidia_smi_timeout))
        order = sysfs_gpu_addresses(ctx.get(PCI_FACT))
        return verdict(judge_xids(log.text, params, indexes, order, log.source, self.probe), boot_id=log.boot_id)


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
    found: dict[str, list] = {}
    for lockup in find_lockups(log_text):
        found.setdefault(lockup.kind, []).append(lockup)
    if not found:
        return [Finding(probe, OK, "no lockup or NVRM ioctl hang lines in this boot's kernel log", value=0)]
    return [Finding(probe, WARNING, f"{len(items)} {kind.replace('_', ' ')} line(s) this boot: "
                    f"{items[0].line.message[:160]}", value=len(items)) for kind, items in found.items()]


class KernelClean(HealthProbe):
    """The kernel is not tainted beyond the `expected_taint` letters
    (`/proc/sys/kernel/tainted`) and this boot's log has no soft/hard lockup, hung task,
    RCU stall or NVIDIA ioctl (`nvidia_unlocked_ioctl`) stack lines. Warnings only."""

    name = "health_kernel"
    probe = "kernel"
    Params = KernelParams

    def facts(self, params: KernelParams):
        return [file_state("/proc/sys/kernel/tainted"), kernel_log()]

    def check(self, ctx: CheckContext, params: KernelParams) -> Check:
        state = ctx.get(file_state("/proc/sys/kernel/tainted"))
        findings = [judge_taint(state.text if state.exists else None, params.expected_taint)]
        log = read_log(ctx, "kernel_lockup", findings)
        return verdict(findings + judge_lockups(log.text), boot_id=log.boot_id)
