"""The NVIDIA driver stack of the lab's apt repository, named as NVIDIA's and Canonical's 2026
repositories name it (reference: ``nvidia-stack-2026.md`` section 2).

Every driver-version package has Debian revision ``-1``. Branches up to 580 carry the branch
in every name (``nvidia-utils-580``, ``nvidia-dkms-580-open``); from 590 on the names are
unversioned (``nvidia-utils``, ``nvidia-dkms-open``; metas ``nvidia-driver`` and
``nvidia-open``) and ``nvidia-driver-pinning-<br>`` holds them on one branch. Precompiled,
signed modules stay branch-named: ``linux-modules-nvidia-<br>[-open]-<kernel release>``.

What apt must decide the way it does on a real host, the control fields make it decide:

* a meta depends on utils, libnvidia-compute, kernel-common and one DKMS flavour, all
  ``(= v-1)``; apt takes a dependency at its candidate version only, so an older driver
  installs when every package of the set is named at that version (or pinned);
* the two DKMS flavours of a branch, and the DKMS packages of different branches, conflict;
  packages of different branches conflict through ``nvidia-kernel-common-<br>``;
  precompiled modules conflict with their branch's DKMS packages;
* ``nvidia-persistenced`` is unversioned with one version per driver, so without a pin it
  comes at 620.70.10, a mismatched companion of any other driver;
* 620 ships the open flavour only: no proprietary DKMS, precompiled or ``nvidia-driver`` package;
* ``nvidia-driver-535`` also exists as Canonical's transitional package (580.95.05-0ubuntu1)
  depending on ``nvidia-driver-580``: an unpinned ``apt-get install nvidia-driver-535``
  gives 580.
"""
from __future__ import annotations

from gpuconf_lab.sim import catalog
from gpuconf_lab.sim.elf import shared_object
from gpuconf_lab.sim.packages import (
    DRIVER_REVISION,
    FABRICMANAGER_CFG,
    RELOAD,
    Package,
    _disable_on_purge,
    _enable_start,
    _stop,
    _tool,
    _unit,
    dkms_conf,
)

# 580.178.04, 595.91.07: the fixed versions of NVIDIA's September 2026 bulletin (5861); 620.70.10:
# redistrib_620.70.10.json (gpuconf/driver/branches.yml names the sources)
DRIVERS = {"535": ("535.104.05", "535.247.01"), "570": ("570.195.03",),
           "580": ("580.95.05", "580.105.08", "580.178.04"), "595": ("595.71.05", "595.91.07"),
           "620": ("620.70.10",)}
UNVERSIONED_FROM = 590          # first branch whose packages dropped the branch suffix
OPEN_ONLY_FROM = 620            # R620 removed the proprietary kernel modules (its installation guide)
PINNED_BRANCHES = ("595", "620")  # branches with an nvidia-driver-pinning-<br> package
# Every kernel release the lab boots: the image's, and the one the kernel-upgrade tests install.
PRECOMPILED_KERNELS = ("6.1.0-18-amd64", "6.1.0-21-amd64")
# Canonical-style transitional packages: (name, version, the branch it now pulls, that version)
TRANSITIONAL = (("nvidia-driver-535", "580.95.05-0ubuntu1", "580", "580.95.05"),)
LIB = "/usr/lib/x86_64-linux-gnu"
KINDS = ("nvidia-kernel-common", "nvidia-dkms", "nvidia-utils", "libnvidia-compute", "nvidia-fabricmanager",
         "libnvidia-nscq")
NVLSM_BUILD = "OpenSM 2025.06.5"   # nvlsm names itself as an OpenSM build (reference section 5)


def name(kind: str, branch: str, open_modules: bool = False) -> str:
    """``name("nvidia-dkms", "580", True)`` is ``nvidia-dkms-580-open``; from 590 on the branch
    is dropped (``nvidia-dkms-open``), and the metas are ``nvidia-driver`` / ``nvidia-open``."""
    if int(branch) >= UNVERSIONED_FROM:
        if kind == "nvidia-driver" and open_modules:
            return "nvidia-open"
        return kind + ("-open" if open_modules else "")
    return f"{kind}-{branch}" + ("-open" if open_modules else "")


def flavours(branch: str) -> tuple[bool, ...]:
    """The kernel-module flavours a branch ships: (proprietary, open), or open only from 620."""
    return (True,) if int(branch) >= OPEN_ONLY_FROM else (False, True)


def _all_names(kind: str, flavours=(False,)) -> list[str]:
    return sorted({name(kind, branch, flavour) for branch in DRIVERS for flavour in flavours})


def _others(kind: str, own: str, flavours=(False,)) -> list[str]:
    return [other for other in _all_names(kind, flavours) if other != own]


def kernel_common(branch: str, version: str) -> Package:
    own = name("nvidia-kernel-common", branch)
    firmware = {f"/lib/firmware/nvidia/{version}/{blob}": (f"simulated GSP firmware {version}\n".encode(), 0o644)
                for blob in ("gsp_ga10x.bin", "gsp_tu10x.bin")}
    rules = "# udev rules of the NVIDIA driver (simulated: udev does not run in a lab node)\n"
    return Package(own, version + DRIVER_REVISION, f"Shared files used with the kernel module ({branch} branch)\n"
                   "udev rules and the GSP firmware, which must match the kernel module's version.",
                   conflicts=_others("nvidia-kernel-common", own), replaces=_others("nvidia-kernel-common", own),
                   section="non-free/kernel",
                   files={"/lib/udev/rules.d/60-nvidia.rules": (rules, 0o644), **firmware})


def dkms(branch: str, version: str, open_modules: bool) -> Package:
    own = name("nvidia-dkms", branch, open_modules)
    deb = version + DRIVER_REVISION
    postinst = (
        "set -e\n"
        'if [ "$1" = "configure" ]; then\n'
        f"  dkms add -m nvidia -v {version} >/dev/null 2>&1 || true\n"
        "  for kernel in $( (uname -r; ls /lib/modules 2>/dev/null | sort -V | tail -n 1) | sort -u); do\n"
        "    [ -e /lib/modules/$kernel/build ] || continue\n"
        f"    dkms install -m nvidia -v {version} -k $kernel || echo \"Error! Bad return status for module build "
        "on kernel: $kernel (x86_64)\"\n"
        "  done\n"
        "fi\n")
    source = f"/usr/src/nvidia-{version}"
    files = {f"{source}/dkms.conf": (dkms_conf(version), 0o644),
             f"{source}/Makefile": (f"# NVIDIA {version} kernel module sources (simulated)\n", 0o644),
             f"{source}/nvidia/nv.c": ("/* simulated */\n", 0o644)}
    if open_modules:    # the simulated DKMS builds the open modules from a tree that has kernel-open/
        files[f"{source}/kernel-open/Kbuild"] = ("# NVIDIA open GPU kernel modules (simulated)\n", 0o644)
    flavour = "open" if open_modules else "proprietary"
    others = _others("nvidia-dkms", own, (False, True))
    return Package(own, deb, f"NVIDIA DKMS package, {flavour} kernel modules ({branch} branch)\n"
                   "The NVIDIA kernel modules, built by DKMS for every installed kernel.",
                   depends=["dkms", f"{name('nvidia-kernel-common', branch)} (= {deb})"],
                   conflicts=others, replaces=others, provides=["nvidia-dkms-kernel"], section="non-free/kernel",
                   files=files,
                   scripts={"postinst": postinst,
                            "prerm": f"dkms remove -m nvidia -v {version} --all >/dev/null 2>&1 || true\n"})


def precompiled(branch: str, version: str, open_modules: bool, kernel: str) -> Package:
    """Canonical's signed modules for one kernel release: no DKMS, they load under Secure Boot."""
    suffix = "-open" if open_modules else ""
    files = {}
    for module in catalog.NVIDIA_DKMS:
        filename, text = catalog.nvidia_ko(module, version, kernel, open_modules=open_modules, signed=True)
        files[f"/lib/modules/{kernel}/kernel/nvidia-{branch}/{filename}"] = (text, 0o644)
    other = f"linux-modules-nvidia-{branch}{'' if open_modules else '-open'}-{kernel}"
    depmod = f"if [ -d /lib/modules/{kernel} ]; then depmod -a {kernel} || true; fi\n"
    return Package(f"linux-modules-nvidia-{branch}{suffix}-{kernel}", version + DRIVER_REVISION,
                   f"Linux kernel nvidia modules for version {kernel}\nPrecompiled NVIDIA {branch} "
                   f"{'open' if open_modules else 'proprietary'} kernel modules, signed with the "
                   "Canonical kernel module signing key.",
                   depends=[f"{name('nvidia-kernel-common', branch)} (= {version}{DRIVER_REVISION})"],
                   conflicts=[name("nvidia-dkms", branch), name("nvidia-dkms", branch, True), other],
                   section="non-free/kernel", files=files, scripts={"postinst": depmod, "postrm": depmod})


def userspace(branch: str, version: str) -> list[Package]:
    deb = version + DRIVER_REVISION
    utils, compute = name("nvidia-utils", branch), name("libnvidia-compute", branch)
    return [
        Package(utils, deb, f"NVIDIA driver support binaries ({branch} branch)\nnvidia-smi and the NVML library.",
                conflicts=_others("nvidia-utils", utils), replaces=_others("nvidia-utils", utils),
                files={"/usr/bin/nvidia-smi": _tool("nvsmi", version),
                       "/usr/bin/nvidia-bug-report.sh": _tool("bugreport"),
                       f"{LIB}/libnvidia-ml.so.{version}": (shared_object("libnvidia-ml.so.1"), 0o644)},
                symlinks={f"{LIB}/libnvidia-ml.so.1": f"libnvidia-ml.so.{version}"}),
        Package(compute, deb, f"NVIDIA libcompute package ({branch} branch)\nlibcuda and the PTX JIT compiler.",
                conflicts=_others("libnvidia-compute", compute), replaces=_others("libnvidia-compute", compute),
                files={f"{LIB}/libcuda.so.{version}": (shared_object("libcuda.so.1"), 0o644),
                       f"{LIB}/libnvidia-ptxjitcompiler.so.{version}":
                           (shared_object("libnvidia-ptxjitcompiler.so.1"), 0o644)},
                symlinks={f"{LIB}/libcuda.so.1": f"libcuda.so.{version}",
                          f"{LIB}/libnvidia-ptxjitcompiler.so.1": f"libnvidia-ptxjitcompiler.so.{version}"}),
    ]


def metas(branch: str, version: str) -> list[Package]:
    """``nvidia-driver-<br>`` and ``-open`` (``nvidia-driver`` and ``nvidia-open`` from 590). Each
    conflicts with the other metas' real drivers (``nvidia-driver-535 (<< 536)``: versions of that
    branch, never a transitional package of that name), so that apt replaces one driver by another
    by removing the old meta instead of giving up on the conflicts of its dependencies."""
    deb = version + DRIVER_REVISION
    common = [f"{name(kind, branch)} (= {deb})" for kind in ("nvidia-utils", "libnvidia-compute",
                                                              "nvidia-kernel-common")]
    packages = []
    for open_modules in flavours(branch):
        own = name("nvidia-driver", branch, open_modules)
        others = [f"{name('nvidia-driver', other, flavour)} (<< {int(other) + 1})"
                  for other in DRIVERS for flavour in (False, True)
                  if name("nvidia-driver", other, flavour) != own]
        packages.append(Package(own, deb, f"NVIDIA driver metapackage, {'open' if open_modules else 'proprietary'} "
                                f"kernel modules ({branch} branch)\nPulls the DKMS kernel modules and the user space "
                                "of one exact driver version.",
                                depends=common + [f"{name('nvidia-dkms', branch, open_modules)} (= {deb})"],
                                conflicts=others, section="non-free/metapackages"))
    return packages


def fabricmanager(branch: str, version: str) -> Package:
    own = name("nvidia-fabricmanager", branch)
    unit = _unit("NVIDIA fabric manager service",
                 ["User=root", "PrivateTmp=false", "Type=forking", "TimeoutStartSec=240", "",
                  "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg", "",
                  "LimitCORE=infinity"],
                 ["After=network-online.target", "Requires=network-online.target"])
    return Package(own, version + DRIVER_REVISION, f"Fabric Manager for NVSwitch based systems ({branch})\n"
                   "Configures NVSwitches and NVLink routing; needs the driver of exactly the same version.",
                   conflicts=_others("nvidia-fabricmanager", own), replaces=_others("nvidia-fabricmanager", own),
                   files={"/usr/bin/nv-fabricmanager": _tool("daemons", "fabricmanager", version),
                          "/usr/share/nvidia/nvswitch/fabricmanager.cfg": (FABRICMANAGER_CFG, 0o644),
                          "/lib/systemd/system/nvidia-fabricmanager.service": unit},
                   scripts={"postinst": RELOAD, "prerm": _stop("nvidia-fabricmanager.service"),
                            "postrm": _disable_on_purge("nvidia-fabricmanager.service")})


def nscq(branch: str, version: str) -> Package:
    own = name("libnvidia-nscq", branch)
    return Package(own, version + DRIVER_REVISION, f"NVSwitch Configuration and Query library ({branch})\n"
                   "Used by DCGM and nvidia-smi to query NVSwitches; must match the driver version.",
                   conflicts=_others("libnvidia-nscq", own), replaces=_others("libnvidia-nscq", own),
                   files={f"{LIB}/libnvidia-nscq.so.{version}": (shared_object("libnvidia-nscq.so.2"), 0o644)},
                   symlinks={f"{LIB}/libnvidia-nscq.so.2": f"libnvidia-nscq.so.{version}"})


def nvlsm_script(version: str) -> tuple[str, int]:
    """nvlsm's only behaviour the lab needs is being there: the fabric manager's NVLink5
    precheck looks for it. Run by hand, it names its build like the real one."""
    return (f"#!/bin/sh\necho '-------------------------------------------------'\n"
            f"echo '{NVLSM_BUILD}_{version}'\n", 0o755)


NVLSM_CONF = "# NVLink Subnet Manager configuration (lab)\nlog_file /var/log/nvlsm.log\n"


def nvlink5(branch: str, version: str) -> list[Package]:
    """HGX B200/B300: the NVLink subnet manager and the NVSwitch device-management library,
    released with the driver and installed at its exact version."""
    own = name("libnvsdm", branch)
    return [
        Package("nvlsm", version + DRIVER_REVISION, "NVLink Subnet Manager\n"
                "Routes NVLink5 switches for the fabric manager (HGX Blackwell).",
                files={"/opt/nvidia/nvlsm/sbin/nvlsm": nvlsm_script(version),
                       "/usr/share/nvidia/nvlsm/nvlsm.conf": (NVLSM_CONF, 0o644)},
                conffiles=["/usr/share/nvidia/nvlsm/nvlsm.conf"]),
        Package(own, version + DRIVER_REVISION, f"NVSwitch device management library ({branch})\n"
                "Used by nvlsm and the fabric manager on NVLink5 systems; must match the driver version.",
                conflicts=_others("libnvsdm", own), replaces=_others("libnvsdm", own),
                files={f"{LIB}/libnvsdm.so.{version}": (shared_object("libnvsdm.so.1"), 0o644)},
                symlinks={f"{LIB}/libnvsdm.so.1": f"libnvsdm.so.{version}"}),
    ]


IMEX_CONFIG = """# NVIDIA IMEX configuration file (gpuconf lab: the keys the simulated daemon reads).
LOG_LEVEL=4
LOG_FILE_NAME=/var/log/nvidia-imex.log
LOG_APPEND_TO_LOG=1
LOG_FILE_MAX_SIZE=1024
LOG_USE_SYSLOG=0
DAEMONIZE=1
SERVER_PORT=50000
IMEX_CMD_PORT=50005
IMEX_CMD_ENABLED=1
IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg
IMEX_WAIT_FOR_QUORUM=RECOVERY
"""
IMEX_NODES = "# One IP address per line: the nodes of this node's NVLink domain.\n"
IMEX_UNIT_LINES = ["Type=forking", "TimeoutStartSec=240",
                   "ExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg", "", "LimitCORE=infinity"]


def imex_files(version: str, unit_dir: str) -> dict:
    """What ``nvidia-imex`` installs: the daemon, its client, its configuration and its unit."""
    unit = _unit("NVIDIA IMEX service", IMEX_UNIT_LINES, ["After=network-online.target", "Requires=network-online.target"])
    return {"/usr/bin/nvidia-imex": _tool("imex", "daemon", version), "/usr/bin/nvidia-imex-ctl": _tool("imex", "ctl"),
            "/etc/nvidia-imex/config.cfg": (IMEX_CONFIG, 0o644), "/etc/nvidia-imex/nodes_config.cfg": (IMEX_NODES, 0o644),
            f"{unit_dir}/nvidia-imex.service": unit}


def imex(version: str) -> Package:
    """GB200/GB300 NVL72: the IMEX daemon, released with the driver and needing its exact
    version (reference section 5). Not enabled on install: the service needs its peer list."""
    return Package("nvidia-imex", version + DRIVER_REVISION, "NVIDIA Internode Memory Exchange service\n"
                   "Shares GPU memory across the nodes of a multi-node NVLink domain; must match the driver version.",
                   files=imex_files(version, "/lib/systemd/system"),
                   conffiles=["/etc/nvidia-imex/config.cfg", "/etc/nvidia-imex/nodes_config.cfg"],
                   scripts={"postinst": RELOAD, "prerm": _stop("nvidia-imex.service"),
                            "postrm": _disable_on_purge("nvidia-imex.service")})


def persistenced(version: str) -> Package:
    unit = _unit("NVIDIA Persistence Daemon",
                 ["Type=forking", "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --verbose",
                  "ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced"], ["Wants=syslog.target"])
    user = ("if [ \"$1\" = configure ] && ! getent passwd nvidia-persistenced >/dev/null; then\n"
            "  useradd --system --home-dir /var/run/nvidia-persistenced --shell /usr/sbin/nologin "
            "--comment 'NVIDIA Persistence Daemon' nvidia-persistenced\nfi\n")
    return Package("nvidia-persistenced", version + DRIVER_REVISION,
                   "daemon to maintain persistent software state in the NVIDIA driver\n"
                   "Needs the kernel module of exactly its own version.",
                   files={"/usr/bin/nvidia-persistenced": _tool("daemons", "persistenced", version),
                          "/lib/systemd/system/nvidia-persistenced.service": unit},
                   scripts={"postinst": user + _enable_start("nvidia-persistenced.service"),
                            "prerm": _stop("nvidia-persistenced.service"),
                            "postrm": _disable_on_purge("nvidia-persistenced.service")})


def pinning(branch: str) -> Package:
    """What NVIDIA's ``nvidia-driver-pinning-<br>`` installs: every unversioned driver package
    held on the branch (priority 1000 also allows the downgrade back onto it)."""
    held = [name("nvidia-driver", branch), name("nvidia-driver", branch, True), "nvidia-persistenced"]
    held += [name(kind, branch, flavour) for kind in KINDS for flavour in (False, True)
             if flavour is False or kind == "nvidia-dkms"]
    path = f"/etc/apt/preferences.d/nvidia-driver-pinning-{branch}"
    text = (f"Explanation: installed by nvidia-driver-pinning-{branch}: hold the NVIDIA driver on the {branch} branch\n"
            f"Package: {' '.join(sorted(held))}\nPin: version {branch}.*\nPin-Priority: 1000\n")
    return Package(f"nvidia-driver-pinning-{branch}", f"{branch}-1", f"Pin the NVIDIA driver to the {branch} branch\n"
                   "apt preferences that hold every unversioned driver package on this branch.",
                   architecture="all", section="non-free/metapackages", files={path: (text, 0o644)},
                   conffiles=[path])


def transitional(package: str, version: str, branch: str, target: str) -> Package:
    meta = name("nvidia-driver", branch)
    return Package(package, version, f"Transitional package for {meta}\nThis is a transitional package. "
                   "It can safely be removed.", depends=[f"{meta} (>= {target}{DRIVER_REVISION})"],
                   section="oldlibs")


def driver_stack() -> list[Package]:
    """Every package of the NVIDIA driver stack in the repository."""
    packages = []
    for branch, versions in DRIVERS.items():
        for version in versions:
            packages += [kernel_common(branch, version), *(dkms(branch, version, f) for f in flavours(branch)),
                         *userspace(branch, version), *metas(branch, version), fabricmanager(branch, version),
                         nscq(branch, version), *nvlink5(branch, version), persistenced(version), imex(version)]
            packages += [precompiled(branch, version, open_modules, kernel)
                         for open_modules in flavours(branch) for kernel in PRECOMPILED_KERNELS]
    packages += [pinning(branch) for branch in PINNED_BRANCHES]
    return packages + [transitional(*spec) for spec in TRANSITIONAL]
