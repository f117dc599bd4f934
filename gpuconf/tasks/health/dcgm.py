"""DCGM's diagnostics: `dcgmi diag -r LEVEL --json`, under a timeout that kills it.

Level 1 (software checks, seconds) is what a schedule runs; levels 2-4 (PCIe/NVLink and
memory, then stress, ~2 min to an hour or more) are for an operator's on-demand check
(`-e gpu_health_dcgm_diag_level=3`) with the node drained (NVIDIA's own guidance,
reference section 8). A hung `dcgmi` (a wedged host engine or GPU) is `unknown`, never a
pass; so is JSON cut short.
"""
from __future__ import annotations

from pydantic import Field, model_validator

from gpuconf.facts.base import Fact, FactUnavailable, Output, command, file_state
from gpuconf.facts.dcgm import DiagReport, parse_dcgmi_diag_json
from gpuconf.results import Finding
from gpuconf.tasks.base import Facts, Params, Unknown, Verdict
from gpuconf.tasks.health.common import FAILURE, OK, WARNING, HealthProbe, gpu_name, verdict
from gpuconf.tasks.health.readings import gpu_readings, optional_readings, smi_indexes

# seconds a level normally takes, with room: the scheduled level 1 must never hold a run for long
DEFAULT_TIMEOUTS = {1: 120.0, 2: 600.0, 3: 2400.0, 4: 7200.0}
DCGMI = file_state("/usr/bin/dcgmi")
RESULTS = {"pass": OK, "skip": OK, "not run": OK, "warn": WARNING, "fail": FAILURE}


class DcgmDiagParams(Params):
    level: int = Field(1, ge=1, le=4, description="dcgmi diag level: 1 quick (scheduled), 2 medium (~2 min), "
                       "3 long (~15 min), 4 extended (on demand, node drained)")
    timeout: float | None = Field(None, gt=0, le=14400, description="seconds dcgmi may take before it counts as "
                                  "hung (unknown); default by level: 120, 600, 2400, 7200")
    nvidia_smi_timeout: float = Field(10, gt=0, description="seconds for nvidia-smi (only the GPUs' bus ids)")
    required: bool = Field(True, description="false: a node without DCGM (no dcgmi) passes with an ok finding that "
                           "says so, instead of being unknown; for a schedule over a fleet where only some nodes "
                           "run the dcgm role")

    @model_validator(mode="after")
    def _timeout(self) -> DcgmDiagParams:
        if self.timeout is None:
            self.timeout = DEFAULT_TIMEOUTS[self.level]
        return self


def parse_diag(out: Output) -> DiagReport:
    """The diag's report; FactUnavailable when dcgmi hung, is missing or printed no JSON."""
    if out.timed_out:
        raise FactUnavailable(f"dcgmi_unresponsive: dcgmi diag did not finish within {out.timeout or 0:g} s "
                              "(its process group was killed)")
    if out.rc == 127:
        raise FactUnavailable("dcgmi is not installed (the dcgm role installs DCGM 4)")
    report = parse_dcgmi_diag_json(out.stdout)
    if report.incomplete and not report.tests:
        said = " ".join((out.stdout or out.stderr).strip().splitlines()[:2])[:300]
        raise FactUnavailable(f"dcgmi diag (exit {out.rc}): {report.incomplete}" + (f": {said}" if said else ""))
    return report


def diag_fact(params: DcgmDiagParams) -> Fact[DiagReport]:
    return command(["dcgmi", "diag", "-r", str(params.level), "--json"], parse_diag,
                   timeout=params.timeout or DEFAULT_TIMEOUTS[params.level])


def judge_diag(report: DiagReport, level: int, buses: dict[int, str], probe: str = "dcgm_diag") -> list[Finding]:
    """One finding per (test, GPU) that did not pass, naming both; one ok finding when all passed."""
    findings = []
    for test in report.tests:
        severity = RESULTS.get(test.result.lower(), WARNING)
        if severity == OK:
            continue
        bus = buses.get(test.gpu) if test.gpu is not None else None
        where = gpu_name(test.gpu, bus) if test.gpu is not None else "the node"
        findings.append(Finding(probe, severity, f"{where}: dcgmi diag -r {level} test {test.test} ({test.category}): "
                                f"{test.result}" + (f": {test.details[:200]}" if test.details else ""),
                                gpu=test.gpu, bus_id=bus, value=test.test,
                                action="drain" if severity == FAILURE else None))
    if not findings:
        gpus = {t.gpu for t in report.tests if t.gpu is not None}
        names = sorted({t.test for t in report.tests})
        findings.append(Finding(probe, OK, f"dcgmi diag -r {level}: {len(names)} test(s) passed on {len(gpus)} "
                                f"GPU(s) ({', '.join(names)})" + (f", DCGM {report.version}" if report.version
                                                                   else ""), value=len(names)))
    return findings


class DcgmDiag(HealthProbe[DcgmDiagParams]):
    """DCGM's diagnostic passes: `dcgmi diag -r LEVEL --json` (level 1 by default: the
    scheduled readiness check; 2-4 on demand), each failed test named with its GPU. A hung
    or missing dcgmi, or JSON cut short, is unknown, never a pass."""

    name = "health_dcgm_diag"
    probe = "dcgm_diag"
    Params = DcgmDiagParams

    def reads(self, params: DcgmDiagParams) -> list[Fact]:
        return [diag_fact(params), gpu_readings(params.nvidia_smi_timeout), DCGMI]

    def check(self, params: DcgmDiagParams, facts: Facts) -> Verdict:
        if not params.required and not facts[DCGMI].exists:
            return verdict([Finding(self.probe, OK, "DCGM is not installed on this node (no /usr/bin/dcgmi; the dcgm "
                                    "role installs it): no diagnostic to run", value="not_installed")],
                           level=params.level)
        try:
            report = facts[diag_fact(params)]
        except FactUnavailable as exc:
            kind = "dcgmi_unresponsive" if str(exc).startswith("dcgmi_unresponsive") else "dcgmi_failed"
            raise Unknown(str(exc), findings=[Finding(self.probe, FAILURE, f"{self.probe} cannot be read: {exc}",
                                                      value=kind)]) from None
        buses = {index: bus for bus, index in smi_indexes(optional_readings(facts, params.nvidia_smi_timeout)).items()}
        findings = judge_diag(report, params.level, buses, self.probe)
        if report.incomplete:
            raise Unknown(f"dcgmi diag's output is incomplete: {report.incomplete}", findings=[*findings, Finding(
                self.probe, FAILURE, f"{self.probe}: the output is incomplete: {report.incomplete}",
                value="incomplete")])
        return verdict(findings, level=params.level)
