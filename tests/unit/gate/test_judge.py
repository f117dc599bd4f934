"""The pre-job gate's judging (gpuconf/gate/judge.py): each signal gets its verdict and action, and the
drain reason is gpuconf's own (this boot's whole kernel log counts: tests/unit/test_gate_whole_boot.py)."""
from __future__ import annotations

from gpuconf.facts.base import Output
from gpuconf.gate.judge import (
    CRITICAL,
    INFO,
    PASS,
    UNKNOWN,
    WARNING,
    Signals,
    judge,
    overall,
    reason,
)
from gpuconf.scheduler.interface import REASON_MAX
from gpuconf.tasks.health.readings import parse_readings
from tests.real import read_real

FIELDS = "index, pci.bus_id, name, persistence_mode, retired_pages.pending, remapped_rows.pending, gpu_recovery_action"
HEALTHY = "0, 00000000:91:00.0, NVIDIA H100 80GB HBM3, Enabled, No, No, None\n"
DRIVER = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 30 10:00:00 UTC 2025\n"
XID_LOG = read_real("dmesg/sxid-20034-xid-79-nvswitch-gpud-readme.txt")
BOOT = "8f2c-boot-1"


def signals(rows: str = HEALTHY, log: str | None = "", boot: str = BOOT, driver: str | None = DRIVER) -> Signals:
    readings = parse_readings(Output(FIELDS + "\n" + rows), 10)
    return Signals(readings, None, log, "dmesg", boot, driver, {})


def by_check(findings, check: str):
    return [f for f in findings if f.check == check]


def test_a_healthy_node_passes():
    findings = judge(signals())
    assert overall(findings) == PASS and reason(findings) is None
    assert {f.check for f in findings} >= {"driver", "recovery_action", "ecc", "persistence", "xid"}


def test_an_xid_79_fails_with_its_action_and_gpuconf_reason():
    findings = judge(signals(log=XID_LOG))
    assert overall(findings) == CRITICAL
    xid = by_check(findings, "xid")[0]
    assert xid.verdict == CRITICAL and "Xid 79" in xid.message and xid.action == "reboot_node"
    assert by_check(findings, "sxid")[0].verdict == CRITICAL
    why = reason(findings)
    failing = [f for f in findings if f.verdict == CRITICAL]
    assert why.startswith("gpuconf: gate: GPU 0 (0000:91:00.0): Xid 79") and why.endswith(f"(+{len(failing) - 1} more)")
    assert len(why) <= REASON_MAX


def test_a_new_xid_line_adds_its_finding():
    newer = XID_LOG + "[6781800.000001] NVRM: Xid (PCI:0000:91:00): 48, pid=1234, name=python, " \
                      "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at " \
                      "partition 0, subpartition 0.\n"
    later = judge(signals(log=newer))
    assert any("Xid 48" in f.message for f in by_check(later, "xid"))
    assert overall(later) == CRITICAL


def test_pending_recovery_and_retired_pages_fail_persistence_off_only_warns():
    reset = "0, 00000000:91:00.0, NVIDIA H100 80GB HBM3, Enabled, No, No, Reset\n"
    findings = judge(signals(rows=reset))
    assert by_check(findings, "recovery_action")[0].verdict == CRITICAL
    assert by_check(findings, "recovery_action")[0].action == "reset_gpu"
    pending = "0, 00000000:91:00.0, NVIDIA H100 80GB HBM3, Enabled, Yes, No, None\n"
    findings = judge(signals(rows=pending))
    assert by_check(findings, "ecc")[0].verdict == CRITICAL and by_check(findings, "ecc")[0].action == "reset_gpu"
    off = "0, 00000000:91:00.0, NVIDIA H100 80GB HBM3, Disabled, No, No, None\n"
    findings = judge(signals(rows=off))
    assert overall(findings) == WARNING and reason(findings) is None


def test_an_info_xid_is_info_and_does_not_fail():
    line = "[ 5.000000] NVRM: Xid (PCI:0000:91:00): 44, pid=2222, name=python, Ch 00000008\n"
    findings = judge(signals(log=line))
    assert by_check(findings, "xid")[0].verdict == INFO and overall(findings) == INFO


def test_driver_missing_pinned_elsewhere_or_nvidia_smi_hung():
    findings = judge(signals(driver=None))
    assert by_check(findings, "driver")[0].verdict == CRITICAL
    findings = judge(signals(), pinned="570.195.03")
    assert "pinned 570.195.03" in by_check(findings, "driver")[0].message
    hung = Signals("driver_unresponsive: nvidia-smi did not answer within 10 s", None, "", "dmesg", BOOT, DRIVER, {})
    findings = judge(hung)
    assert by_check(findings, "nvidia_smi")[0].verdict == CRITICAL


def test_an_unreadable_kernel_log_is_unknown():
    blind = Signals(parse_readings(Output(FIELDS + "\n" + HEALTHY), 10), None, None, "none", BOOT, DRIVER, {},
                    "dmesg: read kernel buffer failed: Operation not permitted")
    findings = judge(blind)
    assert by_check(findings, "kernel_log")[0].verdict == UNKNOWN and overall(findings) == UNKNOWN
    assert reason(findings).startswith("gpuconf: gate: cannot read this boot's kernel log")
