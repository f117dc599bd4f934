"""A finding carries what a decision needs as fields (its code, GPU, PCI address, count and the table row
that decided it): the health judges fill them, and remediate's decision, its hold record and the gate read
them, never the message (issue 37)."""
from __future__ import annotations

from gpuconf.gate.judge import INFO, Signals, judge
from gpuconf.remediate.decision import decide_action
from gpuconf.remediate.hold import hold_record
from gpuconf.results import FaultCode, Finding
from gpuconf.tasks.health.kernel_log import XidParams, judge_xids
from tests.real import read_real

BUS = "0000:3b:00.0"
XID_LOG = read_real("dmesg/sxid-20034-xid-79-nvswitch-gpud-readme.txt")


def test_the_judges_fill_code_gpu_address_count_and_rule():
    findings = judge_xids(XID_LOG, XidParams.model_validate({}), {"0000:91:00.0": 0}, [])
    xid = next(f for f in findings if f.probe == "xid")
    assert (xid.code, xid.gpu, xid.bus_id, xid.count, xid.rule) == (
        FaultCode("Xid", 79), 0, "0000:91:00.0", 1, "xid_catalog.csv: 79")
    sxids = [f for f in findings if f.probe == "sxid"]
    assert sxids and all(f.code is not None and f.code.family == "SXid" and f.count and f.bus_id for f in sxids)
    assert {f.rule for f in sxids} == {f"sxid_catalog.csv: {f.code.number}" for f in sxids if f.code}
    none = judge_xids("", XidParams.model_validate({}), {}, [])
    assert len(none) == 1 and none[0].count == 0 and none[0].code is None


def test_the_decision_reads_the_fields_not_the_message():
    # the message names another code and count: a decision that parsed it back would say Xid 13 and x7
    finding = Finding("xid", "failure", "GPU 0: Xid 13 (words) x7 this boot", gpu=0, bus_id=BUS,
                      action="reboot_node", code=FaultCode("Xid", 79), count=3, rule="xid_catalog.csv: 79")
    decision = decide_action([finding])
    assert (decision.code, decision.row, decision.count, decision.bus_id) == ("Xid 79", "xid_catalog.csv: 79", 3, BUS)
    hold = hold_record(1, "n1", "n1", decision, "reason", {BUS: "1650924060039"}, now=10.0)
    assert (hold.code, hold.count, hold.serial, hold.pci) == ("Xid 79", 3, "1650924060039", BUS)


def test_a_finding_without_a_code_is_decided_by_its_probe_and_counts_once_in_a_hold():
    finding = Finding("hardware", "failure", "GPU 1 (0000:5e:00.0) Xid 79 x9 this boot", gpu=1,
                      bus_id="0000:5e:00.0", action="contact_support")
    decision = decide_action([finding])
    assert (decision.code, decision.row, decision.count) == ("", "health probe hardware", None)
    assert hold_record(1, "n1", "n1", decision, "reason", {}, now=1.0).count == 1


def test_the_gate_passes_the_fields_on():
    findings = judge(Signals("nvidia-smi: not read", None, XID_LOG, "dmesg", "boot", None, {}))
    xid = next(f for f in findings if f.check == "xid")
    assert (xid.code, xid.count, xid.rule) == ("Xid 79", 1, "xid_catalog.csv: 79")
    assert xid.as_dict()["code"] == "Xid 79"
    info = [f for f in findings if f.verdict == INFO]
    assert all(f.count for f in info)
