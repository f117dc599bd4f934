"""The NVIDIA driver stack: one branch at one exact version, one kernel-module flavour, from the
host's own package manager, held there; and its companions at the driver's exact version.

Refused before anything changes: a branch and version that disagree, a branch the catalog does
not know, does not run this host's GPUs, or that is past its end of life (unless allowed), a
flavour the GPUs cannot use, unsigned DKMS modules on a Secure Boot host, and any wanted package
version the host's repositories do not offer. A switch of branch or flavour is one package
transaction (install and purge together), so a failure leaves the old stack installed.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from gpuconf.driver import catalog, names
from gpuconf.driver.names import Stack
from gpuconf.errors import TaskError
from gpuconf.facts.base import Fact
from gpuconf.facts.driver_stack import (
    INSTALLED_KERNELS,
    MODULE_STREAM,
    SECURE_BOOT,
    Offered,
    apt_offered,
    dnf_offered,
    enabled_stream,
)
from gpuconf.facts.installed import INSTALLED, Installed, PackageSet
from gpuconf.results import Finding
from gpuconf.tasks.base import ApplyContext, Change, Facts, Op, Params, Refused, Verdict, run
from gpuconf.tasks.packages import (
    AptBackend,
    Backend,
    DnfBackend,
    JoinsTransactions,
    apply_ops,
    backend_for,
    package_host,
)

VERSION = r"^\d{3}\.\d+(\.\d+)?$"
NAMED_BRANCH = re.compile(r"-(\d{3})(?:-open|-server|-server-open)?(?:-|$)")
STREAM_KEY = "dnf module stream nvidia-driver"
KERNEL_MODULE_PACKAGES = ("nvidia-dkms", "linux-modules-nvidia-", "kmod-nvidia-")


class DriverStackParams(Params):
    branch: int = Field(gt=0)
    version: str = Field(pattern=VERSION)
    flavour: Literal["auto", "open", "proprietary"] = "auto"
    modules: Literal["dkms", "precompiled"] = "dkms"
    allow_eol: bool = False
    dkms_signed: bool = False   # a MOK key is enrolled and DKMS signs what it builds (Secure Boot)
    hold: bool = True
    lock_timeout: float = Field(AptBackend.LOCK_TIMEOUT, ge=0, le=86400)


def apt_patterns(branch: int) -> list[str]:
    if branch < names.UNVERSIONED_FROM:
        return [f"nvidia-*-{branch}", f"nvidia-*-{branch}-open", f"libnvidia-*-{branch}",
                f"linux-modules-nvidia-{branch}-*"]
    return ["nvidia-kernel-common", "nvidia-dkms", "nvidia-dkms-open", "nvidia-utils", "libnvidia-compute",
            f"nvidia-driver-pinning-{branch}", f"linux-modules-nvidia-{branch}-*"]


DNF_NAMES = ["nvidia-kmod-common", "kmod-nvidia-open-dkms", "kmod-nvidia-latest-dkms", "nvidia-driver-cuda-libs",
             "nvidia-driver", "nvidia-driver-cuda", "nvidia-open"]


def named_branch(name: str) -> int | None:
    match = NAMED_BRANCH.search(name.removeprefix("linux-modules-nvidia"))
    return int(match[1]) if match else None


def _branch_of(package: Installed) -> int | None:
    head = package.upstream.split(".")[0]
    return int(head) if head.isdigit() else None


# id(listing) -> (listing, its driver packages): hosts with the same listing share one read-only
# mapping (gpuconf/facts/installed.py), so the few driver packages among its hundreds are picked once
_DRIVERS: dict[int, tuple[Mapping[str, Installed], tuple[Installed, ...]]] = {}


def _driver_packages(packages: Mapping[str, Installed]) -> tuple[Installed, ...]:
    known = _DRIVERS.get(id(packages))
    if known is not None and known[0] is packages:
        return known[1]
    drivers = tuple(p for p in packages.values()
                    if names.is_driver_package(p.name) or p.name.startswith("nvidia-driver-pinning-"))
    if len(_DRIVERS) >= 16:
        _DRIVERS.clear()
    _DRIVERS[id(packages)] = (packages, drivers)
    return drivers


class DriverStack(JoinsTransactions[DriverStackParams]):
    """Exactly one NVIDIA driver stack: `branch` at `version`, kernel modules of one `flavour`
    (auto: the catalog's choice for these GPUs) from DKMS or precompiled signed packages, held
    (apt-mark hold, the pinning package from 590 on, or dnf versionlock). Packages of any other
    branch or flavour are purged in the same transaction."""

    name = "nvidia_driver_stack"
    Params = DriverStackParams
    host_facts = frozenset({"gpus", "kernel"})

    def reads(self, params: DriverStackParams) -> list[Fact]:
        return [*INSTALLED, apt_offered(apt_patterns(params.branch)), dnf_offered(DNF_NAMES), MODULE_STREAM,
                SECURE_BOOT, INSTALLED_KERNELS]

    def check(self, params: DriverStackParams, facts: Facts) -> Verdict:
        gpus = catalog.gpus(facts.host.get("gpus"))
        branch = catalog.catalog().get(params.branch)
        flavour = params.flavour if params.flavour != "auto" or branch is None else catalog.auto_flavour(branch, gpus)
        refusal = catalog.refuse_install(params.branch, params.version, "open" if flavour == "auto" else flavour,
                                         facts.today, gpus, params.allow_eol)
        if refusal:
            raise Refused(refusal)
        assert branch is not None and flavour != "auto"
        host = package_host(facts, params.lock_timeout)
        packages = host.packages
        running = {kernel} if (kernel := facts.host_text("kernel")) else set()
        kernels = sorted(set(facts[INSTALLED_KERNELS]) | running)
        naming = facts.platform.driver_names
        if params.modules == "precompiled" and not naming.precompiled_modules:
            raise Refused("nvidia_driver_modules: precompiled means Canonical's signed linux-modules-nvidia packages "
                          f"(Ubuntu); on {facts.platform.distribution} use dkms (the <branch>-open or <branch>-dkms "
                          "module streams)")
        want = naming.stack(params.branch, params.version, flavour, params.modules, kernels)
        drivers = _driver_packages(packages.packages)
        findings = self._findings(drivers, branch, facts, gpus, params.version)
        self._secure_boot(params, facts, naming)
        changes = [*host.repair,   # apt and dnf refuse to start until it is done
                   *self._changes(want, packages, drivers, facts, params)]
        if not changes:
            held = " held," if params.hold else ""
            return Verdict([], f"{flavour} {params.version} ({params.modules}),{held} {len(want.packages)} packages "
                               f"at {want.package_version()}", findings=findings)
        return Verdict(changes, "; ".join(c.summary for c in changes), findings=findings)

    # -- what is wrong -------------------------------------------------------
    def _findings(self, drivers: tuple[Installed, ...], branch: catalog.Branch, facts: Facts,
                  gpus: list[catalog.Gpu], wanted: str) -> list[Finding]:
        """A warning for each end-of-life branch found installed, and for the wanted one (which
        can be past its end only when nvidia_driver_allow_eol said so); and for each point
        release, installed or wanted, older than the newest its branch is known to have (a
        node on it is otherwise "in sync", missing fixes its branch already has)."""
        installed = [p for p in drivers if p.installed and names.is_driver_package(p.name)]
        found = {b for p in installed if (b := _branch_of(p))} | {branch.branch}
        warnings = []
        for number in sorted(found):
            row = catalog.catalog().get(number)
            message = catalog.end_of_life(row, facts.today, gpus) if row else None
            if message:
                warnings.append(Finding("driver_branch_eol", "warning", message, value=number))
        versions = {p.upstream for p in installed} | {wanted}
        for version in sorted(versions, key=catalog.version_key):
            row = catalog.catalog().get(catalog.version_key(version)[0]) if catalog.version_key(version) else None
            behind = catalog.point_release_behind(row, version) if row else None
            if behind:
                warnings.append(Finding("driver_point_release_behind", "warning", behind, value=version))
        return warnings

    @staticmethod
    def _secure_boot(params: DriverStackParams, facts: Facts, naming: names.Naming) -> None:
        if params.modules != "dkms" or params.dkms_signed or not facts[SECURE_BOOT]:
            return
        remedy = naming.secure_boot_remedy
        raise Refused("Secure Boot is enabled and DKMS builds unsigned modules, which the kernel would refuse "
                      f"(Key was rejected by service): {remedy}, or enroll a MOK key for DKMS to sign with "
                      "and set nvidia_driver_dkms_signed: true")

    def _changes(self, want: Stack, packages: PackageSet, drivers: tuple[Installed, ...], facts: Facts,
                 params: DriverStackParams) -> list[Change]:
        version = want.package_version()
        wanted = [*want.packages, *([want.pinning] if want.pinning else [])]
        missing = [n for n in want.packages if not self._right(packages.installed(n), version)]
        if want.pinning and not packages.installed(want.pinning):
            missing.append(want.pinning)
        purge = self._others(want, drivers)
        backend = backend_for(packages)
        changes = []
        stream = enabled_stream(facts[MODULE_STREAM]) if want.stream else None
        if missing or purge or (want.stream and stream != want.stream):
            self._offered(want, missing, facts)
            changes.append(self._transaction(want, packages, missing, purge, stream, backend, params))
        unheld = [n for n in wanted if n not in missing and (p := packages.installed(n)) and not p.held]
        if params.hold and (unheld or (missing and wanted)):
            to_hold = wanted if missing else unheld
            changes.append(Change(f"hold {', '.join(to_hold)}",
                                  [backend.hold(to_hold, True, {n: version for n in want.packages})]))
        return changes

    @staticmethod
    def _right(package: Installed | None, version: str) -> bool:
        return package is not None and (package.version == version or package.version.split(":", 1)[-1] ==
                                        version.split(":", 1)[-1])

    @staticmethod
    def _others(want: Stack, drivers: tuple[Installed, ...]) -> list[Installed]:
        """Installed driver packages that are not of this stack: another branch or version, the
        other flavour's or source's kernel modules, a transitional package named for another
        branch. Companions of this branch stay (their own task keeps them at the version)."""
        keep = {want.naming.companion(c, want.branch) for c in names.COMPANIONS}
        others = []
        for package in drivers:
            if not package.installed and package.status != "config-files":
                continue
            if package.name in want.packages or package.name in keep or not names.is_driver_package(package.name):
                if not (package.name.startswith("nvidia-driver-pinning-") and package.name != want.pinning):
                    continue
            wrong_version = package.upstream != want.version
            named = named_branch(package.name)
            misnamed = named is not None and named != want.branch
            module_package = package.name.startswith(KERNEL_MODULE_PACKAGES) and package.name not in want.packages
            if wrong_version or misnamed or module_package or package.name.startswith("nvidia-driver-pinning-"):
                others.append(package)
        return sorted(others, key=lambda p: p.name)

    @staticmethod
    def _offered(want: Stack, missing: list[str], facts: Facts) -> None:
        """Refuse before apply when the host's repositories lack a wanted version."""
        fact = apt_offered(apt_patterns(want.branch)) if facts.platform.packages == "apt" else dnf_offered(DNF_NAMES)
        offered: Offered = facts[fact]
        version = want.package_version()
        absent = [n for n in missing if not offered.has(n, None if n == want.pinning else version)]
        if absent:
            seen = sorted({v for n in absent for v in offered.versions.get(n, ())})
            raise Refused(f"not in this host's repositories: {', '.join(f'{n} {version}' for n in absent)}"
                          + (f" (they offer {', '.join(seen[-4:])})" if seen else "")
                          + "; nothing was changed")

    def _transaction(self, want: Stack, packages: PackageSet, missing: list[str], purge: list[Installed],
                     stream: str | None, backend: Backend, params: DriverStackParams) -> Change:
        version = want.package_version()
        specs = [backend.spec(n, None if n == want.pinning else version) for n in missing]
        parts = []
        flavours = {("open" if "open" in p.name else "proprietary") for p in purge
                    if p.name.startswith(KERNEL_MODULE_PACKAGES)}
        if flavours and want.flavour not in flavours:
            parts.append(f"switch kernel modules {'/'.join(sorted(flavours))} -> {want.flavour}; a reboot follows")
        for package in purge:
            named = named_branch(package.name)
            note = (f" (named for branch {named}, carries {package.upstream}: a transitional package)"
                    if named is not None and str(named) != package.upstream.split(".")[0] else "")
            parts.append(f"purge {package.name} {package.version}{note}")
        for name in missing:
            current = packages.get(name)
            parts.append(f"{name} {current.version} -> {version}" if current and current.installed else
                         f"install {name} {'' if name == want.pinning else version}".rstrip())
        ops: list[Op] = []
        if want.stream and stream != want.stream:
            parts.insert(0, f"dnf module stream nvidia-driver:{stream or 'none'} -> {want.stream}")
            ops += [run(["dnf", "-y", "-q", "module", "reset", "nvidia-driver"], timeout=600),
                    run(["dnf", "-y", "-q", "module", "enable", f"nvidia-driver:{want.stream}"], timeout=600)]
        locked = [p.name for p in purge if p.held] + [n for n in missing if (p := packages.get(n)) and p.held]
        if locked and isinstance(backend, DnfBackend):
            ops.append(backend.hold(locked, False))
        ops.append(backend.install(specs, True, params.lock_timeout, purge=tuple(p.name for p in purge)))
        before: dict[str, str | None] = {p.name: p.version for p in purge}
        if want.stream and stream != want.stream:
            before[STREAM_KEY] = stream
        return Change("; ".join(parts), ops, before=before or None, after={n: version for n in missing})

    def batch_ops(self, params: DriverStackParams, changes: list[Change]) -> list[Op] | None:
        """Its ops join other package tasks' transaction, unless they switch a dnf module stream:
        that goes alone, so that apply() can switch it back when the transaction fails."""
        if any(isinstance(c.before, dict) and STREAM_KEY in c.before for c in changes):
            return None
        return super().batch_ops(params, changes)

    def apply(self, ctx: ApplyContext, params: DriverStackParams, changes: list[Change]) -> None:
        """The ops in order; when the package transaction fails after a dnf stream switch, the old
        stream is enabled again, so the host is left as it was (its packages never changed)."""
        ops = [op for change in changes for op in change.ops]
        try:
            apply_ops(ctx, ops, params.lock_timeout)
        except TaskError:
            old = next((c.before[STREAM_KEY] for c in changes if isinstance(c.before, dict) and STREAM_KEY in c.before),
                       False)
            if old is not False:
                restore = [run(["dnf", "-y", "-q", "module", "reset", "nvidia-driver"], timeout=600)]
                if old:
                    restore.append(run(["dnf", "-y", "-q", "module", "enable", f"nvidia-driver:{old}"], timeout=600))
                ctx.execute(restore)
            raise
