"""What the lab's apt repository ships: the simulated NVIDIA, CUDA, InfiniBand and Docker packages.

Each package carries the files the real one does where it matters to gpuconf (tools at their
real paths, systemd units, ``/usr/src/nvidia-<v>/dkms.conf``, CUDA toolkits under
``/usr/local/cuda-X.Y``) and maintainer scripts doing what the real ones do (DKMS add, build
and install for the running kernel; ``update-alternatives`` for ``/usr/local/cuda``; units
enabled where Debian enables them). Tools are shims into the simulators installed in the
image. Runs on the machine (``repo.build_repo``); nothing here is copied into nodes. The
NVIDIA driver stack itself (its names, versions and the relations apt decides on) is in
``nvidia_packages``, which builds on the helpers here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from gpuconf_lab.sim.elf import shared_object
from gpuconf_lab.sim.install import shim_text

# Debian revision of the driver-family packages, as NVIDIA's own repository has them
# (nvidia-driver-535 535.104.05-1): tools report the upstream version, apt the package's.
DRIVER_REVISION = "-1"
# toolkit package -> [(deb version, nvcc version, cudart version)]
TOOLKITS = {"11-7": [("11.7.1-1", "11.7.99", "11.7.99")],
            "12-2": [("12.2.0-1", "12.2.91", "12.2.53"), ("12.2.2-1", "12.2.140", "12.2.140")],
            "12-4": [("12.4.1-1", "12.4.131", "12.4.127")],
            "12-8": [("12.8.1-1", "12.8.93", "12.8.90")],
            "13-0": [("13.0.2-1", "13.0.88", "13.0.96")],
            "13-1": [("13.1.0-1", "13.1.80", "13.1.80")]}   # newer than the playbooks' 13.0: what a pin must stop
# cuda metapackage version -> the toolkit it pulls (at that version or newer)
CUDA_METAS = {"11.7.1-1": "11-7", "12.2.0-1": "12-2", "12.2.2-1": "12-2", "12.4.1-1": "12-4", "12.8.1-1": "12-8",
              "13.0.2-1": "13-0", "13.1.0-1": "13-1"}
CONTAINER_TOOLKITS = ("1.16.2-1", "1.17.8-1", "1.18.2-1", "1.20.0-1")   # 1.20.0: NVIDIA/nvidia-container-toolkit#1977
MAINTAINER = "gpuconf lab <lab@gpuconf.invalid>"


@dataclass
class Package:
    """One binary package: control fields, files (path -> (text or bytes, mode)), scripts."""

    name: str
    version: str
    description: str
    depends: list = field(default_factory=list)
    conflicts: list = field(default_factory=list)
    replaces: list = field(default_factory=list)
    provides: list = field(default_factory=list)
    files: dict = field(default_factory=dict)
    symlinks: dict = field(default_factory=dict)     # path -> target
    scripts: dict = field(default_factory=dict)      # postinst/prerm/postrm -> shell text
    conffiles: list = field(default_factory=list)
    section: str = "non-free/libs"
    architecture: str = "amd64"

    def control(self) -> str:
        fields = [("Package", self.name), ("Version", self.version), ("Architecture", self.architecture),
                  ("Maintainer", MAINTAINER), ("Section", self.section), ("Priority", "optional")]
        for key, values in (("Depends", self.depends), ("Conflicts", self.conflicts),
                            ("Replaces", self.replaces), ("Provides", self.provides)):
            if values:
                fields.append((key, ", ".join(values)))
        summary, _, body = self.description.partition("\n")
        text = "".join(f"{key}: {value}\n" for key, value in fields)
        text += f"Description: {summary}\n"
        text += "".join(f" {line}\n" if line else " .\n" for line in body.splitlines())
        return text


def _tool(module: str, *args: str) -> tuple[str, int]:
    return shim_text(module, *args), 0o755


def _unit(description: str, service: list[str], unit: list[str] = (), wanted_by="multi-user.target") -> tuple[str, int]:
    lines = ["[Unit]", f"Description={description}", *unit, "", "[Service]", *service, "", "[Install]",
             f"WantedBy={wanted_by}", ""]
    return "\n".join(lines), 0o644


RELOAD = 'if [ -d /run/systemd/system ]; then systemctl --system daemon-reload >/dev/null || true; fi\n'


def _enable_start(unit: str) -> str:
    """The dh_installsystemd snippet: enable on first install, then (re)start, never failing."""
    return (f'if [ "$1" = "configure" ] || [ "$1" = "abort-upgrade" ]; then\n'
            f"  {RELOAD.strip()}\n"
            f'  if [ -z "$2" ]; then systemctl --quiet enable {unit} || true; fi\n'
            f"  systemctl --quiet start {unit} >/dev/null 2>&1 || true\n"
            "fi\n")


def _stop(unit: str) -> str:
    return f'if [ -d /run/systemd/system ] && [ "$1" = remove ]; then systemctl --quiet stop {unit} || true; fi\n'


def _disable_on_purge(unit: str) -> str:
    return f'if [ "$1" = "purge" ]; then systemctl --quiet disable {unit} >/dev/null 2>&1 || true; fi\n{RELOAD}'


def dkms_conf(version: str) -> str:
    lines = ['PACKAGE_NAME="nvidia"', f'PACKAGE_VERSION="{version}"', 'AUTOINSTALL="yes"',
             "MAKE[0]=\"'make' -j$(nproc) NV_EXCLUDE_BUILD_MODULES='' KERNEL_UNAME=${kernelver} modules\""]
    for i, name in enumerate(("nvidia", "nvidia-modeset", "nvidia-drm", "nvidia-uvm", "nvidia-peermem")):
        lines += [f'BUILT_MODULE_NAME[{i}]="{name}"', f'DEST_MODULE_LOCATION[{i}]="/kernel/drivers/video"']
    return "\n".join(lines) + "\n"


FABRICMANAGER_CFG = """# NVIDIA Fabric Manager configuration file.
# Note: This configuration file is read during Fabric Manager service startup.
LOG_LEVEL=4
LOG_FILE_NAME=/var/log/fabricmanager.log
LOG_APPEND_TO_LOG=1
LOG_FILE_MAX_SIZE=1024
LOG_USE_SYSLOG=0
DAEMONIZE=1
BIND_INTERFACE_IP=127.0.0.1
STARTING_TCP_PORT=16000
FABRIC_MODE=0
FABRIC_MODE_RESTART=0
STATE_FILE_NAME=/tmp/fabricmanager.state
FM_CMD_BIND_INTERFACE=127.0.0.1
FM_CMD_PORT_NUMBER=6666
FM_STAY_RESIDENT_ON_FAILURES=0
ACCESS_LINK_FAILURE_MODE=0
TRUNK_LINK_FAILURE_MODE=0
NVSWITCH_FAILURE_MODE=0
ABORT_CUDA_JOBS_ON_FM_EXIT=1
TOPOLOGY_FILE_PATH=/usr/share/nvidia/nvswitch
DATABASE_PATH=/usr/share/nvidia/nvswitch
"""


def cuda_packages() -> list[Package]:
    packages = []
    for short, releases in TOOLKITS.items():
        major, minor = short.split("-")
        base = f"/usr/local/cuda-{major}.{minor}"
        for deb_version, nvcc_version, cudart in releases:
            full = deb_version.split("-")[0]
            version_json = json.dumps({"cuda": {"name": "CUDA SDK", "version": full},
                                       "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": cudart},
                                       "cuda_nvcc": {"name": "CUDA NVCC", "version": nvcc_version}}, indent=3)
            priority = int(major) * 10 + int(minor)
            postinst = ('if [ "$1" = "configure" ]; then\n'
                        f"  update-alternatives --install /usr/local/cuda cuda {base} {priority}\n"
                        f"  update-alternatives --install /usr/local/cuda-{major} cuda-{major} {base} {priority}\n"
                        "fi\n")
            prerm = ('if [ "$1" = "remove" ] || [ "$1" = "deconfigure" ]; then\n'
                     f"  update-alternatives --remove cuda {base}\n"
                     f"  update-alternatives --remove cuda-{major} {base}\nfi\n")
            packages.append(Package(
                f"cuda-toolkit-{short}", deb_version, f"CUDA Toolkit {major}.{minor} meta-package\n"
                f"nvcc and the CUDA runtime under {base}.", section="multiverse/devel",
                files={f"{base}/bin/nvcc": (shim_text("nvcc", pass_self=True), 0o755),
                       f"{base}/version.json": (version_json + "\n", 0o644),
                       f"{base}/lib64/libcudart.so.{cudart}": (shared_object(f"libcudart.so.{major}"), 0o644)},
                symlinks={f"{base}/lib64/libcudart.so.{major}": f"libcudart.so.{cudart}",
                          f"{base}/lib64/libcudart.so": f"libcudart.so.{major}"},
                scripts={"postinst": postinst, "prerm": prerm}))
    for deb_version, toolkit in CUDA_METAS.items():
        packages.append(Package("cuda", deb_version, "CUDA meta-package\nInstalls the newest CUDA Toolkit.",
                                depends=[f"cuda-toolkit-{toolkit} (>= {deb_version})"], section="multiverse/devel"))
    return packages


def infiniband_packages() -> list[Package]:
    opensm_unit = _unit("Starts the OpenSM InfiniBand fabric Subnet Manager",
                        ["Type=forking", "EnvironmentFile=-/etc/default/opensm", "ExecStart=/usr/sbin/opensm -B $OPENSM_ARGS"],
                        ["Documentation=man:opensm", "DefaultDependencies=false",
                         "Before=network.target remote-fs-pre.target", "Wants=network.target remote-fs-pre.target"])
    return [
        Package("opensm", "3.3.24-1", "InfiniBand subnet manager\nOpenSM assigns LIDs and brings ports to ACTIVE.",
                section="net", files={"/usr/sbin/opensm": _tool("daemons", "opensm"),
                                      "/lib/systemd/system/opensm.service": opensm_unit,
                                      "/etc/default/opensm": ("# Extra arguments for opensm\nOPENSM_ARGS=\n", 0o644)},
                conffiles=["/etc/default/opensm"],
                scripts={"postinst": _enable_start("opensm.service"), "prerm": _stop("opensm.service"),
                         "postrm": _disable_on_purge("opensm.service")}),
        Package("infiniband-diags", "44.0-2", "InfiniBand diagnostic programs\nibstat, ibstatus.", section="net",
                files={"/usr/sbin/ibstat": _tool("ib", "ibstat"), "/usr/sbin/ibstatus": _tool("ib", "ibstatus")}),
        Package("ibverbs-utils", "44.0-2", "Examples for the libibverbs library\nibv_devinfo, ibv_devices.",
                section="net", files={"/usr/bin/ibv_devinfo": _tool("ib", "ibv_devinfo"),
                                      "/usr/bin/ibv_devices": _tool("ib", "ibv_devices")}),
        Package("rdma-core", "44.0-2", "RDMA core userspace infrastructure and documentation", section="net",
                files={"/etc/rdma/modules/infiniband.conf": ("# Load the IPoIB driver when an InfiniBand device is present\nib_ipoib\n", 0o644),
                       "/etc/rdma/modules/rdma.conf": ("# Load the RDMA connection managers\nib_cm\nrdma_cm\nrdma_ucm\n", 0o644)},
                conffiles=["/etc/rdma/modules/infiniband.conf", "/etc/rdma/modules/rdma.conf"]),
    ]


CONTAINER_RUNTIME_TOML = ('#accept-nvidia-visible-devices-as-volume-mounts = false\n'
                          '[nvidia-container-runtime]\nlog-level = "info"\n')
# The CDI refresh units of toolkit 1.18+, as NVIDIA/nvidia-container-toolkit ships them
# (deployments/systemd/nvidia-cdi-refresh.service and .path, license header left out): at boot,
# once the driver's module is in modules.dep, `nvidia-ctk cdi generate` writes /var/run/cdi/nvidia.yaml.
CDI_REFRESH_SERVICE = """[Unit]
Description=Refresh NVIDIA CDI specification file
ConditionPathExists=|/usr/bin/nvidia-smi
ConditionPathExists=|/usr/sbin/nvidia-smi
ConditionPathExists=/usr/bin/nvidia-ctk
After=multi-user.target

[Service]
Type=oneshot
# Values from Environment will be replaced if defined in EnvironmentFile
Environment=NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml
EnvironmentFile=-/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env
ExecCondition=/usr/bin/grep -qE '/(nvidia|nvidia-current)\\\\.ko' /lib/modules/%v/modules.dep
ExecStart=/usr/bin/nvidia-ctk cdi generate
CapabilityBoundingSet=CAP_SYS_MODULE CAP_SYS_ADMIN CAP_MKNOD
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target
"""
# deployments/systemd/nvidia-cdi-refresh.env, a conffile in /etc/nvidia-container-toolkit
CDI_REFRESH_ENV = """# This file can be used to override the configuration of the
#   nvidia-ctk cdi generate
# command invoked by the nvidia-cdi-refresh.service.
#
# This is done by specifying the name and value of the environment variables in
# this file as follows:
#
# ENVVAR=value
#
# For a list of envvars that can be set set the output of:
#
#   nvidia-ctk --help
#
# and
#
#   nvidia-ctk cdi generate --help
#
# For example, to change the for the generated CDI specification update and
# uncomment the following line:
# NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml
"""
CDI_REFRESH_PATH = """[Unit]
Description=Trigger CDI refresh on NVIDIA driver install / uninstall events

[Path]
PathChanged=/lib/modules/%v/modules.dep
PathChanged=/lib/modules/%v/modules.dep.bin

[Install]
WantedBy=multi-user.target
"""


CDI_REFRESH_ENV_FILE = "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"


def cdi_refresh_units(version: str, unit_dir: str = "/lib/systemd/system") -> dict:
    """The refresh units, from toolkit 1.18 on (none before). Not enabled by the package here: its
    postinst enables them only where systemd is running, which an image build is not."""
    if tuple(int(part) for part in version.split("-")[0].split(".")[:2]) < (1, 18):
        return {}
    return {f"{unit_dir}/nvidia-cdi-refresh.service": (CDI_REFRESH_SERVICE, 0o644),
            f"{unit_dir}/nvidia-cdi-refresh.path": (CDI_REFRESH_PATH, 0o644),
            CDI_REFRESH_ENV_FILE: (CDI_REFRESH_ENV, 0o644)}


def other_packages() -> list[Package]:
    docker_unit = _unit("Docker Application Container Engine",
                        ["Type=notify", "ExecStart=/usr/sbin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock",
                         "ExecReload=/bin/kill -s HUP $MAINPID", "TimeoutStartSec=0", "RestartSec=2", "Restart=always"],
                        ["Documentation=https://docs.docker.com",
                         "After=network-online.target docker.socket firewalld.service containerd.service time-set.target",
                         "Wants=network-online.target containerd.service", "Requires=docker.socket"])
    docker_socket = ("[Unit]\nDescription=Docker Socket for the API\n\n[Socket]\nListenStream=/run/docker.sock\n"
                     "SocketMode=0660\nSocketUser=root\nSocketGroup=docker\n\n[Install]\nWantedBy=sockets.target\n", 0o644)
    return [
        Package("dkms", "3.0.10-8+deb12u1", "Dynamic Kernel Module System (DKMS)\nBuilds out-of-tree kernel modules "
                "for every installed kernel.", section="kernel", architecture="all",
                files={"/usr/sbin/dkms": _tool("dkms"),
                       "/etc/dkms/framework.conf": ("## DKMS configuration\n# sign_tool=\"/etc/dkms/sign_helper.sh\"\n", 0o644)},
                conffiles=["/etc/dkms/framework.conf"]),
        *(Package("nvidia-container-toolkit", version, "NVIDIA Container toolkit\nnvidia-ctk configures container "
                  "runtimes for NVIDIA GPUs.", section="utils",
                  files={"/usr/bin/nvidia-ctk": _tool("nvctk", "nvidia-ctk", version.split("-")[0]),
                         "/usr/bin/nvidia-container-runtime": _tool("nvctk", "nvidia-container-runtime",
                                                                    version.split("-")[0]),
                         "/etc/nvidia-container-runtime/config.toml": (CONTAINER_RUNTIME_TOML, 0o644),
                         **cdi_refresh_units(version)},
                  conffiles=["/etc/nvidia-container-runtime/config.toml",
                             *[path for path in cdi_refresh_units(version) if path.startswith("/etc/")]])
          for version in CONTAINER_TOOLKITS),
        # Debian 12's containerd, for nodes that run Kubernetes without Docker (not a docker.io
        # dependency here, so that only a node that installs it has it)
        Package("containerd", "1.6.20~ds1-1+b1", "daemon to control runC\ncontainerd manages the complete "
                "container lifecycle of its host system.", section="admin",
                files={"/usr/bin/containerd": _tool("containerd"), "/lib/systemd/system/containerd.service":
                       _unit("containerd container runtime", ["ExecStart=/usr/bin/containerd", "Type=notify",
                             "Delegate=yes", "KillMode=process", "Restart=always", "RestartSec=5"],
                             ["Documentation=https://containerd.io", "After=network.target local-fs.target"])},
                scripts={"postinst": _enable_start("containerd.service"), "prerm": _stop("containerd.service"),
                         "postrm": _disable_on_purge("containerd.service")}),
        Package("docker.io", "20.10.24+dfsg1-1+deb12u1", "Linux container runtime\nThe Docker daemon and client.",
                section="admin", provides=["docker"],
                files={"/usr/sbin/dockerd": _tool("daemons", "dockerd"), "/usr/bin/docker": _tool("daemons", "docker"),
                       "/lib/systemd/system/docker.service": docker_unit, "/lib/systemd/system/docker.socket": docker_socket},
                scripts={"postinst": "mkdir -p /etc/docker\n" + _enable_start("docker.socket") +
                         _enable_start("docker.service"),
                         "prerm": _stop("docker.service"), "postrm": _disable_on_purge("docker.service")}),
    ]


def all_packages() -> list[Package]:
    # imported here: nvidia_packages builds on the helpers of this module
    from gpuconf_lab.sim.nvidia_packages import driver_stack

    return driver_stack() + cuda_packages() + infiniband_packages() + other_packages() + dcgm_packages()


DCGM_VERSIONS = ("4.5.1-1", "4.5.2-1", "4.7.0-1")   # the last: the dcgm role's pin


def dcgm_packages() -> list[Package]:
    """DCGM 4 as NVIDIA's CUDA repository ships it: the core (``nv-hostengine``, ``dcgmi`` and
    the ``nvidia-dcgm`` unit) and one diagnostics package per CUDA major, which must match the
    driver's (reference section 8)."""
    unit = _unit("NVIDIA DCGM service", ["User=root", "PrivateTmp=false", "",
                                         "ExecStart=/usr/bin/nv-hostengine -n --service-account nvidia-dcgm", "",
                                         "Restart=on-abort"], ["Conflicts=dcgm.service"])
    packages = []
    for version in DCGM_VERSIONS:
        packages.append(Package(
            "datacenter-gpu-manager-4-core", version, "NVIDIA Datacenter GPU Management Tools (core)\n"
            "The host engine (nv-hostengine), dcgmi and the nvidia-dcgm service.", section="utils",
            files={"/usr/bin/nv-hostengine": _tool("dcgm", "hostengine"), "/usr/bin/dcgmi": _tool("dcgm", "dcgmi"),
                   "/lib/systemd/system/nvidia-dcgm.service": unit},
            scripts={"postinst": RELOAD, "prerm": _stop("nvidia-dcgm.service"),
                     "postrm": _disable_on_purge("nvidia-dcgm.service")}))
        for major in ("12", "13"):
            packages.append(Package(
                f"datacenter-gpu-manager-4-cuda{major}", version, f"NVIDIA Datacenter GPU Management Tools (CUDA {major})"
                f"\nThe diagnostic plugins built for CUDA {major}.", section="utils",
                depends=[f"datacenter-gpu-manager-4-core (= {version})"],
                files={f"/usr/share/datacenter-gpu-manager-4/plugins/cuda{major}/README":
                       (f"gpuconf lab: DCGM {version} diagnostic plugins for CUDA {major}\n", 0o644)}))
    return packages
