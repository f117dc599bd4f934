"""NVSwitch SXid lines: parsed from a real capture (an NVSwitch box where a GPU fell off the
bus and three switches logged SXid 20034), grouped per switch and code, and judged by the
Fabric Manager guide's table: a log with only a fatal SXid no longer passes."""
from __future__ import annotations

import pytest

from gpuconf.facts.kernel import parse_sxid_events, summarise_sxid_events, sxid_catalog, sxid_entry
from gpuconf.facts.xid import ACTIONS
from gpuconf.tasks.health.kernel_log import XidParams, judge_xids
from tests.real import read_real as read

CAPTURE = "dmesg/sxid-20034-xid-79-nvswitch-gpud-readme.txt"
CASES = [CAPTURE]


def test_the_real_capture_gives_each_line_its_switch_code_and_verdict():
    events = parse_sxid_events(read(CAPTURE))
    assert len(events) == 8 and {e.code for e in events} == {20034}
    first = events[0]
    assert (first.switch, first.pci_address, first.fatal, first.message) == \
        (1, "0000:06:00.0", True, "Link 48 LTSSM Fault Up")
    assert first.log.monotonic_s == 6781753.400584
    details = [e for e in events if e.fatal is None]   # the event's Severity/Data lines say no verdict
    assert [e.message.split()[0] for e in details] == ["Severity", "Data", "Severity", "Severity"]
    assert not [e for e in events if e.fatal is False]


def test_events_group_per_switch_and_code_counting_the_lines_with_a_verdict():
    summaries = summarise_sxid_events(parse_sxid_events(read(CAPTURE)))
    assert [(s.switch, s.pci_address, s.occurrences, s.fatal) for s in summaries] == [
        (1, "0000:06:00.0", 1, True), (0, "0000:05:00.0", 2, True), (2, "0000:07:00.0", 1, True)]
    assert summaries[1].first.message == "Link 63 LTSSM Fault Up"
    assert {(s.severity, s.action) for s in summaries} == {("fail", "reboot_node")}


def test_the_table_is_the_guides_with_its_source_on_every_row():
    catalog = sxid_catalog()
    assert len(catalog) >= 90
    assert all(row.source and row.action in ACTIONS and row.severity in ("fail", "warn", "info")
               for row in catalog.values())
    assert (catalog[20034].name, catalog[20034].category) == ("LTSSM Fault Up", "fatal")
    assert catalog[12020].category == "always_fatal" and "Restart the host" in catalog[12020].guide_recovery
    assert (catalog[11012].severity, catalog[11012].action) == ("info", "none")      # the switch corrected it
    assert catalog[19084].action == "drain_and_reset"        # "Reset all GPUs and all NVSwitches"
    assert all("Fabric Manager user guide" in row.source for code, row in catalog.items() if code != 20009)
    assert not sxid_entry(29999).known


def judge(text: str):
    return [f for f in judge_xids(text, XidParams(), {}, []) if f.probe == "sxid"]


def line(code: int, verdict: str, rest: str = "Link 3 error", switch: int = 3) -> str:
    """A synthetic sample in the capture's format (not a capture)."""
    return f"[ 1108.858286] nvidia-nvswitch{switch}: SXid (PCI:0000:c3:00.0): {code}, {verdict}, {rest}\n"


def test_a_log_with_only_a_fatal_sxid_fails_with_the_guides_action():
    text = "\n".join(read(CAPTURE).splitlines()[5:6]) + "\n"   # the capture's first SXid line alone
    assert "Xid (" not in text.replace("SXid (", "")
    every = judge_xids(text, XidParams(), {}, [])
    assert [f.severity for f in every] == ["failure"]
    (finding,) = judge(text)
    assert (finding.bus_id, finding.action, finding.value) == ("0000:06:00.0", "reboot_node", 1)
    assert "NVSwitch 1 (0000:06:00.0): SXid 20034 (LTSSM Fault Up" in finding.message and "Fatal" in finding.message


@pytest.mark.parametrize(("text", "severity", "action"), [
    (line(12020, "Fatal"), "failure", "reboot_node"),                    # always fatal
    (line(24007, "Non-fatal", "Link 28 sourcetrack timeout error"), "warning", None),   # potentially fatal, not now
    (line(11012, "Non-fatal", "Link 5 single bit ECC"), "ok", None),    # corrected by the switch
    (line(19084, "Non-fatal"), "warning", "drain_and_reset"),
    (line(29999, "Fatal"), "failure", "reboot_node"),                     # not in the table, but Fatal
    (line(29999, "Non-fatal"), "warning", "contact_support"),
])
def test_the_lines_verdict_and_the_table_decide_together(text, severity, action):
    (finding,) = judge(text)
    assert (finding.severity, finding.action) == (severity, action)


def test_a_last_line_cut_inside_its_verdict_is_not_read():
    whole = line(20034, "Fatal")
    assert parse_sxid_events(whole.rstrip("\n"))[0].fatal is True
    for cut in ("Fat", "Non-fat", ""):
        text = whole[: whole.index("Fatal")] + cut
        assert parse_sxid_events(text) == (), cut
    assert [e.code for e in parse_sxid_events(whole + whole[:60])] == [20034]
