"""playbooks/a100-node.yml as a pyinfra 3 deploy, run with `pyinfra INVENTORY deploy.py --dry`.

Every gpuconf task is here, in the same order: built-in operations where pyinfra has one (files,
apt, modprobe, systemd), and `host.get_fact(Command, ...)` for the read-only checks that pyinfra
has no operation for (initramfs, dkms, nvcc, nvidia-smi, InfiniBand ports). A check that finds
drift plans a `server.shell`, which --dry reports without running; nothing fails a host.

Run without --dry and with `--data apply=true` (bench/run.py's fresh-apply phase) it makes the
changes `gpuconf apply` makes on a fresh lab node, at the same versions: the operations above run,
and the apply-only ones (the CDI refresh units and spec) are added.
"""
import io
import json
from pathlib import Path

from pyinfra import host
from pyinfra.facts.files import FileContents
from pyinfra.facts.server import Command, KernelModules
from pyinfra.operations import apt, files, server, systemd

ROLES = Path(__file__).resolve().parents[3] / "roles"
BRANCH = 580
DRIVER = "580.178.04"   # playbooks/a100-node.yml's pin
DRIVER_PACKAGE = DRIVER + "-1"
# the stack gpuconf's nvidia_driver_stack installs for an A100 on 580 (open modules, DKMS)
STACK = [f"nvidia-kernel-common-{BRANCH}", f"nvidia-dkms-{BRANCH}-open", f"libnvidia-compute-{BRANCH}",
         f"nvidia-utils-{BRANCH}"]
CUDA = "13.0"
CUDA_PACKAGE = "cuda-toolkit-13-0"
CUDA_PACKAGE_VERSION = "13.0.2-1"
CONTAINER_TOOLKIT = "1.20.0-1"   # the roles' defaults, as gpuconf installs them
DCGM = "4.7.0-1"
CUDA_HOME = f"/usr/local/cuda-{CUDA}"
RDMA_MODULES = ["ib_uverbs", "ib_umad", "mlx5_ib", "rdma_ucm"]
DAEMON_JSON = "/etc/docker/daemon.json"
DAEMON_MERGE = {"default-runtime": "nvidia",
                "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}
SUDO = {"_sudo": True}


def flag(name: str, default: bool) -> bool:
    """A host data flag; `--data name=false` arrives as a string."""
    value = host.data.get(name, default)
    return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")


def check(command: str) -> str:
    """Run a read-only command as a fact; '' when it fails."""
    return host.get_fact(Command, command + " 2>/dev/null || true", **SUDO) or ""


def hold(packages: list[str]) -> None:
    held = check("apt-mark showhold").split()
    missing = [p for p in packages if p not in held]
    if missing:
        server.shell(name=f"hold {' '.join(missing)}", commands=["apt-mark hold " + " ".join(missing)], **SUDO)


def merge(base: dict, extra: dict) -> dict:
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


# -- facts gpuconf gathers in its first batch: NVSwitches on the PCI bus --------------------------
pci = check('for d in /sys/bus/pci/devices/*; do [ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] && '
            'printf "%s %s\\n" "${d##*/}" "$(cat "$d/class")"; done; true')
nvswitch = " 0x068000" in pci

# -- nouveau ----------------------------------------------------------------------------------------
files.put(name="Blacklist nouveau", src=io.StringIO("blacklist nouveau\noptions nouveau modeset=0\n"),
          dest="/etc/modprobe.d/blacklist-nouveau.conf", mode="644", **SUDO)
initramfs = check("zcat -f /boot/initrd.img-$(uname -r) | cpio -i --quiet --to-stdout 'etc/modprobe.d/*'")
if "blacklist nouveau" not in initramfs.splitlines():
    server.shell(name="Initramfs carries the blacklist", commands=["update-initramfs -u"], **SUDO)
server.modprobe(name="nouveau not loaded", module="nouveau", present=False, _ignore_errors=True,
                **SUDO)  # in use until the reboot, as gpuconf finds too

# -- nvidia_driver ----------------------------------------------------------------------------------
apt.packages(name="DKMS installed", packages=["dkms"], **SUDO)
other = [p for p in check("dpkg-query -W -f='${Package}\\n' 'nvidia-driver-*' 'nvidia-dkms-*'").split()
         if p not in STACK]
if other:
    apt.packages(name="Only one driver stack", packages=other, present=False, **SUDO)
apt.packages(name="One driver stack at the pinned version and flavour",
             packages=[f"{p}={DRIVER_PACKAGE}" for p in STACK], **SUDO)
hold(STACK)
if "installed" not in check(f'dkms status -m nvidia -v {DRIVER} -k "$(uname -r)"'):
    server.shell(name="DKMS module built for the running kernel",
                 commands=[f'dkms install nvidia/{DRIVER} -k "$(uname -r)"'], **SUDO)
if DRIVER not in check("cat /proc/driver/nvidia/version"):
    server.modprobe(name="Driver loaded at the installed version", module="nvidia", _ignore_errors=True,
                    **SUDO)  # the reboot loads it if nouveau holds the GPUs

# -- cuda -------------------------------------------------------------------------------------------
assert tuple(int(x) for x in DRIVER.split(".")) >= (580, 65), "CUDA 13.0 needs driver >= 580.65"
files.template(name="apt pin for the toolkit", src=str(ROLES / "cuda/templates/cuda.pref.j2"),
               dest="/etc/apt/preferences.d/gpuconf-cuda.pref", mode="644", cuda_version=CUDA,
               cuda_package_version=CUDA_PACKAGE_VERSION, cuda_package=CUDA_PACKAGE, **SUDO)
apt.packages(name="Toolkit at the pinned version", packages=[f"{CUDA_PACKAGE}={CUDA_PACKAGE_VERSION}"], **SUDO)
hold([CUDA_PACKAGE])
if f"release {CUDA}," not in check(f"{CUDA_HOME}/bin/nvcc --version"):
    server.shell(name="nvcc reports the pinned release", commands=[f"{CUDA_HOME}/bin/nvcc --version"])

# -- cuda_env ---------------------------------------------------------------------------------------
files.template(name="Login shells get CUDA on PATH and LD_LIBRARY_PATH", src=str(ROLES / "cuda_env/templates/cuda.sh.j2"),
               dest="/etc/profile.d/cuda.sh", mode="644", cuda_version=CUDA, cuda_home=CUDA_HOME, **SUDO)
linker = files.put(name="The dynamic linker finds CUDA's lib64", src=io.StringIO(f"{CUDA_HOME}/lib64\n"),
                   dest="/etc/ld.so.conf.d/cuda.conf", mode="644", **SUDO)
if f"{CUDA_HOME}/lib64" not in check("bash -lc 'echo \"$LD_LIBRARY_PATH\"'"):
    server.shell(name="A login shell sees lib64", commands=["true"])

# -- reboot: once, if the blacklist is not in the initramfs yet or nouveau is still loaded --------
if "blacklist nouveau" not in initramfs.splitlines() or "nouveau" in host.get_fact(KernelModules):
    server.reboot(name="Reboot if required", reboot_timeout=600, **SUDO)

# -- persistence --------------------------------------------------------------------------------------
apt.packages(name="nvidia-persistenced at the driver's version", packages=[f"nvidia-persistenced={DRIVER_PACKAGE}"],
             **SUDO)
hold(["nvidia-persistenced"])
systemd.service(name="nvidia-persistenced enabled and running", service="nvidia-persistenced",
                running=True, enabled=True, **SUDO)
modes = check("nvidia-smi --query-gpu=index,pci.bus_id,persistence_mode --format=csv,noheader,nounits")
if not modes or "Disabled" in modes:
    server.shell(name="Persistence mode on every GPU now", commands=["nvidia-smi -pm 1"], **SUDO)

# -- fabricmanager (NVSwitch systems only) --------------------------------------------------------------
if nvswitch:
    apt.packages(name="Fabric manager and NSCQ at the driver's version",
                 packages=[f"nvidia-fabricmanager-{BRANCH}={DRIVER_PACKAGE}", f"libnvidia-nscq-{BRANCH}={DRIVER_PACKAGE}"],
                 **SUDO)
    hold([f"nvidia-fabricmanager-{BRANCH}", f"libnvidia-nscq-{BRANCH}"])
    systemd.service(name="Fabric manager enabled and active", service="nvidia-fabricmanager",
                    running=True, enabled=True, **SUDO)

# -- dcgm ---------------------------------------------------------------------------------------------
apt.packages(name="DCGM 4 for the driver's CUDA major",
             packages=[f"datacenter-gpu-manager-4-core={DCGM}", f"datacenter-gpu-manager-4-cuda13={DCGM}"], **SUDO)
systemd.service(name="nvidia-dcgm enabled and running", service="nvidia-dcgm", running=True, enabled=True, **SUDO)

# -- opensm (only where infiniband_subnet_manager is true) ------------------------------------------
if flag("infiniband_subnet_manager", False):
    server.modprobe(name="The HCA's driver loaded (opensm binds to a local port)", module="mlx5_ib", **SUDO)
    server.modprobe(name="ib_umad loaded (opensm talks to the fabric through it)", module="ib_umad", **SUDO)
    apt.packages(name="opensm installed", packages=["opensm"], **SUDO)
    systemd.service(name="opensm enabled and running", service="opensm", running=True, enabled=True, **SUDO)

# -- infiniband ---------------------------------------------------------------------------------------
for module in RDMA_MODULES:
    server.modprobe(name=f"{module} loaded now", module=module, **SUDO)
    files.put(name=f"{module} loaded at boot", src=io.StringIO(module + "\n"),
              dest=f"/etc/modules-load.d/{module}.conf", mode="644", **SUDO)
if flag("infiniband_expect_subnet_manager", True):
    ports = check('for p in /sys/class/infiniband/*/ports/*; do [ -e "$p/state" ] && cat "$p/state"; done; true')
    if not ports.split() or any("ACTIVE" not in p for p in ports.splitlines()):
        server.shell(name="Every port ACTIVE", commands=["true"])

# -- container_toolkit ----------------------------------------------------------------------------------
apt.packages(name="Docker engine installed", packages=["docker.io"], **SUDO)
apt.packages(name="NVIDIA container toolkit at the pinned version",
             packages=[f"nvidia-container-toolkit={CONTAINER_TOOLKIT}"], **SUDO)
hold(["nvidia-container-toolkit"])
current = host.get_fact(FileContents, path=DAEMON_JSON, **SUDO)
merged = merge(json.loads("\n".join(current)) if current else {}, DAEMON_MERGE)
daemon = files.put(name="Docker has the nvidia runtime (merged, other keys kept)",
                   src=io.StringIO(json.dumps(merged, indent=4) + "\n"), dest=DAEMON_JSON, mode="644", **SUDO)

if flag("apply", False):
    files.line(name="CDI refresh writes the spec the role manages",
               path="/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env",
               line="NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/etc/cdi/nvidia.yaml", **SUDO)
    for unit in ("nvidia-cdi-refresh.service", "nvidia-cdi-refresh.path"):
        systemd.service(name=f"{unit} enabled", service=unit, enabled=True, **SUDO)
    server.shell(name="CDI spec made for the loaded driver",
                 commands=["nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"], **SUDO)

# -- handlers -------------------------------------------------------------------------------------------
if linker.will_change:
    server.shell(name="ldconfig", commands=["ldconfig"], **SUDO)
if daemon.will_change:
    systemd.service(name="restart docker", service="docker", restarted=True, **SUDO)
