"""Which packages make up one driver stack, by repository naming, branch, flavour and module source.

Debian/Ubuntu (NVIDIA's CUDA repository): up to branch 580 every package carries the branch in
its name (`nvidia-dkms-580-open`); from 590 on the names are unversioned (`nvidia-dkms-open`) and
a pinning package (`nvidia-driver-pinning-595`) holds them on the branch. Precompiled signed
modules are Canonical's `linux-modules-nvidia-<branch>[-open]-<kernel release>`, one per kernel.
RHEL family (dnf): up to EL 9 the driver is the module `nvidia-driver`, stream `<branch>-open`
(open, DKMS) or `<branch>-dkms` (proprietary), with epoch-3 package versions `3:<version>-1.el<N>`.
EL 10 has no driver module streams: NVIDIA's guide installs `nvidia-open` with plain dnf and
holds the branch with `dnf versionlock` (docs.nvidia.com/datacenter/tesla/driver-installation-guide/
620/kernel-modules.html, Table 5), so the stack is the same packages plus `nvidia-open`, each
installed at the exact version and versionlocked, with no stream.
Sources: ../shared/reference/nvidia-stack-2026.md sections 2 and 3. The host's platform picks the
naming (DebianNames or RedHatNames, as testinfra picks DebianPackage or RpmPackage).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuconf.driver.catalog import Flavour

ModuleSource = Literal["dkms", "precompiled"]
UNVERSIONED_FROM = 590
OPEN_META_SINCE = 560   # NVIDIA's `nvidia-open` metapackage (RHEL family): R560 made the open modules the default

# a companion -> (Debian name with branch suffix up to 580, unversioned Debian name, RHEL name)
COMPANIONS = {
    "persistenced": ("nvidia-persistenced", "nvidia-persistenced", "nvidia-persistenced"),
    "fabricmanager": ("nvidia-fabricmanager-{branch}", "nvidia-fabricmanager", "nvidia-fabric-manager"),
    "nscq": ("libnvidia-nscq-{branch}", "libnvidia-nscq", "libnvidia-nscq"),
    # NVLink5 (HGX B200/B300): the NVLink subnet manager and the NVSwitch device-management
    # library it and fabric manager use, released with the driver (reference section 5)
    "nvlsm": ("nvlsm", "nvlsm", "nvlsm"),
    "nvsdm": ("libnvsdm-{branch}", "libnvsdm", "libnvsdm"),
    # GB200/GB300 NVL72: the IMEX daemon, one package name on every branch (reference section 5)
    "imex": ("nvidia-imex", "nvidia-imex", "nvidia-imex"),
}


@dataclass(frozen=True)
class Stack:
    """The packages of one driver stack on one host, and the version each must have."""

    naming: Naming
    branch: int
    version: str              # upstream, e.g. 580.95.05
    flavour: Flavour
    modules: ModuleSource
    packages: tuple[str, ...]  # exact-version packages, in install order
    pinning: str | None = None  # Debian >= 590: the branch-lock package (its own version)
    stream: str | None = None   # RHEL: the module stream to enable

    def package_version(self) -> str:
        """The version the package manager reports for every package of the stack."""
        return self.naming.package_version(self.version)

    def spec(self, name: str) -> str:
        """`name=version` (apt) or `name-3:version-1.elN` (dnf): the exact install argument."""
        return self.naming.spec(name, self.package_version())


class Naming:
    """How one family of NVIDIA's repositories names the driver's packages and versions: one
    subclass per family, picked once per host by its platform (gpuconf/facts/platform.py)."""

    # Canonical's signed precompiled modules (linux-modules-nvidia-*): Ubuntu's archive only
    precompiled_modules = False
    # what makes DKMS-built modules acceptable under Secure Boot without a MOK key
    secure_boot_remedy = "install NVIDIA's signed precompiled kmod packages"

    def package_version(self, version: str) -> str:
        raise NotImplementedError

    def spec(self, name: str, package_version: str) -> str:
        raise NotImplementedError

    def stack(self, branch: int, version: str, flavour: Flavour, modules: ModuleSource, kernels: list[str]) -> Stack:
        raise NotImplementedError

    def companion(self, name: str, branch: int) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class DebianNames(Naming):
    """NVIDIA's CUDA repository for Debian and Ubuntu: `580.95.05-1`, names with the branch up to 580."""

    precompiled_modules = True
    secure_boot_remedy = ("set nvidia_driver_modules: precompiled (Canonical's signed linux-modules-nvidia "
                          "packages)")

    def package_version(self, version: str) -> str:
        return f"{version}-1"

    def spec(self, name: str, package_version: str) -> str:
        return f"{name}={package_version}"

    def stack(self, branch: int, version: str, flavour: Flavour, modules: ModuleSource, kernels: list[str]) -> Stack:
        pinning = f"nvidia-driver-pinning-{branch}" if branch >= UNVERSIONED_FROM else None
        return Stack(self, branch, version, flavour, modules, debian_names(branch, flavour, modules, kernels),
                     pinning=pinning)

    def companion(self, name: str, branch: int) -> str:
        suffixed, plain, _ = COMPANIONS[name]
        return (suffixed if branch < UNVERSIONED_FROM else plain).format(branch=branch)


@dataclass(frozen=True)
class RedHatNames(Naming):
    """NVIDIA's CUDA repository for EL `el`: epoch-3 versions `3:580.95.05-1.el9`; with `streams`
    (EL 8 and 9) the driver is the module stream `<branch>-open` or `<branch>-dkms`, without (EL
    10) plain packages, `nvidia-open` among them for the open flavour, locked by version."""

    el: str = "9"
    streams: bool = True

    def package_version(self, version: str) -> str:
        return f"3:{version}-1.el{self.el}"

    def spec(self, name: str, package_version: str) -> str:
        return f"{name}-{package_version}"

    def stack(self, branch: int, version: str, flavour: Flavour, modules: ModuleSource, kernels: list[str]) -> Stack:
        kmod = "kmod-nvidia-open-dkms" if flavour == "open" else "kmod-nvidia-latest-dkms"
        packages = ("nvidia-kmod-common", kmod, "nvidia-driver-cuda-libs", "nvidia-driver", "nvidia-driver-cuda")
        if not self.streams:
            # NVIDIA's RHEL 10 entry point; its metapackage exists from R560 on
            meta = ("nvidia-open",) if flavour == "open" and branch >= OPEN_META_SINCE else ()
            return Stack(self, branch, version, flavour, modules, packages + meta)
        stream = f"{branch}-open" if flavour == "open" else f"{branch}-dkms"
        return Stack(self, branch, version, flavour, modules, packages, stream=stream)

    def companion(self, name: str, branch: int) -> str:
        return COMPANIONS[name][2]


def debian_names(branch: int, flavour: Flavour, modules: ModuleSource, kernels: list[str]) -> tuple[str, ...]:
    open_suffix = "-open" if flavour == "open" else ""
    if branch < UNVERSIONED_FROM:
        common = [f"nvidia-kernel-common-{branch}"]
        user = [f"libnvidia-compute-{branch}", f"nvidia-utils-{branch}"]
        dkms = [f"nvidia-dkms-{branch}{open_suffix}"]
    else:
        common = ["nvidia-kernel-common"]
        user = ["libnvidia-compute", "nvidia-utils"]
        dkms = [f"nvidia-dkms{open_suffix}"]
    if modules == "precompiled":
        kernel_packages = [f"linux-modules-nvidia-{branch}{open_suffix}-{kernel}" for kernel in kernels]
    else:
        kernel_packages = dkms
    return tuple(common + kernel_packages + user)


def is_driver_package(name: str) -> bool:
    """A package of some NVIDIA driver stack (any branch, flavour or family), the set a branch or
    flavour switch replaces. Not the container toolkit, CUDA, DCGM or the repository keys."""
    prefixes = ("nvidia-driver", "nvidia-dkms", "nvidia-utils", "nvidia-kernel-common", "nvidia-kernel-source",
                "nvidia-compute-utils", "libnvidia-compute", "linux-modules-nvidia-", "nvidia-open",
                "nvidia-kmod-common", "kmod-nvidia-", "nvidia-fabricmanager", "nvidia-fabric-manager",
                "libnvidia-nscq", "nvidia-persistenced", "nvidia-firmware-", "nvlsm", "libnvsdm", "nvidia-imex")
    return name.startswith(prefixes) and not name.startswith("nvidia-driver-pinning-")
