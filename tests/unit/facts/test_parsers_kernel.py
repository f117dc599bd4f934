"""Kernel parsers: log line splitting in every real format, Xid events and their
classification, nouveau evidence, lockups, /proc/modules and taint decoding."""
from __future__ import annotations

import pytest

from gpuconf.facts.kernel import (
    CONTINUATION,
    DMESG,
    DMESG_CTIME,
    DMESG_ISO,
    HUNG_TASK,
    JOURNAL_ISO,
    KMSG,
    NVIDIA_IOCTL,
    SOFT_LOCKUP,
    decode_taint,
    find_lockups,
    find_lost_gpus,
    find_nouveau,
    parse_proc_modules,
    parse_xid_events,
    split_kernel_log,
    summarise_xid_events,
    xid_catalog,
    xid_entry,
)
from gpuconf.facts.xid import ACTIONS
from tests.real import read_real as read

K = "dmesg/"
# file -> (records, format of the first record, first message start, Xid (code, count) pairs,
#          nouveau present)
LOGS = {
    K + "journalctl-k-short-iso-gpud.txt":
        (47, JOURNAL_ISO, "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready", {}, False),
    K + "kmsg-raw-dev-kmsg-nvswitch-gpud.txt":
        (47, KMSG, "nvidia-nvswitch2: open (major=510)", {}, False),
    K + "nouveau-legacy-bracket-format-GM204-bbswitch-TRUNCATED-bumblebee-684.txt":
        (15, DMESG, "bbswitch: enabling discrete graphics", {}, True),
    K + "nouveau-legacy-vbios-pfb-clk-lines-TRUNCATED-bumblebee-628.txt":
        (17, DMESG, "nouveau  [   VBIOS][0000:01:00.0] BIT signature found", {}, True),
    K + "nvrm-probe-not-called-nouveau-conflict-mattshma-bigdata-133.txt":
        (6, DMESG, "NVRM: No NVIDIA graphics adapter probed!", {}, True),  # 11 lines, 2 records of 3 and 4
    K + "xid-119-gsp-rpc-timeout-h100-dmesg-T-gpud.txt":
        (43, DMESG_CTIME, "NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d", {119: 5}, False),
    K + "xid-13-43-flood-decode-iso-gpud.txt":
        (636, DMESG_ISO, "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>'", {13: 629, 43: 7}, False),
    K + "xid-32-31-legacy-format-no-pid-bumblebee-677.txt":
        (3, DMESG, "NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000", {32: 2, 31: 1}, False),
    K + "xid-48-63-94-dbe-rowremap-contained-iso-timestamps-gpud.txt":
        (41, DMESG_ISO, "nvidia-peermem nv_get_p2p_free_callback:127 ERROR", {48: 1, 63: 1, 94: 9}, False),
}
CASES = sorted(LOGS)


@pytest.mark.parametrize("rel", sorted(LOGS))
def test_kernel_log_formats_xids_and_nouveau(rel: str) -> None:
    records, first_format, first_message, xids, nouveau = LOGS[rel]
    text = read(rel)
    lines = split_kernel_log(text)
    assert len(lines) == records
    assert lines[0].format == first_format
    assert lines[0].message.startswith(first_message)
    counts: dict[int, int] = {}
    for event in parse_xid_events(text):
        counts[event.code] = counts.get(event.code, 0) + 1
    assert counts == xids
    assert find_nouveau(text).present is nouveau
    assert find_lockups(text) == ()  # none of the captures shows a lockup


def test_xid_fields_modern_format() -> None:
    events = parse_xid_events(read(K + "xid-119-gsp-rpc-timeout-h100-dmesg-T-gpud.txt"))
    first = events[0]
    assert (first.code, first.severity, first.action, first.pci_address, first.bus_id) == (
        119, "fail", "reset_gpu", "0000:9b:00.0", "0000:9b:00")
    assert (first.pid, first.process_name) == (2024380, "nvidia-smi")
    assert first.message.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert first.log.timestamp == "Sun Feb 23 16:24:18 2025"
    assert [e.process_name for e in events] == ["nvidia-smi", "nvidia-smi", "nvidia-smi", "cache_mgr_main", "gpud"]


def test_xid_fields_unknown_pid_decode_and_legacy() -> None:
    flood = parse_xid_events(read(K + "xid-13-43-flood-decode-iso-gpud.txt"))
    assert (flood[0].pid, flood[0].process_name, flood[0].severity, flood[0].action) == (None, None, "warn",
                                                                                       "restart_app")
    assert (flood[0].log.facility, flood[0].log.level) == ("kern", "warn")
    assert (flood[-1].code, flood[-1].pid, flood[-1].process_name) == (43, 2924364, "pt_main_thread")
    summary = summarise_xid_events(flood)
    assert [(s.pci_address, s.code, s.count) for s in summary] == [("0000:38:00.0", 13, 629), ("0000:38:00.0", 43, 7)]
    legacy = parse_xid_events(read(K + "xid-32-31-legacy-format-no-pid-bumblebee-677.txt"))
    assert [(e.code, e.pid, e.message) for e in legacy] == [
        (32, None, "Channel ID 00000000 intr 00004000"), (32, None, "Channel ID 00000000 intr 00004000"),
        (31, None, "Ch 00000003, engmask 00000101, intr 10000000")]
    assert legacy[0].log.monotonic_s == 24128.828315
    ecc = parse_xid_events(read(K + "xid-48-63-94-dbe-rowremap-contained-iso-timestamps-gpud.txt"))
    assert [(e.code, e.severity) for e in ecc][:3] == [(48, "fail"), (63, "warn"), (94, "warn")]
    assert ecc[1].message.startswith("Row Remapper: New row (0x00000012bac1c3e0) marked for remapping")
    assert (ecc[3].pid, ecc[3].process_name) == (1248209, "python3.10")


def test_xid_classification_table() -> None:
    assert (xid_entry(79).severity, xid_entry(79).action, xid_entry(79).mnemonic) == (
        "fail", "reboot_node", "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS")
    assert {xid_entry(c).severity for c in (48, 64, 95, 119, 120, 136, 140, 143, 155, 156, 158)} == {"fail"}
    assert {xid_entry(c).action for c in (144, 145, 146, 147, 148, 149, 150)} == {"drain"}   # NVLink5: drain
    assert {xid_entry(c).severity for c in (13, 31, 43, 45, 63, 94)} == {"warn"}
    assert xid_entry(154).severity == "info"      # the recovery action in its line decides
    unknown = xid_entry(999)
    assert (unknown.known, unknown.severity, unknown.action) == (False, "warn", "contact_support")
    fallen = parse_xid_events("[ 5.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n")
    assert (fallen[0].severity, fallen[0].pid, fallen[0].message) == ("fail", 1234, "GPU has fallen off the bus.")


def test_every_catalog_row_has_a_severity_an_action_and_a_source() -> None:
    catalog = xid_catalog()
    assert sorted(catalog) == list(range(1, 173))
    for entry in catalog.values():
        assert entry.severity in ("fail", "warn", "info") and entry.action in ACTIONS, entry
        assert "NVSentinel@6f8b0fc" in entry.source or "gpud@73e270e" in entry.source, entry


@pytest.mark.parametrize("line, action, severity", [
    ("154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "reboot_node", "fail"),
    ("154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", "reset_gpu", "fail"),
    ("154, GPU recovery action changed from 0x4 (Drain and Reset) to 0x1 (GPU Reset Required)", "reset_gpu", "fail"),
    ("154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)", "drain_and_reset", "fail"),
    ("154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)", "drain_p2p", "fail"),
    ("154, GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)", "reboot_node", "fail"),
    ("154, GPU recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)", "none", "info"),
    ("154, GPU recovery action changed from 0x0 (None) to 0x9 (Something New)", "drain", "fail"),
    ("13, pid=1, name=x, Graphics Exception. GPU Reset Required", "reset_gpu", "fail"),
])
def test_the_recovery_action_a_line_names_decides_over_the_catalog(line, action, severity) -> None:
    (event,) = parse_xid_events(f"[ 9.1] NVRM: Xid (PCI:0009:01:00): {line}\n")
    assert (event.action, event.severity, event.pci_address) == (action, severity, "0009:01:00.0")


def test_lost_gpu_lines_without_an_xid() -> None:
    text = ("[ 7.0] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.\n"
            "[ 7.1] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
            "[ 7.2] NVRM: GPU at PCI:0000:1a:00: GPU-5b0c1e2f lost from the bus [NV_ERR_GPU_IS_LOST]\n"
            "[ 7.3] nouveau 0000:02:00.0: fallen off the bus? (nouveau: not read)\n")
    lost = find_lost_gpus(text)
    assert [(g.pci_address, g.action) for g in lost] == [("0000:91:00.0", "reboot_node"), ("0000:1a:00.0", "reboot_node")]


def test_a_last_line_cut_short_is_read_only_when_whole() -> None:
    line = "[ 9.1] NVRM: Xid (PCI:0000:07:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    assert parse_xid_events(line)[0].action == "reboot_node"                  # no newline, but whole
    assert parse_xid_events(line[: line.index("Node")]) == ()                 # the new action is cut: not read
    assert parse_xid_events("[ 9.1] NVRM: Xid (PCI:0000:07:00): 11") == ()    # 119 cut to 11
    assert parse_xid_events("[ 9.1] NVRM: Xid (PCI:0000:07:00): 11\n")[0].code == 11


def test_xid_in_journal_and_kmsg_formats() -> None:
    journal = parse_xid_events(
        "2025-01-17T17:10:43+0000 node1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n")
    kmsg = parse_xid_events("4,1234,5678000,-;NVRM: Xid (PCI:0000:3b:00): 74, pid=99, name=nccl, NVLink: fatal error\n")
    assert [(e.code, e.log.format, e.log.host) for e in journal] == [(79, JOURNAL_ISO, "node1")]
    assert [(e.code, e.action, e.log.monotonic_s, e.log.level) for e in kmsg] == [(74, "drain", 5.678, "warn")]


def test_kernel_log_record_details() -> None:
    kmsg = split_kernel_log(read(K + "kmsg-raw-dev-kmsg-nvswitch-gpud.txt"))
    assert (kmsg[0].sequence, kmsg[0].monotonic_s, kmsg[0].level) == (3964, 206.764307, "info")
    journal = split_kernel_log(read(K + "journalctl-k-short-iso-gpud.txt"))
    assert (journal[0].source, journal[0].host) == ("kernel", "exp03-ft-896z-1-lan.exp03-ft-896z-job-svc")
    assert journal[0].timestamp == "2025-01-17T17:10:43+0000"
    probe = split_kernel_log(read(K + "nvrm-probe-not-called-nouveau-conflict-mattshma-bigdata-133.txt"))
    # the driver's lines without a timestamp continue the record before them
    assert [line.format for line in probe].count(CONTINUATION) == 0
    assert (probe[4].line_number, probe[4].last_line) == (5, 7)
    assert probe[4].message == ("NVRM: This can occur when a driver such as: NVRM: nouveau, rivafb, nvidiafb or rivatv "
                                "NVRM: was loaded and obtained ownership of the NVIDIA device(s).")


def test_nouveau_evidence_details() -> None:
    gm204 = find_nouveau(read(K + "nouveau-legacy-bracket-format-GM204-bbswitch-TRUNCATED-bumblebee-684.txt"))
    assert (len(gm204.lines), gm204.chipset, gm204.nvidia_probe_conflict) == (6, "GM204 (NV124)", False)
    conflict = find_nouveau(read(K + "nvrm-probe-not-called-nouveau-conflict-mattshma-bigdata-133.txt"))
    assert (conflict.lines, conflict.nvidia_probe_conflict, conflict.devices_not_probed) == ((), True, 3)
    modern = find_nouveau("[    4.2] nouveau 0000:01:00.0: NVIDIA GA102 (172000a1)\n")
    assert modern.present and modern.chipset == "GA102"
    assert not find_nouveau(read(K + "xid-119-gsp-rpc-timeout-h100-dmesg-T-gpud.txt")).present


def test_lockups() -> None:
    text = (
        "[ 812.1] watchdog: BUG: soft lockup - CPU#12 stuck for 22s! [nvidia-smi:4242]\n"
        "[ 812.2]  nvidia_unlocked_ioctl+0x5a/0x90 [nvidia]\n"
        "[ 960.0] INFO: task nvidia-smi:4242 blocked for more than 120 seconds.\n"
    )
    found = find_lockups(text)
    assert [(f.kind, f.task) for f in found] == [(SOFT_LOCKUP, "nvidia-smi:4242"), (NVIDIA_IOCTL, None),
                                                 (HUNG_TASK, "nvidia-smi:4242")]


def test_proc_modules() -> None:
    modules = parse_proc_modules(
        "nvidia_uvm 1982464 0 - Live 0x0000000000000000 (POE)\n"
        "nvidia_drm 118784 2 - Live 0xffffffffc1a2c000 (POE)\n"
        "nvidia 62758912 62 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n"
        "mlx5_ib 450560 0 - Loading 0x0000000000000000\n"
        "ib_core 462848 8 rdma_ucm,ib_uverbs,mlx5_ib, Live 0x0000000000000000\n"
        "not a module line\n")
    assert "nouveau" not in modules.names and "nvidia" in modules.names
    nvidia = modules.get("nvidia")
    assert nvidia is not None
    assert (nvidia.size, nvidia.refcount, nvidia.used_by, nvidia.state, nvidia.taint) == (
        62758912, 62, ("nvidia_uvm", "nvidia_modeset"), "Live", "POE")
    assert modules.get("mlx5-ib") is not None and modules.get("mlx5-ib").state == "Loading"  # type: ignore[union-attr]
    assert modules.problems == ("not a module line",)


def test_taint() -> None:
    taint = decode_taint("12289\n")  # P + O + E: the proprietary NVIDIA driver
    assert taint is not None and (taint.letters, taint.has("P"), taint.has("D")) == ("POE", True, False)
    assert decode_taint("0").flags == ()  # type: ignore[union-attr]
    lockup = decode_taint(str((1 << 14) | (1 << 9)))
    assert lockup is not None and lockup.letters == "WL"
    assert decode_taint("n/a") is None
