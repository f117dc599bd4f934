"""The rest of an EL repository: the OS packages a node starts with, DKMS, CUDA, the toolkit.

The node runs the machine's (Debian) programs, so the OS packages here carry only what the rpm
database of a Rocky Linux 9.4 or 10.0 host says (names, versions, provides such as ``/bin/sh``
that scriptlets need) plus ``/etc/os-release`` and ``/etc/redhat-release``; the image installs
them with dnf, so ``rpm -q kernel-core bash`` answers as on a real host. CUDA and the container
toolkit are non-modular, as in NVIDIA's repository, each at two versions so that an unlocked
``dnf install cuda`` would move. Every builder takes the EL major version (``"9"``, ``"10"``).
Runs on the machine (``repo_rpm``).
"""
from __future__ import annotations

import json

from gpuconf_lab.sim.catalog import EL_KERNELS
from gpuconf_lab.sim.elf import shared_object
from gpuconf_lab.sim.install import shim_text
from gpuconf_lab.sim.packages import _tool, cdi_refresh_units
from gpuconf_lab.sim.rpm_packages import Rpm

# Each release's /etc/os-release, verbatim
OS_RELEASES = {"9": """NAME="Rocky Linux"
VERSION="9.4 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.4"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Rocky Linux 9.4 (Blue Onyx)"
ANSI_COLOR="0;32"
LOGO="fedora-logo-icon"
CPE_NAME="cpe:/o:rocky:rocky:9::baseos"
HOME_URL="https://rockylinux.org/"
BUG_REPORT_URL="https://bugs.rockylinux.org/"
SUPPORT_END="2032-05-31"
ROCKY_SUPPORT_PRODUCT="Rocky-Linux-9"
ROCKY_SUPPORT_PRODUCT_VERSION="9.4"
REDHAT_SUPPORT_PRODUCT="Rocky Linux"
REDHAT_SUPPORT_PRODUCT_VERSION="9.4"
""", "10": """NAME="Rocky Linux"
VERSION="10.0 (Red Quartz)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="10.0"
PLATFORM_ID="platform:el10"
PRETTY_NAME="Rocky Linux 10.0 (Red Quartz)"
ANSI_COLOR="0;32"
LOGO="fedora-logo-icon"
CPE_NAME="cpe:/o:rocky:rocky:10::baseos"
HOME_URL="https://rockylinux.org/"
VENDOR_NAME="RESF"
VENDOR_URL="https://resf.org/"
BUG_REPORT_URL="https://bugs.rockylinux.org/"
SUPPORT_END="2035-05-31"
ROCKY_SUPPORT_PRODUCT="Rocky-Linux-10"
ROCKY_SUPPORT_PRODUCT_VERSION="10.0"
REDHAT_SUPPORT_PRODUCT="Rocky Linux"
REDHAT_SUPPORT_PRODUCT_VERSION="10.0"
"""}
RELEASE_NAMES = {"9": "9.4 (Blue Onyx)", "10": "10.0 (Red Quartz)"}
# EL major -> package -> (version, release) of a fresh install (rocky-release: the point release)
OS_VERSIONS = {
    "9": {"rocky-release": ("9.4", "1.7.el9"), "bash": ("5.1.8", "9.el9"), "coreutils": ("8.32", "35.el9"),
          "glibc": ("2.34", "100.el9_4.2"), "shadow-utils": ("4.9", "8.el9"), "systemd": ("252", "32.el9_4"),
          "kmod": ("28", "9.el9"), "dracut": ("057", "53.git20240104.el9"), "grubby": ("8.40", "64.el9"),
          "grub2-tools": ("2.06", "80.el9_4"), "dnf": ("4.14.0", "9.el9"),
          "python3-dnf-plugin-versionlock": ("4.3.0", "13.el9"), "openssh-server": ("8.7p1", "38.el9_4.1"),
          "sudo": ("1.9.5p2", "10.el9_3"), "make": ("4.3", "8.el9")},
    "10": {"rocky-release": ("10.0", "1.6.el10"), "bash": ("5.2.26", "6.el10"), "coreutils": ("9.5", "6.el10"),
           "glibc": ("2.39", "37.el10"), "shadow-utils": ("4.15.0", "5.el10"), "systemd": ("257", "9.el10_0.1"),
           "kmod": ("31", "11.el10"), "dracut": ("105", "4.el10_0"), "grubby": ("8.40", "76.el10"),
           "grub2-tools": ("2.12", "15.el10_0"), "dnf": ("4.20.0", "14.el10"),
           "python3-dnf-plugin-versionlock": ("4.7.0", "9.el10"), "openssh-server": ("9.9p1", "7.el10_0"),
           "sudo": ("1.9.15", "8.p5.el10"), "make": ("4.4.1", "9.el10")},
}
# toolkit package -> [(rpm version, nvcc version, cudart version)]
TOOLKITS = {"12-8": [("12.8.1", "12.8.93", "12.8.90")], "13-0": [("13.0.2", "13.0.88", "13.0.96")],
            "13-1": [("13.1.0", "13.1.80", "13.1.80")]}   # newer than the playbooks' 13.0: what a lock must stop
CONTAINER_TOOLKIT = ("1.17.8", "1.18.2", "1.20.0")


def system(name: str, version: str, release: str, summary: str, provides=(), **extra) -> Rpm:
    return Rpm(name, version, summary, release=release, epoch=extra.pop("epoch", None),
               license=extra.pop("license", "GPLv2+"), provides=list(provides), **extra)


def os_package(el: str, name: str, summary: str, provides=(), **extra) -> Rpm:
    """One OS package at the version a fresh EL `el` host has."""
    version, release = OS_VERSIONS[el][name]
    return system(name, version, release, summary, provides, **extra)


def kernel_rpms(kver: str) -> list[Rpm]:
    """kernel, kernel-core, kernel-modules and kernel-devel of one EL kernel release (the files
    are the simulator's, written by ``kernels install``)."""
    version, _, rest = kver.partition("-")
    release = rest.rsplit(".", 1)[0]
    return [system(name, version, release, summary, provides=[f"{name}-uname-r = {kver}"],
                   requires=requires)
            for name, summary, requires in (
                ("kernel-core", "The Linux kernel", []),
                ("kernel-modules", "kernel modules to match the core kernel", [f"kernel-core-uname-r = {kver}"]),
                ("kernel", f"The Linux kernel, based on version {version}, heavily modified with backports",
                 [f"kernel-core-uname-r = {kver}", f"kernel-modules-uname-r = {kver}"]),
                ("kernel-devel", "Development package for building kernel modules to match the kernel", []))]


def base_packages(el: str = "9") -> list[Rpm]:
    """What a fresh Rocky Linux 9.4 or 10.0 node has installed, as far as gpuconf asks rpm."""
    point, name = RELEASE_NAMES[el].split(" ", 1)
    release_files = {"/usr/lib/os-release": (OS_RELEASES[el], 0o644),
                     "/etc/rocky-release": (f"Rocky Linux release {point} {name}\n", 0o644),
                     "/etc/system-release-cpe": (f"cpe:/o:rocky:rocky:{el}::baseos\n", 0o644)}
    release_links = {"/etc/os-release": "../usr/lib/os-release", "/etc/redhat-release": "rocky-release",
                     "/etc/system-release": "rocky-release"}
    return [
        os_package(el, "rocky-release", "Rocky Linux release files", arch="noarch", license="BSD-3-Clause",
                   provides=[f"system-release = {point}", f"system-release(releasever) = {el}",
                             f"redhat-release = {point}", f"centos-release = {point}", f"base-module(platform:el{el})"],
                   files=release_files, symlinks=release_links),
        os_package(el, "bash", "The GNU Bourne Again shell", provides=["/bin/sh", "/bin/bash", "/usr/bin/sh"]),
        os_package(el, "coreutils", "A set of basic GNU tools commonly used in shell scripts"),
        os_package(el, "glibc", "The GNU libc libraries", provides=["/sbin/ldconfig"]),
        os_package(el, "shadow-utils", "Utilities for managing accounts and shadow password files",
                   epoch=2, provides=["/usr/sbin/useradd", "/usr/sbin/groupadd"]),
        os_package(el, "systemd", "System and Service Manager", provides=["/usr/bin/systemctl"]),
        os_package(el, "kmod", "Linux kernel module management utilities"),
        os_package(el, "dracut", "Initramfs generator using udev"),
        os_package(el, "grubby", "Command line tool for updating BootLoaderSpec files", provides=["/usr/sbin/grubby"]),
        os_package(el, "grub2-tools", "Support tools for GRUB.", epoch=1),
        os_package(el, "dnf", "Package manager", arch="noarch"),
        os_package(el, "python3-dnf-plugin-versionlock", "Version Lock Plugin for DNF", arch="noarch"),
        os_package(el, "openssh-server", "An open source SSH server daemon", license="BSD"),
        os_package(el, "sudo", "Allows restricted root access for specified users", license="ISC"),
        *kernel_rpms(EL_KERNELS[el][0]),
    ]


def dkms(el: str) -> Rpm:
    return Rpm("dkms", "3.0.10", "Dynamic Kernel Module Support Framework", release=f"1.el{el}", epoch=None,
               arch="noarch", license="GPL-2.0-or-later", requires=["kernel-devel", "make"],
               files={"/usr/sbin/dkms": _tool("dkms"),
                      "/etc/dkms/framework.conf": ("## DKMS configuration\n# sign_tool=\"/etc/dkms/sign_helper.sh\"\n",
                                                   0o644)},
               config=["/etc/dkms/framework.conf"])


def make(el: str) -> Rpm:
    return os_package(el, "make", "A GNU tool which simplifies the build process for users", epoch=1)


def cuda_packages() -> list[Rpm]:
    packages = []
    for short, releases in TOOLKITS.items():
        major, minor = short.split("-")
        base = f"/usr/local/cuda-{major}.{minor}"
        for version, nvcc_version, cudart in releases:
            version_json = json.dumps({"cuda": {"name": "CUDA SDK", "version": version},
                                       "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": cudart},
                                       "cuda_nvcc": {"name": "CUDA NVCC", "version": nvcc_version}}, indent=3)
            priority = int(major) * 10 + int(minor)
            post = (f"update-alternatives --install /usr/local/cuda cuda {base} {priority}\n"
                    f"update-alternatives --install /usr/local/cuda-{major} cuda-{major} {base} {priority}\n")
            preun = ('if [ "$1" -eq 0 ]; then\n'
                     f"  update-alternatives --remove cuda {base}\n"
                     f"  update-alternatives --remove cuda-{major} {base}\nfi\n")
            packages.append(Rpm(
                f"cuda-toolkit-{short}", version, f"CUDA Toolkit {major}.{minor} meta-package", release="1", epoch=None,
                description=f"nvcc and the CUDA runtime under {base}.",
                files={f"{base}/bin/nvcc": (shim_text("nvcc", pass_self=True), 0o755),
                       f"{base}/version.json": (version_json + "\n", 0o644),
                       f"{base}/lib64/libcudart.so.{cudart}": (shared_object(f"libcudart.so.{major}"), 0o755)},
                symlinks={f"{base}/lib64/libcudart.so.{major}": f"libcudart.so.{cudart}",
                          f"{base}/lib64/libcudart.so": f"libcudart.so.{major}"},
                scripts={"post": post, "preun": preun}))
            packages.append(Rpm("cuda", version, "CUDA meta-package", release="1", epoch=None,
                                description="Installs the newest CUDA Toolkit.",
                                requires=[f"cuda-toolkit-{short} >= {version}"]))
    return packages


def container_toolkit() -> list[Rpm]:
    packages = []
    for version in CONTAINER_TOOLKIT:
        packages.append(Rpm(
            "nvidia-container-toolkit", version, "NVIDIA Container Toolkit", release="1", epoch=None,
            license="Apache-2.0", description="nvidia-ctk configures container runtimes for NVIDIA GPUs.",
            files={"/usr/bin/nvidia-ctk": _tool("nvctk", "nvidia-ctk", version),
                   "/usr/bin/nvidia-container-runtime": _tool("nvctk", "nvidia-container-runtime", version),
                   "/etc/nvidia-container-runtime/config.toml": ('#accept-nvidia-visible-devices-as-volume-mounts = false\n'
                                                                '[nvidia-container-runtime]\nlog-level = "info"\n', 0o644),
                   **cdi_refresh_units(version, "/usr/lib/systemd/system")},
            config=["/etc/nvidia-container-runtime/config.toml",
                    *[path for path in cdi_refresh_units(version) if path.startswith("/etc/")]]))
    return packages


def from_debian(name: str, deb_name: str, version: str, release: str, summary: str, post: str = "",
                deb_version: str | None = None, requires: tuple[str, ...] = ()) -> Rpm:
    """An EL package with the files of the lab's Debian package of the same program (docker-ce
    from docker.io, opensm): the same simulators and units, no Debian maintainer scripts. As
    on RHEL, the unit is left disabled (the preset policy); enabling it is the playbook's job."""
    debian = next(p for p in all_debian() if p.name == deb_name and deb_version in (None, p.version))
    return Rpm(name, version, summary, release=release, epoch=None, license="ASL 2.0",
               files=dict(debian.files), symlinks=dict(debian.symlinks), config=list(debian.conffiles),
               requires=list(requires),
               scripts={"post": post + "systemctl --system daemon-reload >/dev/null 2>&1 || :\n"})


def all_debian() -> list:
    from gpuconf_lab.sim.packages import dcgm_packages, infiniband_packages, other_packages
    return infiniband_packages() + other_packages() + dcgm_packages()


def services(el: str) -> list[Rpm]:
    """Docker's own repository's docker-ce, and opensm from the RHEL InfiniBand stack."""
    return [from_debian("docker-ce", "docker.io", "27.3.1", f"1.el{el}", "The open-source application container "
                        "engine", post="mkdir -p /etc/docker\n"),
            from_debian("opensm", "opensm", "3.3.24", f"3.el{el}", "OpenIB InfiniBand Subnet Manager and management "
                        "utilities")] + dcgm()


def dcgm() -> list[Rpm]:
    """DCGM 4 from NVIDIA's CUDA repository for RHEL 9: the core and one package per CUDA major."""
    from gpuconf_lab.sim.packages import DCGM_VERSIONS
    packages = []
    for deb_version in DCGM_VERSIONS:
        version, release = deb_version.split("-")
        core = "datacenter-gpu-manager-4-core"
        packages.append(from_debian(core, core, version, release, "NVIDIA Datacenter GPU Management Tools (core)",
                                    deb_version=deb_version))
        for major in ("12", "13"):
            name = f"datacenter-gpu-manager-4-cuda{major}"
            packages.append(from_debian(name, name, version, release, f"DCGM diagnostics for CUDA {major}",
                                        deb_version=deb_version, requires=(f"{core} = {version}-{release}",)))
    return packages


def repo_packages(el: str = "9") -> list[Rpm]:
    """Everything the repository serves, but the NVIDIA driver (``rpm_packages.driver_packages``)."""
    return base_packages(el) + [dkms(el), make(el)] + cuda_packages() + container_toolkit() + services(el)


def upgrade_kernel_packages(el: str = "9") -> list[Rpm]:
    """Kept out of the repository: the ``kernel-upgrade`` fault registers them with rpm."""
    return kernel_rpms(EL_KERNELS[el][1])
