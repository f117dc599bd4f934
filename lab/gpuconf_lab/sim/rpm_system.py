"""The rest of the EL 9 repository: the OS packages a node starts with, DKMS, CUDA, the toolkit.

The node runs the machine's (Debian) programs, so the OS packages here carry only what the rpm
database of a Rocky Linux 9 host says (names, versions, provides such as ``/bin/sh`` that
scriptlets need) plus ``/etc/os-release`` and ``/etc/redhat-release``; the image installs them
with dnf, so ``rpm -q kernel-core bash`` answers as on a real host. CUDA and the container
toolkit are non-modular, as in NVIDIA's repository, each at two versions so that an unlocked
``dnf install cuda`` would move. Runs on the machine (``repo_rpm``).
"""
from __future__ import annotations

import json

from gpuconf_lab.sim.catalog import EL_DEFAULT_KERNEL as DEFAULT_KERNEL
from gpuconf_lab.sim.catalog import EL_UPGRADE_KERNEL as UPGRADE_KERNEL
from gpuconf_lab.sim.elf import shared_object
from gpuconf_lab.sim.install import shim_text
from gpuconf_lab.sim.packages import _tool
from gpuconf_lab.sim.rpm_packages import Rpm

OS_RELEASE = """NAME="Rocky Linux"
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
"""
# toolkit package -> [(rpm version, nvcc version, cudart version)]
TOOLKITS = {"12-8": [("12.8.1", "12.8.93", "12.8.90")], "13-0": [("13.0.2", "13.0.88", "13.0.96")],
            "13-1": [("13.1.0", "13.1.80", "13.1.80")]}   # newer than the playbooks' 13.0: what a lock must stop
CONTAINER_TOOLKIT = ("1.17.8", "1.18.2", "1.20.0")


def system(name: str, version: str, release: str, summary: str, provides=(), **extra) -> Rpm:
    return Rpm(name, version, summary, release=release, epoch=extra.pop("epoch", None),
               license=extra.pop("license", "GPLv2+"), provides=list(provides), **extra)


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
                ("kernel", "The Linux kernel, based on version 5.14.0, heavily modified with backports",
                 [f"kernel-core-uname-r = {kver}", f"kernel-modules-uname-r = {kver}"]),
                ("kernel-devel", "Development package for building kernel modules to match the kernel", []))]


def base_packages() -> list[Rpm]:
    """What a fresh Rocky Linux 9.4 node has installed, as far as gpuconf asks rpm."""
    release_files = {"/usr/lib/os-release": (OS_RELEASE, 0o644),
                     "/etc/rocky-release": ("Rocky Linux release 9.4 (Blue Onyx)\n", 0o644),
                     "/etc/system-release-cpe": ("cpe:/o:rocky:rocky:9::baseos\n", 0o644)}
    release_links = {"/etc/os-release": "../usr/lib/os-release", "/etc/redhat-release": "rocky-release",
                     "/etc/system-release": "rocky-release"}
    return [
        system("rocky-release", "9.4", "1.7.el9", "Rocky Linux release files", arch="noarch", license="BSD-3-Clause",
               provides=["system-release = 9.4", "system-release(releasever) = 9", "redhat-release = 9.4",
                         "centos-release = 9.4", "base-module(platform:el9)"],
               files=release_files, symlinks=release_links),
        system("bash", "5.1.8", "9.el9", "The GNU Bourne Again shell", provides=["/bin/sh", "/bin/bash", "/usr/bin/sh"]),
        system("coreutils", "8.32", "35.el9", "A set of basic GNU tools commonly used in shell scripts"),
        system("glibc", "2.34", "100.el9_4.2", "The GNU libc libraries", provides=["/sbin/ldconfig"]),
        system("shadow-utils", "4.9", "8.el9", "Utilities for managing accounts and shadow password files",
               epoch=2, provides=["/usr/sbin/useradd", "/usr/sbin/groupadd"]),
        system("systemd", "252", "32.el9_4", "System and Service Manager", provides=["/usr/bin/systemctl"]),
        system("kmod", "28", "9.el9", "Linux kernel module management utilities"),
        system("dracut", "057", "53.git20240104.el9", "Initramfs generator using udev"),
        system("grubby", "8.40", "64.el9", "Command line tool for updating BootLoaderSpec files",
               provides=["/usr/sbin/grubby"]),
        system("grub2-tools", "2.06", "80.el9_4", "Support tools for GRUB.", epoch=1),
        system("dnf", "4.14.0", "9.el9", "Package manager", arch="noarch"),
        system("python3-dnf-plugin-versionlock", "4.3.0", "13.el9", "Version Lock Plugin for DNF", arch="noarch"),
        system("openssh-server", "8.7p1", "38.el9_4.1", "An open source SSH server daemon", license="BSD"),
        system("sudo", "1.9.5p2", "10.el9_3", "Allows restricted root access for specified users", license="ISC"),
        *kernel_rpms(DEFAULT_KERNEL),
    ]


def dkms() -> Rpm:
    return Rpm("dkms", "3.0.10", "Dynamic Kernel Module Support Framework", release="1.el9", epoch=None,
               arch="noarch", license="GPL-2.0-or-later", requires=["kernel-devel", "make"],
               files={"/usr/sbin/dkms": _tool("dkms"),
                      "/etc/dkms/framework.conf": ("## DKMS configuration\n# sign_tool=\"/etc/dkms/sign_helper.sh\"\n",
                                                   0o644)},
               config=["/etc/dkms/framework.conf"])


def make() -> Rpm:
    return system("make", "4.3", "8.el9", "A GNU tool which simplifies the build process for users", epoch=1)


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
                                                                '[nvidia-container-runtime]\nlog-level = "info"\n', 0o644)},
            config=["/etc/nvidia-container-runtime/config.toml"]))
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


def services() -> list[Rpm]:
    """Docker's own repository's docker-ce, and opensm from the RHEL InfiniBand stack."""
    return [from_debian("docker-ce", "docker.io", "27.3.1", "1.el9", "The open-source application container engine",
                        post="mkdir -p /etc/docker\n"),
            from_debian("opensm", "opensm", "3.3.24", "3.el9", "OpenIB InfiniBand Subnet Manager and management "
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


def repo_packages() -> list[Rpm]:
    """Everything the repository serves, but the NVIDIA driver (``rpm_packages.driver_packages``)."""
    return base_packages() + [dkms(), make()] + cuda_packages() + container_toolkit() + services()


def upgrade_kernel_packages() -> list[Rpm]:
    """Kept out of the repository: the ``kernel-upgrade`` fault registers them with rpm."""
    return kernel_rpms(UPGRADE_KERNEL)
