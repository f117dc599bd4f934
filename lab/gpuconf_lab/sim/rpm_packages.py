"""What the lab's EL (dnf) repositories ship: NVIDIA's driver packages, in module streams on EL 9.

The names, epoch (3) and release (``1.el9``, ``1.el10``) are those of NVIDIA's CUDA repository
for RHEL 9 and 10, so that ``dnf module enable nvidia-driver:580-open && dnf install
nvidia-open`` behaves as on a real EL 9 host, and ``dnf install nvidia-open-3:VER-1.el10`` as on
an EL 10 one (the streams each package records are only written as module metadata for EL 9).
Contents and scriptlets do what the Debian packages of ``sim.packages`` do (the same simulator shims, the same DKMS add/build/install in ``%post``), with EL's paths
(``/usr/lib64``, ``/usr/lib/systemd/system``) and EL's conventions: a unit is ``preset`` on
install, which RHEL's default preset policy leaves disabled, so the daemons are not started.
Runs on the machine (``repo_rpm.build_rpm_repo``); nothing here is copied into nodes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gpuconf_lab.sim.elf import shared_object
from gpuconf_lab.sim.nvidia_packages import NVLSM_CONF, imex_files, nvlsm_script
from gpuconf_lab.sim.packages import FABRICMANAGER_CFG, _tool, _unit, dkms_conf

# branch -> versions, oldest first (real releases; the apt repository's, sim.nvidia_packages)
DRIVERS = {"535": ("535.104.05", "535.247.01"), "570": ("570.195.03",),
           "580": ("580.95.05", "580.105.08", "580.178.04"), "595": ("595.71.05", "595.91.07"),
           "620": ("620.70.10",)}
OPEN_ONLY_FROM = 620           # R620 ships no proprietary kernel modules: no <br>-dkms stream
EL10_FROM = 580                # EL 10's repository: the supported branches only (535 and 570 predate it)
EPOCH = 3
OPEN_META_SINCE = 560          # the `nvidia-open` metapackage exists from R560 on
LIB64 = "/usr/lib64"
UNIT_DIR = "/usr/lib/systemd/system"
MODULE = "nvidia-driver"


@dataclass
class Rpm:
    """One binary RPM: header fields, files (path -> (text or bytes, mode)), scriptlets by
    section name (``pre``, ``post``, ``preun``, ``postun``), and the module streams it is in."""

    name: str
    version: str
    summary: str
    release: str
    epoch: int | None = EPOCH
    arch: str = "x86_64"
    license: str = "NVIDIA License"
    description: str = ""
    requires: list = field(default_factory=list)
    conflicts: list = field(default_factory=list)
    provides: list = field(default_factory=list)
    obsoletes: list = field(default_factory=list)
    files: dict = field(default_factory=dict)
    symlinks: dict = field(default_factory=dict)
    config: list = field(default_factory=list)       # %config(noreplace) paths among files
    scripts: dict = field(default_factory=dict)
    streams: list = field(default_factory=list)      # nvidia-driver streams listing it as an artifact

    @property
    def evr(self) -> str:
        return f"{self.epoch}:{self.version}-{self.release}" if self.epoch is not None else \
            f"{self.version}-{self.release}"

    @property
    def nevra(self) -> str:
        """name-epoch:version-release.arch, as modulemd artifacts list it (epoch 0 spelled out)."""
        return f"{self.name}-{self.epoch or 0}:{self.version}-{self.release}.{self.arch}"

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.release}.{self.arch}.rpm"


def release(el: str) -> str:
    """NVIDIA's release tag of the driver packages for EL `el`: 1.el9, 1.el10."""
    return f"1.el{el}"


def exact(name: str, version: str, el: str) -> str:
    return f"{name} = {EPOCH}:{version}-{release(el)}"


def streams_for(branch: str, flavour: str) -> list[str]:
    """Streams listing a package of ``branch``: flavour 'dkms' (proprietary), 'open', or
    'both' (packages every flavour shares)."""
    names = []
    if flavour in ("dkms", "both") and int(branch) < OPEN_ONLY_FROM:
        names += [f"{branch}-dkms", "latest-dkms"]
    if flavour in ("open", "both"):
        names += [f"{branch}-open", "open-dkms"]
    return names


def systemd_post(unit: str) -> str:
    """%systemd_post: preset on first install (RHEL's policy disables NVIDIA's units)."""
    return (f'if [ "$1" -eq 1 ]; then systemctl --no-reload preset {unit} >/dev/null 2>&1 || :; fi\n'
            "systemctl daemon-reload >/dev/null 2>&1 || :\n")


def systemd_preun(unit: str) -> str:
    return f'if [ "$1" -eq 0 ]; then systemctl --no-reload disable --now {unit} >/dev/null 2>&1 || :; fi\n'


def systemd_postun(unit: str) -> str:
    return ("systemctl daemon-reload >/dev/null 2>&1 || :\n"
            f'if [ "$1" -ge 1 ]; then systemctl try-restart {unit} >/dev/null 2>&1 || :; fi\n')


def dkms_post(version: str) -> str:
    """Add the source to DKMS and build and install it for the running and the newest kernel,
    as the Debian nvidia-dkms postinst does (a kernel without headers is skipped)."""
    return (f"dkms add -m nvidia -v {version} -q >/dev/null 2>&1 || :\n"
            "for kernel in $( (uname -r; ls /lib/modules 2>/dev/null | sort -V | tail -n 1) | sort -u); do\n"
            "  [ -e /lib/modules/$kernel/build ] || continue\n"
            f"  dkms install -m nvidia -v {version} -k $kernel || "
            'echo "Error! Bad return status for module build on kernel: $kernel (x86_64)"\n'
            "done\n"
            "rm -rf /var/lib/dkms/nvidia/original_module\n")


def kmod_package(branch: str, version: str, flavour: str, el: str) -> Rpm:
    """kmod-nvidia-open-dkms or kmod-nvidia-latest-dkms: the DKMS source of one flavour."""
    is_open = flavour == "open"
    name = "kmod-nvidia-open-dkms" if is_open else "kmod-nvidia-latest-dkms"
    other = "kmod-nvidia-latest-dkms" if is_open else "kmod-nvidia-open-dkms"
    tree = f"/usr/src/nvidia-{version}"
    sources = "kernel-open" if is_open else "kernel"
    return Rpm(name, version, release=release(el),
               summary=("NVIDIA driver open kernel module flavor" if is_open else
                        "NVIDIA driver kernel module (proprietary flavor), built by DKMS"),
               license="MIT/GPLv2" if is_open else "NVIDIA License",
               description="The modules are rebuilt through the DKMS system when a new kernel or modules "
                           "become available.",
               requires=["dkms", exact("nvidia-kmod-common", version, el)], conflicts=[other, f"dkms-{name[5:-5]}"],
               provides=[f"nvidia-kmod = {EPOCH}:{version}"],
               files={f"{tree}/dkms.conf": (dkms_conf(version), 0o644),
                      f"{tree}/Makefile": (f"# NVIDIA {version} kernel module sources (simulated)\n", 0o644),
                      f"{tree}/{sources}/nvidia/nv.c": ("/* simulated */\n", 0o644),
                      f"{tree}/{sources}/Kbuild": ("# simulated\n", 0o644)},
               scripts={"post": dkms_post(version),
                        "preun": f"dkms remove -m nvidia -v {version} -q --all >/dev/null 2>&1 || :\n"},
               streams=streams_for(branch, flavour))


NVIDIA_MODPROBE = """blacklist nouveau

# Make a soft dependency for nvidia-uvm as adding the module loading to
# /usr/lib/modules-load.d/nvidia-uvm.conf for systemd consumption, makes the
# configuration file to be added to the initrd but not the module, throwing an
# error on plymouth about not being able to find the module.
softdep nvidia post: nvidia-uvm
"""
DRACUT_OMIT = 'omit_drivers+=" nvidia nvidia-drm nvidia-modeset nvidia-peermem nvidia-uvm "\n'
DRACUT_OPTS = "rd.driver.blacklist=nouveau"
DRACUT_OPTS_RM = "nomodeset gfxpayload=vga=normal nouveau.modeset=0 nvidia-drm.modeset=1"


def kmod_common(branch: str, version: str, el: str) -> Rpm:
    """Firmware, the modprobe and dracut configuration, and (in %post) the kernel command line
    that keeps nouveau out of the initramfs stage, as NVIDIA's nvidia-kmod-common does."""
    firmware = {f"/usr/lib/firmware/nvidia/{version}/{blob}": (f"GSP firmware {version} (simulated)\n".encode(), 0o644)
                for blob in ("gsp_ga10x.bin", "gsp_tu10x.bin")}
    return Rpm("nvidia-kmod-common", version, release=release(el),
               summary="Common file for NVIDIA's proprietary driver kernel modules",
               arch="noarch", requires=["grubby", f"nvidia-kmod = {EPOCH}:{version}"],
               files={"/usr/lib/modprobe.d/nvidia.conf": (NVIDIA_MODPROBE, 0o644),
                      "/usr/lib/dracut/dracut.conf.d/99-nvidia.conf": (DRACUT_OMIT, 0o644), **firmware},
               scripts={"post": f"/usr/sbin/grubby --update-kernel=ALL --args='{DRACUT_OPTS}' "
                                f"--remove-args='{DRACUT_OPTS_RM}' >/dev/null 2>&1 || :\n",
                        "preun": 'if [ "$1" -eq 0 ]; then\n  /usr/sbin/grubby --update-kernel=ALL '
                                 f"--remove-args='{DRACUT_OPTS}' >/dev/null 2>&1 || :\nfi\n"},
               streams=streams_for(branch, "both"))


def library(name: str, version: str, soname: str) -> tuple[dict, dict]:
    """A versioned shared object in /usr/lib64 and its soname link."""
    return ({f"{LIB64}/{name}.so.{version}": (shared_object(soname), 0o755)},
            {f"{LIB64}/{soname}": f"{name}.so.{version}"})


def userspace_packages(branch: str, version: str, el: str) -> list[Rpm]:
    cuda_libs, cuda_links = library("libcuda", version, "libcuda.so.1")
    nvml, nvml_links = library("libnvidia-ml", version, "libnvidia-ml.so.1")
    glx, glx_links = library("libGLX_nvidia", version, "libGLX_nvidia.so.0")
    ldconfig = "/sbin/ldconfig\n"
    both = streams_for(branch, "both")
    return [
        Rpm("nvidia-driver", version, release=release(el),
            summary="NVIDIA's proprietary display driver for NVIDIA graphic cards",
            requires=[exact("nvidia-kmod-common", version, el), f"nvidia-kmod = {EPOCH}:{version}"],
            files=glx, symlinks=glx_links, scripts={"post": ldconfig, "postun": ldconfig}, streams=both),
        Rpm("nvidia-driver-cuda-libs", version, release=release(el), summary="Libraries for NVIDIA CUDA and NVML",
            files={**cuda_libs, **nvml}, symlinks={**cuda_links, **nvml_links},
            scripts={"post": ldconfig, "postun": ldconfig}, streams=both),
        Rpm("nvidia-driver-cuda", version, release=release(el),
            summary="CUDA integration for NVIDIA's proprietary driver: nvidia-smi",
            requires=[exact("nvidia-driver-cuda-libs", version, el)],
            files={"/usr/bin/nvidia-smi": _tool("nvsmi", version)}, streams=both),
    ]


def persistenced(branch: str, version: str, el: str) -> Rpm:
    unit = _unit("NVIDIA Persistence Daemon",
                 ["Type=forking", "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --verbose",
                  "ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced"], ["Wants=syslog.target"])
    user = ("getent group nvidia-persistenced >/dev/null || groupadd -r nvidia-persistenced\n"
            "getent passwd nvidia-persistenced >/dev/null || useradd -r -g nvidia-persistenced "
            "-d /var/run/nvidia-persistenced -s /sbin/nologin -c 'NVIDIA Persistence Daemon' nvidia-persistenced\n")
    service = "nvidia-persistenced.service"
    return Rpm("nvidia-persistenced", version, release=release(el),
               summary="A daemon to maintain persistent software state in the NVIDIA driver",
               files={"/usr/bin/nvidia-persistenced": _tool("daemons", "persistenced", version),
                      f"{UNIT_DIR}/{service}": unit},
               scripts={"pre": user, "post": systemd_post(service), "preun": systemd_preun(service),
                        "postun": systemd_postun(service)},
               streams=streams_for(branch, "both"))


def fabric_manager(branch: str, version: str, el: str) -> list[Rpm]:
    unit = _unit("NVIDIA fabric manager service",
                 ["User=root", "PrivateTmp=false", "Type=forking", "TimeoutStartSec=240", "",
                  "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg", "",
                  "LimitCORE=infinity"],
                 ["After=network-online.target", "Requires=network-online.target"])
    service = "nvidia-fabricmanager.service"
    nscq, nscq_links = library("libnvidia-nscq", version, "libnvidia-nscq.so.2")
    nvsdm, nvsdm_links = library("libnvsdm", version, "libnvsdm.so.1")
    both = streams_for(branch, "both")
    return [
        Rpm("nvidia-fabric-manager", version, release=release(el), summary="Fabric Manager for NVSwitch based systems",
            files={"/usr/bin/nv-fabricmanager": _tool("daemons", "fabricmanager", version),
                   "/usr/share/nvidia/nvswitch/fabricmanager.cfg": (FABRICMANAGER_CFG, 0o644),
                   f"{UNIT_DIR}/{service}": unit},
            config=["/usr/share/nvidia/nvswitch/fabricmanager.cfg"],
            scripts={"post": systemd_post(service), "preun": systemd_preun(service),
                     "postun": systemd_postun(service)}, streams=both),
        Rpm("libnvidia-nscq", version, release=release(el), summary="NVSwitch Configuration and Query (NSCQ) library",
            files=nscq, symlinks=nscq_links, scripts={"post": "/sbin/ldconfig\n", "postun": "/sbin/ldconfig\n"},
            streams=both),
        Rpm("nvlsm", version, release=release(el), summary="NVLink Subnet Manager",
            files={"/opt/nvidia/nvlsm/sbin/nvlsm": nvlsm_script(version),
                   "/usr/share/nvidia/nvlsm/nvlsm.conf": (NVLSM_CONF, 0o644)},
            config=["/usr/share/nvidia/nvlsm/nvlsm.conf"], streams=both),
        Rpm("libnvsdm", version, release=release(el), summary="NVSwitch device management library",
            files=nvsdm, symlinks=nvsdm_links, scripts={"post": "/sbin/ldconfig\n", "postun": "/sbin/ldconfig\n"},
            streams=both),
    ]


def imex(branch: str, version: str, el: str) -> Rpm:
    service = "nvidia-imex.service"
    return Rpm("nvidia-imex", version, release=release(el), summary="NVIDIA Internode Memory Exchange service",
               files=imex_files(version, UNIT_DIR),
               config=["/etc/nvidia-imex/config.cfg", "/etc/nvidia-imex/nodes_config.cfg"],
               scripts={"post": systemd_post(service), "preun": systemd_preun(service),
                        "postun": systemd_postun(service)}, streams=streams_for(branch, "both"))


def open_meta(branch: str, version: str, el: str) -> Rpm:
    return Rpm("nvidia-open", version, release=release(el), summary="NVIDIA open kernel module driver metapackage",
               requires=[exact("nvidia-driver", version, el), exact("nvidia-driver-cuda", version, el),
                         exact("kmod-nvidia-open-dkms", version, el)],
               streams=[f"{branch}-open", "open-dkms"])


def driver_packages(el: str = "9") -> list[Rpm]:
    """Every driver package for EL `el`. EL 10's starts at branch 580 (and builds faster); its
    595 and 620 packages are what an unlocked `dnf upgrade` would take."""
    packages: list[Rpm] = []
    for branch, versions in DRIVERS.items():
        if int(el) >= 10 and int(branch) < EL10_FROM:
            continue
        for version in versions:
            packages += userspace_packages(branch, version, el)
            packages += [kmod_common(branch, version, el), kmod_package(branch, version, "open", el),
                         persistenced(branch, version, el)]
            if int(branch) < OPEN_ONLY_FROM:
                packages.append(kmod_package(branch, version, "dkms", el))
            packages += fabric_manager(branch, version, el)
            packages.append(imex(branch, version, el))
            if int(branch) >= OPEN_META_SINCE:
                packages.append(open_meta(branch, version, el))
    return packages


def stream_profiles(stream: str) -> dict[str, list[str]]:
    """default: the driver of the stream's flavour; fm adds Fabric Manager and NSCQ."""
    kmod = "kmod-nvidia-open-dkms" if stream.endswith(("-open", "open-dkms")) else "kmod-nvidia-latest-dkms"
    default = ["nvidia-driver", "nvidia-driver-cuda", kmod]
    return {"default": default, "fm": default + ["nvidia-fabric-manager", "libnvidia-nscq"]}


def stream_names() -> list[str]:
    """In the order `dnf module list` shows NVIDIA's: latest-dkms, open-dkms, then per branch."""
    names = ["latest-dkms", "open-dkms"]
    for branch in DRIVERS:
        names += ([f"{branch}-dkms"] if int(branch) < OPEN_ONLY_FROM else []) + [f"{branch}-open"]
    return names


DEFAULT_STREAM = "open-dkms"
