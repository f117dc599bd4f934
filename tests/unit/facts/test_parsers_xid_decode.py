"""NVIDIA's per-line decode of the NVLink5 Xids 144-150 (gpuconf/facts/xid_decode.py): every real 144-150
line the project holds gets the verdict of the catalog's "XID 144-150 Decode" sheet, a line the sheet does not
cover keeps the code's action and says so, and an Xid 154 that follows decides over the row."""
from __future__ import annotations

import pytest

from gpuconf.facts.xid import parse_xid_events, summarise_xid_events
from gpuconf.facts.xid_decode import DECODED, decode_table, parse_link_event
from gpuconf.tasks.health.kernel_log import XidParams, judge_xids
from tests.real import REAL, read_real

CASES = ("dmesg/xid-144-150-nvlink5-gpud.txt",)

# Each real line (from its code to its errorStatus) and the sheet's "Resolution Bucket (Data Center Recovery
# Action)" for it, read off the sheet by hand: the row of its Xid whose intrInfo pattern (V1: drivers before R575)
# the first word fits and whose errorStatus is the second word.
SHEET = {
    # 149 NETIR_BER_EVENT, V1 ------000000----------1000100110, errorStatus 0x1: Non-fatal, IGNORE
    "149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 03 (0x00086226 0x00000001": "IGNORE",
    "149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 01 (0x00082226 0x00000001": "IGNORE",
    # 145 RLW_RXPIPE, V1 ------000000----------0011000010, errorStatus 0x8: Non-fatal, IGNORE
    "145, pid=876767, name=ray::WorkerDict, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008": "IGNORE",
    "145, pid=876766, name=ray::WorkerDict, RLW_RXPIPE Nonfatal XC0 i0 Link 12 (0x040980c2 0x00000008": "IGNORE",
    # 145 RLW_SRC_TRACK, V1 ------000000----------0011100010, errorStatus 0x8: Non-fatal, XID_154_EVAL
    "145, RLW_SRC_TRACK Nonfatal XC1 i0 Link 12 (0x040988e2 0x00000008": "XID_154_EVAL",
    "145, pid=11436, name=cache_mgr_main, RLW_SRC_TRACK Nonfatal XC1 i0 Link 03 (0x040868e2 0x00000008": "XID_154_EVAL",
    "145, pid=922932, name=acctg, RLW_SRC_TRACK Nonfatal XC1 i0 Link 03 (0x040868e2 0x00000008": "XID_154_EVAL",
    "145, RLW_SRC_TRACK Nonfatal XC1 i0 Link 16 (0x040a08e2 0x00000008": "XID_154_EVAL",
    # 149 NETIR/NETIR_INT, V1 ------000000----------0000000110, errorStatus 0x0: Link Fatal, RESET_GPU
    "149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000": "RESET_GPU",
    # 149 NETIR_LINK_EVT/NETIR_LINK_DOWN, V1 ------000100----------0111000110, errorStatus 0x0: Link Fatal, RESET_GPU
    "149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000": "RESET_GPU",
    "149, NETIR_LINK_EVT Fatal XC0 i0 Link 09 (0x004525c6 0x00000000": "RESET_GPU",
}
# what gpuconf does with each bucket (docs/health.md, the verdict table): severity, action
BUCKETS = {"IGNORE": ("ok", None), "RESET_GPU": ("failure", "reset_gpu"), "XID_154_EVAL": ("warning", None)}
BUS = "0000:3b:00"


def nvlink5_lines() -> list[tuple[str, str]]:
    """(capture, line) of every 144-150 Xid line in the project's real captures."""
    found = []
    for path in sorted(p for p in REAL.rglob("*") if p.is_file() and p.name != "SOURCES.md"):
        text = path.read_text(encoding="utf-8", errors="replace")
        for line in text.splitlines():
            events = parse_xid_events(line + "\n")
            if events and events[0].code in DECODED:
                found.append((path.relative_to(REAL).as_posix(), line))
    return found


def test_every_real_nvlink5_line_gets_the_sheets_verdict():
    lines = nvlink5_lines()
    assert len(lines) >= 19 and {rel for rel, _ in lines} >= set(CASES)
    for rel, line in lines:
        keys = [key for key in SHEET if key in line]
        assert len(keys) == 1, f"{rel}: a real 144-150 line the test does not list: {line}"
        bucket = SHEET[keys[0]]
        (finding,) = [f for f in judge_xids(line + "\n", XidParams(), {}, []) if f.code]
        assert (finding.severity, finding.action) == BUCKETS[bucket], line
        assert finding.rule is not None and finding.rule.endswith(f"-> {bucket}"), (line, finding.rule)


def test_the_capture_reads_per_gpu_and_row():
    summaries = summarise_xid_events(parse_xid_events(read_real(CASES[0])))
    rows = {(s.pci_address, s.code, s.last.decode.row.unit if s.last.decode and s.last.decode.row else None): s.count
            for s in summaries}
    assert rows[("0018:01:00.0", 149, "NETIR_LINK_EVT/NETIR_LINK_DOWN")] == 3
    assert rows[("0008:01:00.0", 145, "RLW_SRC_TRACK")] == 3 and rows[("0018:01:00.0", 145, "RLW_RXPIPE")] == 1
    event = parse_link_event("RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000)")
    assert event is not None and (event.unit, event.fatal, event.link, event.intrinfo, event.error_status) == (
        "RLW_RXPIPE", False, 13, 0x0409A0C2, 8)


def one(lines: str) -> list:
    return [f for f in judge_xids(lines, XidParams(), {}, []) if f.code]


@pytest.mark.parametrize(("text", "why"), [
    ("149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000009 0x0 0x0)", "no row of the decode has"),
    ("144, SAW_MVB Fatal XC0 i0 Link 00 (0x00000001 0x00000001 0x0 0x0)", "row 1 says Non-fatal, the line says Fatal"),
    ("149, NVLink: fatal error detected on link 3", "the line carries no unit"),
])
def test_a_line_the_decode_does_not_cover_keeps_the_codes_action_and_says_so(text, why):
    (finding,) = one(f"[ 10.000000] NVRM: Xid (PCI:{BUS}): {text}\n")
    assert (finding.severity, finding.action) == ("failure", "drain")  # xid_catalog.csv's row for the code
    assert finding.rule is not None and finding.rule.startswith(f"xid_catalog.csv: {finding.code.number} (")
    assert why in finding.rule and "the code's action" in finding.rule
    assert "not in the 144-150 decode" in finding.message


def test_an_xid_154_that_follows_decides_over_the_row():
    ignored = f"[ 10.0] NVRM: Xid (PCI:{BUS}): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x0)\n"
    after = f"[ 11.0] NVRM: Xid (PCI:{BUS}): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)\n"
    other = "[ 12.0] NVRM: Xid (PCI:0000:5e:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot)\n"
    before, xid154 = one(ignored + after)
    assert (before.severity, before.action) == ("failure", "reset_gpu") and before.rule.startswith("the Xid 154")
    assert xid154.code.number == 154 and xid154.action == "reset_gpu"
    (alone, _other) = one(ignored + other)  # another GPU's Xid 154 decides nothing here
    assert (alone.severity, alone.action) == ("ok", None)
    (first, _) = one(after + ignored)  # one logged before the line does not follow it
    assert first.code.number == 154


def test_lines_of_one_code_and_gpu_that_the_decode_tells_apart_are_two_findings():
    ignored = f"[ 10.0] NVRM: Xid (PCI:{BUS}): 149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 03 (0x00086226 0x00000001 0x0)\n"
    fatal = f"[ 11.0] NVRM: Xid (PCI:{BUS}): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x0)\n"
    findings = one(ignored + fatal + ignored)
    assert sorted((f.severity, f.action, f.count) for f in findings) == [("failure", "reset_gpu", 1), ("ok", None, 2)]


def test_a_cut_last_line_is_read_only_when_its_errorstatus_is_whole():
    line = f"[ 10.0] NVRM: Xid (PCI:{BUS}): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x0"
    assert parse_xid_events(line[:line.index("0x00000000")]) == ()  # cut before its errorStatus
    assert parse_xid_events(line[:line.index("0x00000000") + 4]) == ()  # errorStatus cut short
    (event,) = parse_xid_events(line)
    assert event.decode is not None and event.decode.row is not None and event.action == "reset_gpu"


def test_the_table_is_the_sheet_read_whole():
    table = decode_table()
    assert len(table) == 94 and {r.xid for r in table} == set(DECODED)
    assert {r.resolution for r in table} == {"IGNORE", "RESET_GPU", "XID_154_EVAL"}
    for row in table:
        assert len(row.intrinfo_v1) == len(row.intrinfo_v2) == 32 and set(row.intrinfo_v1) <= {"0", "1", "-"}
        assert (row.severity, row.action) == {"IGNORE": ("info", "none"), "RESET_GPU": ("fail", "reset_gpu"),
                                              "XID_154_EVAL": ("warn", "none")}[row.resolution]
        assert "XID 144-150 Decode" in row.source and "leptonai/gpud@4a8de33" in row.source


def test_remediate_check_shows_the_per_line_decision():
    import time

    from gpuconf.remediate import plan
    from gpuconf.remediate.breaker import Breaker
    from gpuconf.remediate.decision import decide_action
    from gpuconf.remediate.lemon import LemonRule
    from gpuconf.remediate.preview import preview
    from gpuconf.scheduler.interface import Node

    ignored = f"[ 10.0] NVRM: Xid (PCI:{BUS}): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x0)\n"
    fatal = f"[ 11.0] NVRM: Xid (PCI:{BUS}): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x0)\n"
    verdicts = {"n1": plan.Verdict("n1", True),
                "n2": plan.Verdict("n2", False, "gpuconf: failed: Xid 149", cause="fault",
                                   decision=decide_action(one(ignored + fatal)))}
    assert decide_action(one(ignored)) is None  # an ignored line asks for nothing
    lines = preview({"n1": "n1", "n2": "n2"}, verdicts, {n: Node(n, "IDLE") for n in ("n1", "n2")}, [], [], 1,
                    LemonRule(), Breaker(), time.time())
    assert lines[0] == "n1: in sync: nothing"
    assert lines[1].startswith("n2: reset_gpu, decided by xid_nvlink5_decode.csv row 71: Xid 149 "
                               "NETIR_LINK_EVT/NETIR_LINK_DOWN errorStatus 0x00000000 Link Fatal -> RESET_GPU: "
                               "GPU at 0000:3b:00.0: Xid 149 (NVLINK_NETIR_ERROR, NETIR_LINK_EVT Fatal, decoded: "
                               "RESET_GPU (Link Fatal)) x1 this boot"), lines[1]
    assert "steps: drain and wait; collect; stop the units holding the GPUs" in lines[1]
