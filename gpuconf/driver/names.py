"""Which packages make up one driver stack, by OS family, branch, flavour and module source.

Debian/Ubuntu (NVIDIA's CUDA repository): up to branch 580 every package carries the branch in
its name (`nvidia-dkms-580-open`); from 590 on the names are unversioned (`nvidia-dkms-open`) and
a pinning package (`nvidia-driver-pinning-595`) holds them on the branch. Precompiled signed
modules are Canonical's `linux-modules-nvidia-<branch>[-open]-<kernel release>`, one per kernel.
RHEL family (dnf): the driver is the module `nvidia-driver`, stream `<branch>-open` (open, DKMS)
or `<branch>-dkms` (proprietary), with epoch-3 package versions `3:<version>-1.el<N>`.
Sources: ../shared/reference/nvidia-stack-2026.md sections 2 and 3.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuconf.driver.catalog import Flavour

Family = Literal["Debian", "RedHat"]
ModuleSource = Literal["dkms", "precompiled"]
UNVERSIONED_FROM = 590

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

    family: Family
    branch: int
    version: str              # upstream, e.g. 580.95.05
    flavour: Flavour
    modules: ModuleSource
    packages: tuple[str, ...]  # exact-version packages, in install order
    pinning: str | None = None  # Debian >= 590: the branch-lock package (its own version)
    stream: str | None = None   # RHEL: the module stream to enable
    el: str = "9"

    def package_version(self) -> str:
        """The version the package manager reports for every package of the stack."""
        return package_version(self.family, self.version, self.el)

    def spec(self, name: str) -> str:
        """`name=version` (apt) or `name-3:version-1.elN` (dnf): the exact install argument."""
        if self.family == "Debian":
            return f"{name}={self.package_version()}"
        return f"{name}-{self.package_version()}"


def package_version(family: Family, version: str, el: str = "9") -> str:
    """`580.95.05` as apt (`580.95.05-1`) or dnf (`3:580.95.05-1.el9`) reports a driver package."""
    return f"{version}-1" if family == "Debian" else f"3:{version}-1.el{el}"


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


def stack(family: Family, branch: int, version: str, flavour: Flavour, modules: ModuleSource,
          kernels: list[str], el: str = "9") -> Stack:
    if family == "Debian":
        pinning = f"nvidia-driver-pinning-{branch}" if branch >= UNVERSIONED_FROM else None
        return Stack(family, branch, version, flavour, modules, debian_names(branch, flavour, modules, kernels),
                     pinning=pinning)
    kmod = "kmod-nvidia-open-dkms" if flavour == "open" else "kmod-nvidia-latest-dkms"
    stream = f"{branch}-open" if flavour == "open" else f"{branch}-dkms"
    return Stack(family, branch, version, flavour, modules,
                 ("nvidia-kmod-common", kmod, "nvidia-driver-cuda-libs", "nvidia-driver", "nvidia-driver-cuda"),
                 stream=stream, el=el)


def companion(family: Family, name: str, branch: int) -> str:
    debian_suffixed, debian_plain, redhat = COMPANIONS[name]
    if family == "RedHat":
        return redhat
    return (debian_suffixed if branch < UNVERSIONED_FROM else debian_plain).format(branch=branch)


def is_driver_package(name: str) -> bool:
    """A package of some NVIDIA driver stack (any branch, flavour or family), the set a branch or
    flavour switch replaces. Not the container toolkit, CUDA, DCGM or the repository keys."""
    prefixes = ("nvidia-driver", "nvidia-dkms", "nvidia-utils", "nvidia-kernel-common", "nvidia-kernel-source",
                "nvidia-compute-utils", "libnvidia-compute", "linux-modules-nvidia-", "nvidia-open",
                "nvidia-kmod-common", "kmod-nvidia-", "nvidia-fabricmanager", "nvidia-fabric-manager",
                "libnvidia-nscq", "nvidia-persistenced", "nvidia-firmware-", "nvlsm", "libnvsdm", "nvidia-imex")
    return name.startswith(prefixes) and not name.startswith("nvidia-driver-pinning-")
