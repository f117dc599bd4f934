"""The simulated kernel's module catalog and the fake ``.ko`` file format.

A module is a small text file under ``/lib/modules/<release>/`` that carries what ``modinfo``
and the loader need (name, version, vermagic, dependencies, size, which hardware it drives,
license, and the signature fields of a signed module). The in-tree modules of a Debian 12
kernel are written by ``install_image``; the NVIDIA ones only appear when the simulated DKMS
builds them (unsigned: the simulated headers have no ``scripts/sign-file``) or when a
precompiled ``linux-modules-nvidia-*`` package ships them (signed by Canonical's kernel key).
Open modules (built from ``kernel-open/``) carry ``license=Dual MIT/GPL``, proprietary ones
``license=NVIDIA``, as ``modinfo -F license nvidia`` tells them apart on a real host.

Stdlib only and no sibling imports: the installer on the machine imports this file too.
"""
from __future__ import annotations

import re

KO_MAGIC = "GPUCONF-LAB-KMOD 1"

# Debian's kernel package version for each release the lab knows; others get a guess.
KERNEL_BUILDS = {
    "6.1.0-18-amd64": ("6.1.76-1", "2024-02-01"),
    "6.1.0-20-amd64": ("6.1.85-1", "2024-04-11"),
    "6.1.0-21-amd64": ("6.1.90-1", "2024-05-03"),
    "6.1.0-23-amd64": ("6.1.99-1", "2024-07-15"),
    "6.1.0-25-amd64": ("6.1.106-3", "2024-08-26"),
}


# EL kernels by major version: (the image boots, the kernel-upgrade fault installs). EL 9 is
# Rocky Linux 9.4's; EL 10 is Rocky Linux 10.0's GA kernel and its first errata update.
EL_KERNELS = {"9": ("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.16.1.el9_4.x86_64"),
              "10": ("6.12.0-55.12.1.el10_0.x86_64", "6.12.0-55.14.1.el10_0.x86_64")}
EL_DEFAULT_KERNEL, EL_UPGRADE_KERNEL = EL_KERNELS["9"]
# The EL images' BLS entries carry the machine-id of the "host that built the image", as cloud
# images' do (a fixed, made-up id); each node has its own /etc/machine-id.
EL_IMAGE_MACHINE_ID = "4c1e6d0a8f0b8e2f6f0b5a2d33e0c7c1"
# release -> build date as /proc/version prints it
EL_KERNEL_BUILDS = {
    "5.14.0-427.13.1.el9_4.x86_64": "Wed May 1 19:11:28 UTC 2024",
    "5.14.0-427.16.1.el9_4.x86_64": "Thu May 9 18:15:59 UTC 2024",
    "6.12.0-55.12.1.el10_0.x86_64": "Fri May 30 12:44:05 UTC 2025",
    "6.12.0-55.14.1.el10_0.x86_64": "Tue Jun 10 14:09:31 UTC 2025",
}
# EL major -> the compilers /proc/version names (the distribution's gcc and binutils)
EL_TOOLCHAINS = {"9": "gcc (GCC) 11.4.1 20231218 (Red Hat 11.4.1-3), GNU ld version 2.35.2-43.el9",
                 "10": "gcc (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7), GNU ld version 2.41-53.el10"}


def el_major(release: str) -> str | None:
    """The EL major version a kernel release was built for (9 for ``...el9_4.x86_64``), or None."""
    match = re.search(r"\.el(\d+)", release)
    return match[1] if match else None


def is_el_release(release: str) -> bool:
    return el_major(release) is not None


def kernel_build(release: str) -> tuple[str, str]:
    """(Debian package version, build date) of a kernel release."""
    return KERNEL_BUILDS.get(release, ("6.1.0-1", "2024-01-01"))


def proc_version(release: str) -> str:
    """The text of ``/proc/version`` for a Debian 12 (or a Rocky Linux 9 or 10) kernel."""
    major = el_major(release)
    if major:
        return (f"Linux version {release} (mockbuild@iad1-prod-build001.bld.equ.rockylinux.org) "
                f"({EL_TOOLCHAINS.get(major, EL_TOOLCHAINS['9'])}) {uname_version(release)}\n")
    version, date = kernel_build(release)
    return (f"Linux version {release} (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) "
            f"12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian {version} "
            f"({date})\n")


def uname_version(release: str) -> str:
    if is_el_release(release):
        return f"#1 SMP PREEMPT_DYNAMIC {EL_KERNEL_BUILDS.get(release, 'Mon Jan 1 00:00:00 UTC 2024')}"
    version, date = kernel_build(release)
    return f"#1 SMP PREEMPT_DYNAMIC Debian {version} ({date})"


def vermagic(release: str) -> str:
    return f"{release} SMP preempt mod_unload modversions "


# name -> (path under kernel/, size, depends, description, hardware it needs)
# "gpu": an NVIDIA GPU must be present; "hca": a ConnectX HCA must be present.
IN_TREE = {
    "drm": ("drivers/gpu/drm/drm.ko", 614400, "", "DRM shared core routines", None),
    "drm_kms_helper": ("drivers/gpu/drm/drm_kms_helper.ko", 212992, "drm",
                       "DRM KMS helper", None),
    "drm_display_helper": ("drivers/gpu/drm/display/drm_display_helper.ko", 184320,
                           "drm,drm_kms_helper", "DRM display adapter helper", None),
    "ttm": ("drivers/gpu/drm/ttm/ttm.ko", 94208, "drm", "TTM memory manager subsystem", None),
    "drm_ttm_helper": ("drivers/gpu/drm/drm_ttm_helper.ko", 16384, "ttm,drm_kms_helper,drm",
                       "DRM gem ttm helpers", None),
    "i2c_algo_bit": ("drivers/i2c/algos/i2c-algo-bit.ko", 16384, "", "I2C-Bus bit-banging algorithm", None),
    "cec": ("drivers/media/cec/core/cec.ko", 61440, "", "Device node registration for cec drivers", None),
    "wmi": ("drivers/platform/x86/wmi.ko", 36864, "", "ACPI-WMI Mapping Driver", None),
    "mxm_wmi": ("drivers/platform/x86/mxm-wmi.ko", 16384, "wmi", "MXM WMI Driver", None),
    "video": ("drivers/acpi/video.ko", 65536, "wmi", "ACPI Video Driver", None),
    "nouveau": ("drivers/gpu/drm/nouveau/nouveau.ko", 2846720,
                "drm_display_helper,drm_ttm_helper,ttm,drm_kms_helper,i2c_algo_bit,cec,drm,mxm_wmi,video,wmi",
                "nVidia Riva/TNT/GeForce/Quadro/Tesla/Tegra K1+", "gpu"),
    "mlxfw": ("drivers/net/ethernet/mellanox/mlxfw/mlxfw.ko", 36864, "", "Mellanox firmware flash lib", None),
    "psample": ("net/psample/psample.ko", 20480, "", "netlink channel for packet sampling", None),
    "mlx5_core": ("drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko", 2080768, "mlxfw,psample",
                  "Mellanox 5th generation network adapters (ConnectX series) core driver", "hca"),
    "ib_core": ("drivers/infiniband/core/ib_core.ko", 454656, "", "core kernel InfiniBand API", "hca"),
    "ib_uverbs": ("drivers/infiniband/core/ib_uverbs.ko", 172032, "ib_core",
                  "InfiniBand userspace verbs access", "hca"),
    "ib_umad": ("drivers/infiniband/core/ib_umad.ko", 40960, "ib_core",
                "InfiniBand userspace MAD packet access", "hca"),
    "ib_cm": ("drivers/infiniband/core/ib_cm.ko", 135168, "ib_core", "InfiniBand CM", "hca"),
    "iw_cm": ("drivers/infiniband/core/iw_cm.ko", 61440, "ib_core", "iWARP CM", "hca"),
    "rdma_cm": ("drivers/infiniband/core/rdma_cm.ko", 135168, "ib_cm,iw_cm,ib_core",
                "Generic RDMA CM Agent", "hca"),
    "rdma_ucm": ("drivers/infiniband/core/rdma_ucm.ko", 32768, "rdma_cm,ib_uverbs,ib_core",
                 "RDMA Userspace Connection Manager Access", "hca"),
    "mlx5_ib": ("drivers/infiniband/hw/mlx5/mlx5_ib.ko", 446464, "ib_uverbs,ib_core,mlx5_core",
                "Mellanox 5th generation network adapters (ConnectX series) IB driver", "hca"),
    "ib_ipoib": ("drivers/infiniband/ulp/ipoib/ib_ipoib.ko", 139264, "ib_cm,ib_core",
                 "IP-over-InfiniBand net driver", "hca"),
    "loop": ("drivers/block/loop.ko", 32768, "", "Loopback device support", None),
    "overlay": ("fs/overlayfs/overlay.ko", 163840, "", "Overlay filesystem", None),
    "llc": ("net/llc/llc.ko", 16384, "", "", None),
    "stp": ("net/802/stp.ko", 16384, "llc", "", None),
    "bridge": ("net/bridge/bridge.ko", 311296, "stp,llc", "", None),
    "br_netfilter": ("net/bridge/br_netfilter.ko", 32768, "bridge", "Linux ethernet netfilter firewall bridge", None),
    "nf_conntrack": ("net/netfilter/nf_conntrack.ko", 176128, "", "", None),
    "x_tables": ("net/netfilter/x_tables.ko", 57344, "", "{ip,ip6,arp,eb}_tables backend module", None),
    "ip_tables": ("net/ipv4/netfilter/ip_tables.ko", 36864, "x_tables", "IPv4 packet filter", None),
}

# Modules the NVIDIA DKMS package builds: name -> (file, size, depends, description)
NVIDIA_DKMS = {
    "nvidia": ("nvidia.ko", 62111744, "", "NVIDIA kernel module"),
    "nvidia_modeset": ("nvidia-modeset.ko", 1290240, "nvidia", "NVIDIA modeset kernel module"),
    "nvidia_drm": ("nvidia-drm.ko", 90112, "nvidia_modeset,drm_kms_helper,drm", "NVIDIA DRM kernel module"),
    "nvidia_uvm": ("nvidia-uvm.ko", 1384448, "nvidia", "NVIDIA Unified Memory kernel module"),
    "nvidia_peermem": ("nvidia-peermem.ko", 16384, "nvidia,ib_core", "NVIDIA GPU memory plug-in"),
}

# Loaded by udev at boot when the driver can load, in this order.
NVIDIA_BOOT_MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm")

GPU_ALIAS = "pci:v000010DEd*sv*sd*bc03sc02i00*"
OPEN_LICENSE = "Dual MIT/GPL"
PROPRIETARY_LICENSE = "NVIDIA"
# What modinfo shows for a module signed by the key of Ubuntu's precompiled NVIDIA modules.
CANONICAL_SIGNATURE = {
    "sig_id": "PKCS#7",
    "signer": "Canonical Ltd. Kernel Module Signing",
    "sig_key": "4A:C2:BB:4C:58:7C:15:C1:9E:2A:31:8E:D4:20:6B:7A:0F:8E:5D:2B",
    "sig_hashalgo": "sha512",
    "signature": "30:65:02:31:00:C7:1E:0B:5A:9D:44:1F:2E:83:6A:D0:B9:17:42:E5:6C:"
                 "90:3B:AF:28:71:0D:E4:95:CC:3A:61:B2:08:F7:54:19",
}
NVIDIA_PARAMS = ("NVreg_EnableGpuFirmware:int", "NVreg_RegistryDwords:charp",
                 "NVreg_EnableStreamMemOPs:int", "NVreg_DeviceFileUID:int",
                 "NVreg_DeviceFileGID:int", "NVreg_DeviceFileMode:int")


def render_ko(fields: dict) -> str:
    """The text of a fake ``.ko`` file."""
    lines = [KO_MAGIC]
    for key, value in fields.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        lines.extend(f"{key}={item}" for item in values)
    return "\n".join(lines) + "\n"


def parse_ko(text: str) -> dict | None:
    """Fields of a fake ``.ko`` file (lists for repeated keys), or None if it is not one."""
    lines = text.splitlines()
    if not lines or lines[0] != KO_MAGIC:
        return None
    fields: dict = {"alias": [], "parm": [], "firmware": []}
    for line in lines[1:]:
        key, _, value = line.partition("=")
        if key in ("alias", "parm", "firmware"):
            fields[key].append(value)
        else:
            fields[key] = value
    return fields


def in_tree_ko(name: str, release: str) -> tuple[str, str]:
    """(path relative to /lib/modules/<release>, file text) of an in-tree module."""
    relpath, size, depends, description, hardware = IN_TREE[name]
    fields = {"name": name, "version": "", "vermagic": vermagic(release), "depends": depends,
              "size": size, "license": "GPL", "description": description, "intree": "Y",
              "hardware": hardware or ""}
    if name == "nouveau":
        fields["alias"] = [GPU_ALIAS]
        fields["parm"] = ["modeset:enable driver (default: auto, 0 = disabled, 1 = enabled, "
                          "2 = headless) (int)"]
    return "kernel/" + relpath, render_ko(fields)


def nvidia_ko(name: str, version: str, release: str, *, open_modules: bool = False,
              signed: bool = False) -> tuple[str, str]:
    """(file name, file text) of an NVIDIA module: DKMS-built (unsigned) or precompiled (signed)."""
    filename, size, depends, description = NVIDIA_DKMS[name]
    fields = {"name": name, "version": version, "vermagic": vermagic(release), "depends": depends,
              "size": size, "license": OPEN_LICENSE if open_modules else PROPRIETARY_LICENSE,
              "description": description, "intree": "", "hardware": "gpu" if name == "nvidia" else "",
              "supported": "external"}
    if name == "nvidia":
        fields["alias"] = [GPU_ALIAS, "pci:v000010DEd*sv*sd*bc03sc00i00*", "char-major-195-*"]
        fields["parm"] = list(NVIDIA_PARAMS)
        fields["firmware"] = [f"nvidia/{version}/gsp_tu10x.bin", f"nvidia/{version}/gsp_ga10x.bin"]
    if signed:
        fields.update(CANONICAL_SIGNATURE)
    return filename, render_ko(fields)
