"""Issue 35, MEDIUM 6: restart_app with the shipped catalog. NVIDIA's catalog calls Xid 13, 31, 45 and
94 warnings (the application's fault; the GPU needs no action), so they never failed a check and
four Xid 94s said "in sync". remediate reports them (the node stays in service) and escalates a repeat
within --restart-app-window, from the shipped catalog's own judgement of real-looking lines."""
from __future__ import annotations

import pytest

from gpuconf.remediate.command import verdict
from gpuconf.remediate.decision import APP
from gpuconf.results import HostResult, Status, TaskResult
from gpuconf.tasks.health.kernel_log import XidParams, judge_xids

LINE = "[ {t}.000000] NVRM: Xid (PCI:0000:3b:00): {code}, pid=4242, name=python, Ch 00000008\n"


def checked(code: int, lines: int = 1) -> HostResult:
    text = "".join(LINE.format(t=100 + i, code=code) for i in range(lines))
    findings = judge_xids(text, XidParams.model_validate({}), {"0000:3b:00.0": 0}, ["0000:3b:00.0"])
    status = Status.FAILED if any(f.severity == "failure" for f in findings) else Status.OK
    return HostResult("n1", [TaskResult("n1", "health", "No Xid errors", status, findings=findings)])


@pytest.mark.parametrize("code", [13, 31, 45, 94])
def test_a_restart_app_xid_of_the_shipped_catalog_is_reported(code):
    host = checked(code, lines=4)
    assert not host.failed  # the catalog's warning: it never fails the check
    found = verdict(host, "n1", strict=False)
    assert not found.clean and found.decision is not None and found.decision.kind == APP, found
    assert found.decision.code == f"Xid {code}" and found.decision.count == 4


def test_another_warning_still_leaves_the_node_clean():
    warm = HostResult("n1", [TaskResult("n1", "health", "temperature", Status.OK)])
    assert verdict(warm, "n1", strict=False).clean
