"""The NVLink fabric of NVSwitch systems: every link up, fabric manager running and
every GPU's fabric registration complete."""
from __future__ import annotations

from pydantic import Field

from gpuconf.facts.base import Fact, FactUnavailable, Output, command
from gpuconf.facts.gather import PCI_FACT
from gpuconf.facts.nvidia import NvlinkStatus
from gpuconf.facts.nvidia import fabricmanager as fm
from gpuconf.facts.nvidia.fabricmanager import FabricManagerRefusal, parse_fabric_manager_log
from gpuconf.facts.nvidia.nvlink import ALL_INACTIVE, LINKS
from gpuconf.facts.systemd import parse_is_active
from gpuconf.results import Finding
from gpuconf.tasks.base import Change, Facts, Unknown, Verdict, run
from gpuconf.tasks.health.common import FAILURE, OK, HealthProbe, NvidiaSmiParams, WhereRead, gpu_name, verdict
from gpuconf.tasks.health.readings import GpuReadings, gpu_readings, nvlink_status, require_readings, unknown_finding


class NvlinkParams(NvidiaSmiParams):
    expected_links: int | None = Field(None, ge=0, description="active NVLinks each GPU should have (A100 SXM4: "
                                       "12, H100 SXM5: 18); null: only require that none is inactive")


def judge_nvlinks(status: NvlinkStatus, params: NvlinkParams, bus_of: dict[int, str],
                  probe: str = "nvlink") -> list[Finding]:
    """`bus_of` maps nvidia-smi indexes to bus ids (nvlink -s prints no bus ids)."""
    findings = []
    for gpu in status.gpus:
        bus = bus_of.get(gpu.index)
        where = WhereRead(gpu=gpu.index, bus_id=bus, value=gpu.active_link_count)
        label = gpu_name(gpu.index, bus)
        problems = []
        if gpu.status == ALL_INACTIVE:
            problems.append("all NVLinks are inactive")
        elif gpu.inactive_links:
            problems.append(f"NVLink(s) {', '.join(map(str, gpu.inactive_links))} inactive")
        elif gpu.status != LINKS and params.expected_links:
            problems.append(f"no NVLink status ({gpu.message or gpu.status})")
        if params.expected_links is not None and gpu.active_link_count != params.expected_links:
            problems.append(f"{gpu.active_link_count} active, expected {params.expected_links}")
        if problems:
            findings.append(Finding(probe, FAILURE, f"{label}: " + "; ".join(problems), **where))
        else:
            findings.append(Finding(probe, OK, f"{label}: {gpu.active_link_count} NVLink(s) active"
                                    if gpu.status == LINKS else f"{label}: {gpu.message or gpu.status}", **where))
    missing = sorted(set(bus_of) - {g.index for g in status.gpus})
    for index in missing:
        findings.append(Finding(probe, FAILURE, f"{gpu_name(index, bus_of[index])}: not in nvidia-smi nvlink -s",
                                gpu=index, bus_id=bus_of[index]))
    if not findings:
        findings.append(Finding(probe, FAILURE, "nvidia-smi nvlink -s reported no GPU"))
    return findings


class NvlinksActive(HealthProbe[NvlinkParams]):
    """On NVSwitch systems, no GPU has an inactive NVLink (`nvidia-smi nvlink -s`, a read
    of its own beside the shared nvidia-smi query) and, when `expected_links` is set,
    each GPU has exactly that many active links. Run it `when: facts.nvswitch`."""

    name = "health_nvlink"
    probe = "nvlink"
    Params = NvlinkParams

    def reads(self, params: NvlinkParams) -> list[Fact]:
        return [PCI_FACT, gpu_readings(params.nvidia_smi_timeout), nvlink_status(params.nvidia_smi_timeout)]

    def judge(self, params: NvlinkParams, facts: Facts) -> list[Finding]:
        if not facts[PCI_FACT]["nvswitches"]:
            return [Finding(self.probe, FAILURE, "no NVSwitch in sysfs: NVLinks are judged on NVSwitch systems only "
                            "(run this probe when: facts.nvswitch)")]
        readings = require_readings(facts, self.probe, params.nvidia_smi_timeout)
        try:
            status = facts[nvlink_status(params.nvidia_smi_timeout)]
        except FactUnavailable as exc:
            raise unknown_finding(self.probe, str(exc), None) from None
        if status.failure is not None:
            raise Unknown(status.failure.message, findings=[Finding(
                self.probe, FAILURE, f"nvlink cannot be read: {status.failure.kind}: {status.failure.message}",
                value=status.failure.kind)])
        return judge_nvlinks(status, params, {g.index: g.bus_id for g in readings.gpus if g.bus_id}, self.probe)


# what to do about each of fabric manager's start-up refusals (facts.nvidia.fabricmanager names them)
REFUSAL_FIXES = {
    fm.IB_UMAD_NOT_LOADED: "load ib_umad now and at boot (modprobe ib_umad; list it in /etc/modules-load.d/: "
                           "the fabricmanager role does both on NVLink5 boards), then restart {service}",
    fm.NVLINK_SM_NOT_RUNNING: "install nvlsm and libnvsdm at the driver's version and load ib_umad, so that "
                              "{service}'s start script can start the NVLink Subnet Manager (the fabricmanager "
                              "role does so on NVLink5 boards; /var/log/nvlsm.log says why it stopped)",
    fm.NO_NVSWITCH: "this node has no NVSwitch for fabric manager to route: disable it (systemctl disable --now "
                    "{service}; the fabricmanager role does so)",
    fm.NOTHING_TO_DO: "no NVSwitch to route, or on NVLink5 the NVLink Subnet Manager is not running: disable {service} "
                      "where there is no NVSwitch, else install and start nvlsm",
    fm.REFUSED_VERSION: "install nvidia-fabricmanager at the driver's exact version (the nvidia_driver_companion task, "
                        "package: fabricmanager), then restart {service}",
    fm.CONFIG_INVALID: "correct {detail} in fabric manager's config file (/usr/share/nvidia/nvswitch/"
                       "fabricmanager.cfg, or the file its -c names): a path item must name a file that exists "
                       "where fabric manager runs; then restart {service}",
    fm.REFUSED: "fabric manager says why in the line above; journalctl -u {service} -b has the rest",
}


def fabric_manager_journal(unit: str) -> Fact[FabricManagerRefusal | None]:
    """This boot's journal of the unit: the start script's and fabric manager's own refusals."""
    def parse(out: Output) -> FabricManagerRefusal | None:
        if out.rc != 0 or out.timed_out:
            return None   # no journal to read: the service state alone is the evidence
        return parse_fabric_manager_log(out.stdout).refusal

    return command(["journalctl", "-u", unit, "-b", "0", "--no-pager", "-q", "-n", "200"], parse, timeout=10,
                   key=f"health:journal:{unit}")


def refusal_finding(refusal: FabricManagerRefusal, state: str, service: str, probe: str) -> Finding:
    """A refusal as a named finding with its fix (value: the refusal's name)."""
    fix = REFUSAL_FIXES.get(refusal.name, "read journalctl -u {service}").format(service=service,
                                                                               detail=refusal.detail or "the item")
    return Finding(probe, FAILURE, f"{service} is {state}: it refused to start ({refusal.name}: "
                   f"{refusal.line[-160:]}); fix: {fix}", value=refusal.name)


def service_state(unit: str) -> Fact[str]:
    def parse(out: Output) -> str:
        state = parse_is_active(out.stdout)
        return state if isinstance(state, str) else (out.stdout.strip() or f"unknown (exit {out.rc})")

    return command(["systemctl", "is-active", unit], parse, timeout=10, key=f"health:is-active:{unit}")


class FabricManagerParams(NvidiaSmiParams):
    service: str = Field("nvidia-fabricmanager", description="the fabric manager's systemd unit")
    remedy: bool = Field(False, description="restart the service (apply) when it is not active or a GPU's "
                                            "fabric registration is not Completed")


def judge_fabric(state: str, readings: GpuReadings, service: str, probe: str = "fabric_manager") -> list[Finding]:
    findings = [Finding(probe, OK if state == "active" else FAILURE, f"{service} is {state}", value=state)]
    for gpu in readings.gpus:
        if gpu.fabric_state is None:
            continue  # before Hopper GPUs do not report a fabric state: the service is the evidence
        good = gpu.fabric_state == "Completed" and gpu.fabric_status in (None, "Success")
        status = f", status {gpu.fabric_status}" if gpu.fabric_status else ""
        findings.append(Finding(probe, OK if good else FAILURE, f"{gpu.label}: fabric state {gpu.fabric_state}"
                                f"{status}" + ("" if good else ", want Completed"), gpu=gpu.index,
                                bus_id=gpu.bus_id, value=gpu.fabric_state))
    return findings


class FabricManagerReady(HealthProbe[FabricManagerParams]):
    """On NVSwitch systems, the fabric manager service is active and every GPU that
    reports a fabric state (`fabric.state`, Hopper and later) reports Completed. A service
    that refused to start says why, from this boot's journal, as a named finding with its
    fix: ib_umad not loaded, the NVLink Subnet Manager not running, no NVSwitch, a version
    mismatch, a config item with an invalid value; any other failed start is `refused`, naming
    fabric manager's own error line. Remedy (`remedy: true`, apply only): restart the service."""

    name = "health_fabricmanager"
    probe = "fabric_manager"
    Params = FabricManagerParams

    def reads(self, params: FabricManagerParams) -> list[Fact]:
        return [service_state(params.service), gpu_readings(params.nvidia_smi_timeout),
                fabric_manager_journal(params.service)]

    def check(self, params: FabricManagerParams, facts: Facts) -> Verdict:
        state = facts[service_state(params.service)]
        service = Finding(self.probe, OK if state == "active" else FAILURE, f"{params.service} is {state}")
        refusal = None if state == "active" else facts[fabric_manager_journal(params.service)]
        if refusal is not None:
            return self._refused(params, facts, state, refusal)
        readings = require_readings(facts, self.probe, params.nvidia_smi_timeout, [service])
        findings = judge_fabric(state, readings, params.service, self.probe)
        changes = []
        if params.remedy and any(f.severity == FAILURE for f in findings):
            changes.append(Change(f"restart {params.service}", [run(["systemctl", "restart", params.service])],
                                  verify=False))
        return verdict(findings, changes)

    def _refused(self, params: FabricManagerParams, facts: Facts, state: str,
                 refusal: FabricManagerRefusal) -> Verdict:
        """A refusal is a known failure whatever nvidia-smi answers: named, with its fix. No restart:
        it would be refused again until the fix is made."""
        named = refusal_finding(refusal, state, params.service, self.probe)
        try:
            readings = require_readings(facts, self.probe, params.nvidia_smi_timeout)
        except Unknown as exc:   # the GPUs' fabric states are not known; the refusal still is
            return verdict([named, *exc.findings])
        return verdict([named, *judge_fabric(state, readings, params.service, self.probe)[1:]])
