"""The DCGM diagnostic probe on DCGM 4's JSON (`dcgmi diag -r N --json`): a pass, a failed
test named with its GPU, DCGM 3's shape, JSON cut at every point (never a pass), a hung or
missing dcgmi (unknown)."""
from __future__ import annotations

import pytest

from gpuconf.facts.common import incomplete
from gpuconf.facts.dcgm import parse_dcgmi_diag_json
from tests.unit.tasks.health.fakes import hang, pci, run_probe, shell, smi

DIAG = "exec:dcgmi\0diag\0-r\0{level}\0--json"

# DCGM 4's layout (the writer's tabs and `"key" : value`, as in fixtures/real/dcgmi's health JSON)
PASS = """{
\t"DCGM Diagnostic" :
\t{
\t\t"test_categories" :
\t\t[
\t\t\t{
\t\t\t\t"category" : "Deployment",
\t\t\t\t"tests" :
\t\t\t\t[
\t\t\t\t\t{
\t\t\t\t\t\t"name" : "software",
\t\t\t\t\t\t"results" :
\t\t\t\t\t\t[
\t\t\t\t\t\t\t{
\t\t\t\t\t\t\t\t"entity_group" : "GPU",
\t\t\t\t\t\t\t\t"entity_group_id" : 1,
\t\t\t\t\t\t\t\t"entity_id" : 0,
\t\t\t\t\t\t\t\t"status" : "Pass"
\t\t\t\t\t\t\t},
\t\t\t\t\t\t\t{
\t\t\t\t\t\t\t\t"entity_group" : "GPU",
\t\t\t\t\t\t\t\t"entity_group_id" : 1,
\t\t\t\t\t\t\t\t"entity_id" : 3,
\t\t\t\t\t\t\t\t"status" : "Pass"
\t\t\t\t\t\t\t}
\t\t\t\t\t\t],
\t\t\t\t\t\t"test_summary" :
\t\t\t\t\t\t{
\t\t\t\t\t\t\t"status" : "Pass"
\t\t\t\t\t\t}
\t\t\t\t\t}
\t\t\t\t]
\t\t\t}
\t\t]
\t},
\t"metadata" :
\t{
\t\t"DCGM Version" : "4.5.2",
\t\t"version" : "4.5.2"
\t}
}
"""
FAIL = PASS.replace('"entity_id" : 3,\n\t\t\t\t\t\t\t\t"status" : "Pass"',
                    '"entity_id" : 3,\n\t\t\t\t\t\t\t\t"status" : "Fail",\n\t\t\t\t\t\t\t\t"warnings" : [{"warning" : '
                    '"Error using CUDA API cudaGetDeviceCount"}]').replace(
    '"test_summary" : \n\t\t\t\t\t\t{\n\t\t\t\t\t\t\t"status" : "Pass"', '"test_summary" : \n\t\t\t\t\t\t{\n\t\t\t\t\t\t\t"status" : "Fail"')


def diag(text: str, rc: int = 0, level: int = 1) -> dict:
    return {DIAG.format(level=level): shell(text, rc=rc)}


def test_a_passing_level_1_diag_is_ok():
    check, _ = run_probe("health_dcgm_diag", {}, {**diag(PASS), **pci(), **smi()})
    (finding,) = check.findings
    assert finding.severity == "ok" and "1 test(s) passed on 2 GPU(s) (software), DCGM 4.5.2" in finding.message


def test_a_failed_test_fails_naming_the_test_and_the_gpu():
    check, _ = run_probe("health_dcgm_diag", {}, {**diag(FAIL, rc=226), **pci(), **smi()})
    (finding,) = check.findings
    assert (finding.severity, finding.gpu, finding.bus_id, finding.value, finding.action) == (
        "failure", 3, "0000:4e:00.0", "software", "drain")
    assert finding.message == ("GPU 3 (0000:4e:00.0): dcgmi diag -r 1 test software (Deployment): Fail: "
                               "Error using CUDA API cudaGetDeviceCount")


def test_dcgm_3_json_is_read_too():
    text = ('{"DCGM GPU Diagnostic" : {"test_categories" : [{"category" : "Integration", "tests" : [{"name" : "PCIe",'
            ' "results" : [{"gpu_id" : "0", "status" : "Skip"}, {"gpu_id" : "1", "status" : "Fail"}]}]}]}}\n')
    report = parse_dcgmi_diag_json(text)
    assert [(t.test, t.gpu, t.result) for t in report.tests] == [("PCIe", 0, "Skip"), ("PCIe", 1, "Fail")]


@pytest.mark.parametrize("text", [FAIL, PASS])
def test_json_cut_anywhere_is_never_a_pass(text):
    for point in range(1, 40):
        cut = text[: len(text.rstrip()) * point // 40]
        assert incomplete(parse_dcgmi_diag_json(cut)), point
        check, unknown = run_probe("health_dcgm_diag", {}, {**diag(cut), **pci(), **smi()})
        assert check is None and unknown.findings[-1].severity == "failure"


def test_a_hung_dcgmi_is_unknown_and_a_missing_one_says_so():
    check, unknown = run_probe("health_dcgm_diag", {"level": 2, "timeout": 5}, {**diag("", level=2),
                                                                                 DIAG.format(level=2): hang(), **pci(),
                                                                                 **smi()})
    assert check is None and unknown.findings[-1].value == "dcgmi_unresponsive"
    assert "dcgmi diag did not finish" in str(unknown)
    check, unknown = run_probe("health_dcgm_diag", {}, {**diag("", rc=127), **pci(), **smi()})
    assert check is None and "dcgmi is not installed" in str(unknown)
    check, unknown = run_probe("health_dcgm_diag", {}, {**diag(
        "Error: unable to establish a connection to the specified host: localhost\n", rc=255), **pci(), **smi()})
    assert check is None and "unable to establish a connection" in str(unknown)


def test_levels_and_their_timeouts():
    from gpuconf.tasks.registry import build_params
    assert build_params("health_dcgm_diag", {"level": 3}).timeout == 2400
    with pytest.raises(ValueError):
        build_params("health_dcgm_diag", {"level": 5})


def test_a_schedule_over_a_mixed_fleet_passes_nodes_without_dcgm_and_diagnoses_the_others():
    from tests.unit.tasks.health.fakes import stat
    check, _ = run_probe("health_dcgm_diag", {"required": False}, {**diag("", rc=127), **pci(), **smi(),
                                                                    **stat("/usr/bin/dcgmi", None)})
    (finding,) = check.findings
    assert (finding.severity, finding.value) == ("ok", "not_installed") and "dcgm role" in finding.message
    check, _ = run_probe("health_dcgm_diag", {"required": False}, {**diag(FAIL, rc=226), **pci(), **smi(),
                                                                    **stat("/usr/bin/dcgmi", "ELF")})
    assert [f.severity for f in check.findings] == ["failure"]
