"""NVIDIA driver tasks beside the stack (`tasks/driver.py`): DKMS built for every kernel that
can boot, the loaded module telling the same version and flavour as the packages and
nvidia-smi, companions at the driver's exact version, persistence mode, power limits."""
from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import Field

from gpuconf.driver import catalog
from gpuconf.facts.base import Fact, Output, command, file_state
from gpuconf.facts.dkms import DkmsStatus, parse_dkms_status
from gpuconf.facts.driver_stack import INSTALLED_KERNELS
from gpuconf.facts.installed import INSTALLED
from gpuconf.facts.nvidia import QueryCsv, parse_proc_driver_version
from gpuconf.facts.nvidia_smi import gpu_query, not_installed
from gpuconf.tasks.base import (
    ApplyContext,
    Change,
    Facts,
    Op,
    Params,
    Refused,
    TaskType,
    Unknown,
    Verdict,
    drift,
    in_sync,
    run,
)
from gpuconf.tasks.packages import (
    AptBackend,
    JoinsTransactions,
    apply_ops,
    package_host,
    version_matches,
)


def once_driver_loads(summary: str, facts: Facts, ops: list[Op]) -> Verdict:
    """Something nvidia-smi does once the driver is loaded. With a reboot already pending on
    the host (the driver was just installed), it is deferred to that reboot; otherwise apply
    tries it, and fails if the driver is still not there."""
    if facts.reboot_pending:
        return drift(Change(f"{summary}: deferred to the pending reboot ({facts.reboot_pending[0]})",
                            reboot=True))
    return drift(Change(summary, ops))

class DkmsModuleParams(Params):
    module: str = "nvidia"
    version: str
    kernel: str | None = None   # one kernel only; default: every installed kernel and the running one


def dkms_fact(module: str) -> Fact[tuple[DkmsStatus, Output]]:
    return command(["dkms", "status", "-m", module], lambda out: (parse_dkms_status(out.stdout), out), timeout=30,
                   key=f"dkms:{module}")


class DkmsModule(TaskType[DkmsModuleParams]):
    """The DKMS module is built and installed at `version` for every installed kernel (the next
    boot may run any of them, the newest first) and the running one, or only for `kernel`. A
    kernel without it is drift repaired by `dkms autoinstall -k KERNEL`: this is what keeps a
    kernel upgrade from booting into a node with no driver."""

    name = "dkms_module"
    Params = DkmsModuleParams
    host_facts = frozenset({"kernel"})

    def reads(self, params: DkmsModuleParams) -> list[Fact]:
        return [dkms_fact(params.module), INSTALLED_KERNELS]

    def check(self, params: DkmsModuleParams, facts: Facts) -> Verdict:
        running = {kernel} if (kernel := facts.host_text("kernel")) else set()
        kernels = [params.kernel] if params.kernel else sorted(set(facts[INSTALLED_KERNELS]) | running)
        if not kernels:
            raise Unknown("neither the running kernel nor an installed one is known")
        status, out = facts[dkms_fact(params.module)]
        builds = [Change(f"{params.module} {params.version} not built for kernel {k}: dkms autoinstall",
                         [run(["dkms", "autoinstall", "-k", k], timeout=1800)]) for k in kernels]
        if out.rc == 127:
            return drift(*(replace(b, summary=f"dkms not installed yet: {b.summary} once it is") for b in builds))
        entries = [e for e in status.for_module(params.module) if e.version == params.version]
        if not entries:
            others = sorted({e.version for e in status.for_module(params.module)})
            note = f" (DKMS has {', '.join(others)})" if others else " yet (by the driver package)"
            return drift(*(replace(b, summary=f"{params.module} {params.version} is not added to DKMS{note}: "
                                               f"build it for {k}") for b, k in zip(builds, kernels)))
        done = {e.kernel for e in entries if e.state.startswith("installed")}
        missing = [b for b, k in zip(builds, kernels) if k not in done]
        if missing:
            return drift(*missing)
        return in_sync(f"{params.module}/{params.version} installed for {', '.join(kernels)}")


def wanted_flavour(flavour: str, version: str, facts: Facts) -> str | None:
    """The flavour the driver stack installs: as given, or the catalog's choice for `auto`
    (None when the catalog does not know the branch: any flavour then passes)."""
    if flavour != "auto":
        return flavour
    branch = catalog.catalog().get(int(version.split(".")[0])) if version.split(".")[0].isdigit() else None
    return catalog.auto_flavour(branch, catalog.gpus(facts.host.get("gpus"))) if branch else None


class NvidiaModuleParams(Params):
    version: str
    flavour: Literal["auto", "open", "proprietary"] = "auto"   # auto: the catalog's choice, as the stack
    timeout: float = Field(10, gt=0)


class NvidiaModule(TaskType[NvidiaModuleParams]):
    """Version truth: the loaded nvidia module (/proc/driver/nvidia/version, whose banner tells
    open from proprietary) is `version`, of the wanted flavour, and nvidia-smi reports the same
    driver version. A difference is drift naming both sides; when only a reboot can load the
    installed module (nouveau holds the GPU, an older module is loaded), the host is marked
    reboot-pending."""

    name = "nvidia_module"
    host_facts = frozenset({"gpus"})   # the catalog's flavour for `auto`
    Params = NvidiaModuleParams

    def _smi(self, params: NvidiaModuleParams) -> Fact[QueryCsv]:
        return gpu_query("index", "driver_version", timeout=params.timeout)

    def reads(self, params: NvidiaModuleParams) -> list[Fact]:
        return [file_state("/proc/driver/nvidia/version"), self._smi(params)]

    def check(self, params: NvidiaModuleParams, facts: Facts) -> Verdict:
        state = facts[file_state("/proc/driver/nvidia/version")]
        if not state.exists:
            return drift(Change(f"nvidia module not loaded: modprobe nvidia, want {params.version} "
                                "(a reboot if it cannot load)",
                                [run(["modprobe", "nvidia"], check=False)], verify=True, reboot=True))
        loaded = parse_proc_driver_version(state.text or "")
        version = getattr(loaded, "version", None)
        if version is None:
            raise Unknown(f"cannot read /proc/driver/nvidia/version: {(state.text or '')[:120]!r}")
        flavour = getattr(loaded, "flavour", None)
        if version != params.version:
            return drift(Change(f"loaded nvidia module is {version} ({flavour}), installed {params.version}: "
                                "reboot required", [], verify=True, reboot=True, before=version, after=params.version))
        wanted = wanted_flavour(params.flavour, version, facts)
        if wanted and flavour != wanted:
            return drift(Change(f"loaded nvidia module is {flavour}, installed {wanted} {version}: "
                                "reboot required", [], verify=True, reboot=True, before=flavour, after=wanted))
        smi = facts[self._smi(params)]
        if smi.failure is not None:
            return drift(Change(f"nvidia-smi fails next to the loaded module {version}: {smi.failure.message}: "
                                "reboot required", [], verify=True, reboot=True))
        reported = sorted({str(r.get("driver_version")) for r in smi.rows if r.get("driver_version")})
        if reported and reported != [version]:
            return drift(Change(f"nvidia-smi reports driver {', '.join(reported)}, the loaded module is {version}: "
                                "reboot required", [], verify=True, reboot=True, before=reported, after=version))
        return in_sync(f"nvidia {version} loaded ({flavour}), nvidia-smi agrees")


class PersistenceParams(Params):
    timeout: float = Field(10, gt=0)


class PersistenceMode(TaskType[PersistenceParams]):
    """Persistence mode is Enabled on every GPU now (`nvidia-smi -pm 1`). Use
    the nvidia-persistenced service to keep it across reboots."""

    name = "persistence_mode"
    Params = PersistenceParams

    def _fact(self, params: PersistenceParams) -> Fact[QueryCsv]:
        return gpu_query("index", "pci.bus_id", "persistence_mode", timeout=params.timeout)

    def reads(self, params: PersistenceParams) -> list[Fact]:
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


class PowerLimit(TaskType[PowerLimitParams]):
    """Each GPU's power limit equals `watts` now (`nvidia-smi -i N -pl W`),
    refused when outside the GPU's min and max limits."""

    name = "gpu_power_limit"
    Params = PowerLimitParams

    def _fact(self, params: PowerLimitParams) -> Fact[QueryCsv]:
        return gpu_query("index", "pci.bus_id", "power.limit", "power.min_limit", "power.max_limit",
                         timeout=params.timeout)

    def reads(self, params: PowerLimitParams) -> list[Fact]:
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
            index = int(str(row["index"]))
            if params.gpus is not None and index not in params.gpus:
                continue
            # a value nvidia-smi cannot give ([N/A], a word) is not a number: no limit to refuse by
            low, high, limit = row.get("power.min_limit"), row.get("power.max_limit"), row.get("power.limit")
            if isinstance(low, (int, float)) and isinstance(high, (int, float)) and not low <= params.watts <= high:
                raise Refused(f"{params.watts:g} W is outside GPU {index} ({row['pci.bus_id']}) limits "
                              f"{low:g}-{high:g} W")
            if not isinstance(limit, (int, float)) or abs(limit - params.watts) > 0.5:
                changes.append(Change(f"GPU {index} power limit {row.get('power.limit')} W -> {params.watts:g} W",
                                      [run(["nvidia-smi", "-i", str(index), "-pl", f"{params.watts:g}"])]))
        return drift(*changes) if changes else in_sync(f"power limit {params.watts:g} W on every GPU")


class CompanionParams(Params):
    package: Literal["persistenced", "fabricmanager", "nscq", "nvlsm", "nvsdm", "imex"]
    branch: int = Field(gt=0)
    version: str
    hold: bool = True


class DriverCompanion(JoinsTransactions[CompanionParams]):
    """A package that must match the driver exactly (`nvidia-persistenced`, fabric manager,
    `libnvidia-nscq`, on NVLink5 `nvlsm` and `libnvsdm`, on GB200 racks `nvidia-imex`), installed at the driver's
    `version` under its name for this OS family and branch, and held. Another version is drift naming both."""

    name = "nvidia_driver_companion"
    Params = CompanionParams

    def reads(self, params: CompanionParams) -> list[Fact]:
        return INSTALLED

    def check(self, params: CompanionParams, facts: Facts) -> Verdict:
        host = package_host(facts)
        backend, repair = host.backend, host.repair   # an interrupted dpkg or rpm first
        naming = facts.platform.driver_names
        name = naming.companion(params.package, params.branch)
        version = naming.package_version(params.version)
        current = host.packages.installed(name)
        install = [backend.install([backend.spec(name, version)], True)]
        hold = [backend.hold([name], True, {name: version})] if params.hold else []
        if current is None:
            return drift(*repair, Change(f"install {name} {version} (the driver's version)", install + hold))
        if not version_matches(current.version, version):
            return drift(*repair, Change(f"{name} {current.version} installed, the driver is {version}",
                                         install + hold, before=current.version, after=version))
        if params.hold and not current.held:
            return drift(*repair, Change(f"hold {name}", hold))
        if repair:
            return drift(*repair)
        return in_sync(f"{name} {current.version} matches the driver" + (", held" if current.held else ""))

    def apply(self, ctx: ApplyContext, params: CompanionParams, changes: list[Change]) -> None:
        apply_ops(ctx, [op for change in changes for op in change.ops], AptBackend.LOCK_TIMEOUT)
