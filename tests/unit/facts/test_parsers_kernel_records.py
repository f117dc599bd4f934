"""Kernel log records (gpuconf/facts/kernel_log.py): a record's continuation lines are joined to its first line
before it is judged, the node-side filters (the remote runner's and the gate's) keep whole records, and the
forms without a timestamp (`NVRM: ...`, `kernel: NVRM: ...`, a syslog line without its host) keep the NVRM word."""
from __future__ import annotations

import pytest

from gpuconf.connection.remote.reads import log_records
from gpuconf.facts.kernel import BARE, DMESG, SYSLOG, find_lost_gpus, parse_xid_events, split_kernel_log
from gpuconf.facts.kernel_log import grep_records
from gpuconf.tasks.health.kernel_log import CANDIDATES, XidParams, judge_xids
from tests.real import REAL, read_real

MULTILINE = "dmesg/nvrm-fallen-off-the-bus-multiline-record-no-xid-nvsentinel-155.txt"
BARE_LINES = "dmesg/nvrm-timestamp-less-and-kernel-prefix-nvlink-rxdetect-gpud.txt"
NO_HOST = "syslog/syslog-no-host-xid-79-154-rtx-pro-6000-find-string.txt"
CASES = (MULTILINE, BARE_LINES, NO_HOST)


def test_a_multi_line_record_is_one_record_and_its_lost_gpu_has_its_address():
    text = read_real(MULTILINE)
    records = split_kernel_log(text)
    assert [(r.format, r.line_number, r.last_line) for r in records] == [(DMESG, 1, 3), (DMESG, 4, 4), (DMESG, 5, 5)]
    (lost,) = find_lost_gpus(text)
    assert lost.pci_address == "0000:b3:00.0" and lost.message.endswith("not responding to commands.")
    (finding,) = [f for f in judge_xids(text, XidParams(), {"0000:b3:00.0": 3}, []) if f.probe == "fallen_off_bus"]
    assert (finding.severity, finding.gpu, finding.bus_id, finding.action) == ("failure", 3, "0000:b3:00.0",
                                                                             "reboot_node")


def test_the_node_side_filters_send_the_whole_record():
    text = read_real(MULTILINE)
    kept = grep_records(text, CANDIDATES)  # the gate's filter (gpuconf/gate/node.py)
    assert kept == "".join(text.splitlines(True)[:3])  # the address line travels with "fallen off the bus"
    runner = [line for group in log_records(text) if any("fallen off the bus" in line for line in group)
              for line in group]  # the remote runner's filter (records=True)
    assert "".join(runner) == kept
    assert find_lost_gpus(kept)[0].pci_address == "0000:b3:00.0"


def every_kernel_log_capture() -> list[str]:
    return sorted(p.relative_to(REAL).as_posix() for folder in ("dmesg", "syslog") for p in (REAL / folder).iterdir())


@pytest.mark.parametrize("rel", every_kernel_log_capture())
def test_the_remote_runners_records_are_the_parsers(rel):
    """The remote runner carries its own copy of the record rule (it cannot import the parsers): the two agree on
    every real kernel log the project holds."""
    text = read_real(rel)
    runner = [[line.rstrip("\n") for line in group if line.strip()] for group in log_records(text)]
    assert [group for group in runner if group] == [[raw for raw in text.splitlines()[r.line_number - 1:r.last_line]
                                                     if raw.strip()] for r in split_kernel_log(text)]


def test_lines_without_a_timestamp_keep_the_nvrm_word():
    records = split_kernel_log(read_real(BARE_LINES))
    assert [(r.format, r.source) for r in records] == [(BARE, None), (BARE, None), (BARE, "kernel")]
    assert all(r.message.startswith("NVRM: knvlink") for r in records), records
    assert records[2].level is None and records[2].facility is None


def test_a_syslog_line_without_its_host_keeps_the_nvrm_word():
    records = split_kernel_log(read_real(NO_HOST))
    assert {(r.format, r.source, r.host) for r in records} == {(SYSLOG, "kernel", None)}
    assert all(r.message.startswith("NVRM: ") for r in records)
    events = parse_xid_events(read_real(NO_HOST))
    assert [(e.code, e.pci_address, e.action) for e in events] == [
        (79, "0000:41:00.0", "reboot_node"), (154, "0000:61:00.0", "reboot_node"), (154, "0000:41:00.0", "reboot_node"),
        (154, "0000:01:00.0", "reboot_node")]


@pytest.mark.parametrize("line", [
    # open-gpu-kernel-modules issue 688's line as `journalctl -k -o cat` prints it, and with the journal's source
    "NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F) "
    "returned from rmStatus @ kernel_ce_gv100.c:106",
    "kernel: NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F) "
    "returned from rmStatus @ kernel_ce_gv100.c:106",
])
def test_a_gpu_lost_from_the_bus_without_a_timestamp_is_found(line):
    (lost,) = find_lost_gpus(line + "\n")
    assert lost.message.startswith("NVRM: nvAssertOkFailedNoLog") and lost.action == "reboot_node"


def test_dmesg_decode_prefixes_are_syslogs_own_words_only():
    (record,) = split_kernel_log("kern  :warn  : 2025-01-21T02:21:33,498559+00:00 NVRM: Xid (PCI:0000:38:00): 13, x\n")
    assert (record.facility, record.level, record.message[:5]) == ("kern", "warn", "NVRM:")
