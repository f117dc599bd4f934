"""NVIDIA driver tasks: one branch, DKMS built for the running kernel, the module
loaded at the installed version, persistence mode, power limits, fabric manager."""
from __future__ import annotations

import re
from dataclasses import replace

from pydantic import Field

from gpuconf.facts.base import Fact, command, file_state
from gpuconf.facts.dkms import parse_dkms_status
from gpuconf.facts.nvidia import parse_proc_driver_version
from gpuconf.facts.nvidia_smi import gpu_query, not_installed
from gpuconf.tasks.base import Change, Facts, Op, Params, Refused, TaskType, Unknown, Verdict, drift, in_sync, run
from gpuconf.tasks.packages import AptBackend, installed_matching


def once_driver_loads(summary: str, facts: Facts, ops: list[Op]) -> Verdict:
    """Something nvidia-smi does once the driver is loaded. With a reboot already pending on
    the host (the driver was just installed), it is deferred to that reboot; otherwise apply
    tries it, and fails if the driver is still not there."""
    if facts.reboot_pending:
        return drift(Change(f"{summary}: deferred to the pending reboot ({', '.join(facts.reboot_pending)})",
                            reboot=True))
    return drift(Change(summary, ops))

BRANCH_FAMILIES = ("nvidia-driver", "nvidia-dkms", "nvidia-utils", "nvidia-kernel-common", "nvidia-kernel-source",
                   "nvidia-compute-utils", "libnvidia-compute", "nvidia-fabricmanager", "libnvidia-nscq")
BRANCHED = re.compile(r"^(?P<family>" + "|".join(BRANCH_FAMILIES) + r")-(?P<branch>\d+)(?P<flavour>-server|-open)?$")


def upstream(version: str | None) -> str:
    """`535.104.05-0ubuntu1` -> `535.104.05`."""
    return (version or "").split("-")[0].split(":")[-1]


class DriverBranchParams(Params):
    branch: int = Field(gt=0)


class DriverBranch(TaskType):
    """Exactly one driver branch: packages of any other branch (drivers, DKMS,
    utils, fabric manager, ...) are purged before the wanted one is installed."""

    name = "nvidia_driver_branch"
    Params = DriverBranchParams

    def reads(self, params: DriverBranchParams):
        return [installed_matching("*nvidia-*")]

    def check(self, params: DriverBranchParams, facts: Facts) -> Verdict:
        listing = facts[installed_matching("*nvidia-*")]
        others = []
        for package in listing.packages:
            match = BRANCHED.match(package.name)
            if match and int(match["branch"]) != params.branch and package.status in ("installed", "config-files",
                                                                                     "half-installed", "unpacked"):
                others.append(package)
        if not others:
            return in_sync(f"no NVIDIA packages of a branch other than {params.branch}")
        names = [p.name for p in others]
        shown = ", ".join(f"{p.name} {upstream(p.version)}" for p in others)
        return drift(Change(f"purge other driver branches: {shown} (want branch {params.branch})",
                            [AptBackend().remove(names, purge=True, allow_held=True)]))


class DkmsModuleParams(Params):
    module: str = "nvidia"
    version: str
    kernel: str | None = None


def dkms_fact(module: str) -> Fact:
    return command(["dkms", "status", "-m", module], lambda out: (parse_dkms_status(out.stdout), out), timeout=30,
                   key=f"dkms:{module}")


class DkmsModule(TaskType):
    """The DKMS module is built and installed for the running kernel (or
    `kernel`); when it is not, `dkms autoinstall` builds it. This is what
    repairs a kernel upgrade."""

    name = "dkms_module"
    Params = DkmsModuleParams

    def reads(self, params: DkmsModuleParams):
        return [dkms_fact(params.module)]

    def check(self, params: DkmsModuleParams, facts: Facts) -> Verdict:
        kernel = params.kernel or facts.host.get("kernel")
        if not kernel:
            raise Unknown("the running kernel release is not known")
        status, out = facts[dkms_fact(params.module)]
        build = Change(f"{params.module} {params.version} not built for kernel {kernel}: dkms autoinstall",
                       [run(["dkms", "autoinstall", "-k", kernel], timeout=1800)])
        if out.rc == 127:
            return drift(Change(f"dkms not installed yet: build {params.module} {params.version} for {kernel} "
                                "once it is", build.ops))
        entries = [e for e in status.for_module(params.module) if e.version == params.version]
        if any(e.kernel == kernel and e.state.startswith("installed") for e in entries):
            return in_sync(f"{params.module}/{params.version} installed for {kernel}")
        if not entries:
            return drift(Change(f"{params.module} {params.version} is not added to DKMS yet (by the driver "
                                f"package): build it for {kernel}", build.ops))
        built_for = sorted({e.kernel for e in entries if e.kernel})
        if built_for:
            build = replace(build, summary=f"{build.summary} (built for {', '.join(built_for)})")
        return drift(build)


class NvidiaModuleParams(Params):
    version: str


class NvidiaModule(TaskType):
    """The nvidia kernel module is loaded, at the installed version
    (/proc/driver/nvidia/version). When it cannot be loaded now (nouveau holds
    the GPU) or an older one is loaded, the host is marked reboot required."""

    name = "nvidia_module"
    Params = NvidiaModuleParams

    def reads(self, params: NvidiaModuleParams):
        return [file_state("/proc/driver/nvidia/version")]

    def check(self, params: NvidiaModuleParams, facts: Facts) -> Verdict:
        state = facts[file_state("/proc/driver/nvidia/version")]
        if not state.exists:
            return drift(Change("nvidia module not loaded: modprobe nvidia (a reboot if it cannot load)",
                                [run(["modprobe", "nvidia"], check=False)], verify=True, reboot=True))
        loaded = parse_proc_driver_version(state.text or "")
        version = getattr(loaded, "version", None)
        if version is None:
            raise Unknown(f"cannot read /proc/driver/nvidia/version: {(state.text or '')[:120]!r}")
        if version != params.version:
            return drift(Change(f"loaded nvidia module is {version}, installed {params.version}: reboot required",
                                [], verify=True, reboot=True))
        return in_sync(f"nvidia {version} loaded ({getattr(loaded, 'flavour', '?')})")


class PersistenceParams(Params):
    timeout: float = Field(10, gt=0)


class PersistenceMode(TaskType):
    """Persistence mode is Enabled on every GPU now (`nvidia-smi -pm 1`). Use
    the nvidia-persistenced service to keep it across reboots."""

    name = "persistence_mode"
    Params = PersistenceParams

    def _fact(self, params: PersistenceParams):
        return gpu_query("index", "pci.bus_id", "persistence_mode", timeout=params.timeout)

    def reads(self, params: PersistenceParams):
        return [self._fact(params)]

    def check(self, params: PersistenceParams, facts: Facts) -> Verdict:
        result = facts[self._fact(params)]
        enable = [run(["nvidia-smi", "-pm", "1"], timeout=params.timeout * 3)]
        if result.failure is not None:
            if not_installed(result):
                return once_driver_loads("persistence mode on (the NVIDIA driver is not loaded yet)", facts, enable)
            raise Unknown(f"nvidia-smi: {result.failure.message}")
        off = [f"GPU {r['index']} ({r['pci.bus_id']})" for r in result.rows if r.get("persistence_mode") != "Enabled"]
        if not off:
            return in_sync(f"persistence mode Enabled on {len(result.rows)} GPU(s)")
        return drift(Change(f"persistence mode Disabled on {', '.join(off)}: nvidia-smi -pm 1", enable))


class PowerLimitParams(Params):
    watts: float = Field(gt=0)
    gpus: list[int] | None = None
    timeout: float = Field(10, gt=0)


class PowerLimit(TaskType):
    """Each GPU's power limit equals `watts` now (`nvidia-smi -i N -pl W`),
    refused when outside the GPU's min and max limits."""

    name = "gpu_power_limit"
    Params = PowerLimitParams

    def _fact(self, params: PowerLimitParams):
        return gpu_query("index", "pci.bus_id", "power.limit", "power.min_limit", "power.max_limit",
                         timeout=params.timeout)

    def reads(self, params: PowerLimitParams):
        return [self._fact(params)]

    def check(self, params: PowerLimitParams, facts: Facts) -> Verdict:
        result = facts[self._fact(params)]
        if result.failure is not None:
            if not_installed(result):
                return once_driver_loads(f"power limit {params.watts:g} W (the NVIDIA driver is not loaded yet)",
                                         facts, [])
            raise Unknown(f"nvidia-smi: {result.failure.message}")
        changes = []
        for row in result.rows:
            index = int(row["index"])
            if params.gpus is not None and index not in params.gpus:
                continue
            low, high = row.get("power.min_limit"), row.get("power.max_limit")
            if low is not None and high is not None and not low <= params.watts <= high:
                raise Refused(f"{params.watts:g} W is outside GPU {index} ({row['pci.bus_id']}) limits "
                              f"{low:g}-{high:g} W")
            if row.get("power.limit") is None or abs(float(row["power.limit"]) - params.watts) > 0.5:
                changes.append(Change(f"GPU {index} power limit {row.get('power.limit')} W -> {params.watts:g} W",
                                      [run(["nvidia-smi", "-i", str(index), "-pl", f"{params.watts:g}"])]))
        return drift(*changes) if changes else in_sync(f"power limit {params.watts:g} W on every GPU")


class FabricManagerParams(Params):
    branch: int = Field(gt=0)
    hold: bool = True


class FabricManagerVersion(TaskType):
    """nvidia-fabricmanager-BRANCH is installed at exactly the installed
    driver's version, and held. A mismatch is drift, repaired by installing
    the matching version."""

    name = "fabricmanager_version"
    Params = FabricManagerParams

    def _names(self, params: FabricManagerParams) -> tuple[str, str]:
        return f"nvidia-driver-{params.branch}", f"nvidia-fabricmanager-{params.branch}"

    def reads(self, params: FabricManagerParams):
        return [AptBackend().query(self._names(params))]

    def check(self, params: FabricManagerParams, facts: Facts) -> Verdict:
        driver_name, fm_name = self._names(params)
        backend = AptBackend()
        states = facts[backend.query(self._names(params))]
        driver, fm = states[driver_name], states[fm_name]
        if driver is None or not driver.installed:
            return drift(Change(f"{fm_name} at the driver's version, once {driver_name} is installed"))
        install = [backend.install([f"{fm_name}={driver.version}"], allow_held=True)]
        hold = [backend.hold([fm_name], True)] if params.hold else []
        if fm is None or not fm.installed:
            return drift(Change(f"install {fm_name} {upstream(driver.version)} (the driver's version)", install + hold))
        if fm.version != driver.version:
            return drift(Change(f"{fm_name} {upstream(fm.version)} installed, driver is {upstream(driver.version)}",
                                install + hold, before=fm.version, after=driver.version))
        if params.hold and not fm.held:
            return drift(Change(f"hold {fm_name}", hold))
        return in_sync(f"{fm_name} {upstream(fm.version)} matches the driver" + (", held" if fm.held else ""))
