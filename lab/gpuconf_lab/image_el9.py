"""The EL 9 layer: what turns the lab image into a Rocky Linux 9.4 node with the real rpm and dnf.

Built once per image hash, only when a lab has an el9 node, as the upper dir of a throw-away
overlay whose lower layers are (a tmpfs copy of) the lab image and the machine's ``/``. On top
of the Debian node it adds:

* an rpm database of its own (``%_dbpath /var/lib/rpm`` in ``/etc/rpm/macros``) holding the
  OS packages of a Rocky 9.4 host (``rocky-release`` ships ``/etc/os-release`` and
  ``/etc/redhat-release``), installed with dnf from the lab's repository;
* ``/etc/yum.repos.d/gpuconf-lab.repo`` (``baseurl=file:///var/lib/gpuconf-lab-rpm-repo``, built
  by ``repo_rpm``), the stock RHEL 9 ``dnf.conf`` and the versionlock plugin enabled, with the
  metadata cache primed so that ``dnf -C`` never needs to fetch;
* EL's boot: kernel 5.14.0-427.13.1.el9_4.x86_64 (modules, ``/usr/src/kernels``, a BLS entry,
  ``/boot/initramfs-*.img``), and ``dracut``, ``lsinitrd`` and ``grubby`` shims;
* and it removes what a Rocky host lacks: the Debian kernel and initramfs tools, the lab's apt
  repository and apt's lists of it (NVIDIA packages come from rpm only), ``/etc/debian_version``.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from gpuconf_lab.image import APT_ENV, LAB_DIR, mount_lab_copy, unmount_lab_copy
from gpuconf_lab.runtime import IMAGES_DIR, REPO_IN_IMAGE, STATE_ROOT, LabError

RPM_REPO_IN_IMAGE = "/var/lib/gpuconf-lab-rpm-repo"
KERNEL_RPMS_IN_IMAGE = "/usr/lib/gpuconf-lab/el9/kernel-rpms"
SIM_DIR = "/usr/lib/gpuconf-lab/sim"
DEBIAN_KERNEL = "6.1.0-18-amd64"
BASE_PACKAGES = ("rocky-release", "bash", "coreutils", "glibc", "shadow-utils", "systemd", "kmod", "dracut",
                 "grubby", "grub2-tools", "dnf", "python3-dnf-plugin-versionlock", "openssh-server", "sudo",
                 "kernel", "kernel-core", "kernel-modules", "kernel-devel")
DNF_CONF = """[main]
gpgcheck=1
installonly_limit=3
clean_requirements_on_remove=True
best=True
skip_if_unavailable=False
"""
VERSIONLOCK_CONF = "[main]\nenabled = 1\nlocklist = /etc/dnf/plugins/versionlock.list\n"
DEFAULT_GRUB = """GRUB_TIMEOUT=1
GRUB_DISTRIBUTOR="$(sed 's, release .*$,,g' /etc/system-release)"
GRUB_DEFAULT=saved
GRUB_DISABLE_SUBMENU=true
GRUB_TERMINAL_OUTPUT="console"
GRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap \
rd.lvm.lv=rl/root rd.lvm.lv=rl/swap console=ttyS0,115200n8"
GRUB_DISABLE_RECOVERY="true"
GRUB_ENABLE_BLSCFG=true
"""
# tool path -> (simulator module, first argument)
EL_TOOLS = {"/usr/bin/dracut": ("dracut", "dracut"), "/usr/bin/lsinitrd": ("dracut", "lsinitrd"),
            "/usr/sbin/grubby": ("grubby", None)}
# Debian's own, which a Rocky host does not have
DEBIAN_ONLY = ("/usr/sbin/update-initramfs", "/usr/bin/lsinitramfs", "/usr/bin/unmkinitramfs",
               "/etc/debian_version", "/etc/apt/sources.list.d/gpuconf-lab.list",
               *(f"/boot/{name}-{DEBIAN_KERNEL}" for name in ("vmlinuz", "initrd.img", "config", "System.map")),
               "/var/lib/gpuconf-lab/kernel.json", "/usr/lib/python3/dist-packages/dnf-plugins/local.py")
DEBIAN_ONLY_DIRS = (f"/lib/modules/{DEBIAN_KERNEL}", f"/usr/src/linux-headers-{DEBIAN_KERNEL}", REPO_IN_IMAGE,
                    "/var/lib/initramfs-tools")


def layer_path(base_layer: Path) -> Path:
    return base_layer.parent / "el9-layer"


def ensure_el9_layer(base_layer: Path, log=print) -> Path:
    """The cached EL 9 layer for this image, building it first when needed."""
    layer = layer_path(base_layer)
    if layer.is_dir():
        return layer
    with open(IMAGES_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if layer.is_dir():
            return layer
        log("building the EL 9 layer of the lab image (rpmbuild, createrepo_c, dnf; once per image)...")
        started = time.monotonic()
        build(base_layer)
        log(f"EL 9 layer built in {time.monotonic() - started:.1f}s")
    return layer


def build(base_layer: Path) -> None:
    tmp = base_layer.parent / ".build-el9"
    shutil.rmtree(tmp, ignore_errors=True)
    for name in ("layer", "work", "mnt", "base"):
        (tmp / name).mkdir(parents=True)
    log_path = base_layer.parent / "build-el9.log"
    env = dict(os.environ, PYTHONPATH=str(LAB_DIR.parent), PYTHONDONTWRITEBYTECODE="1")
    with open(log_path, "wb") as log_file:
        result = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "gpuconf_lab.image_el9",
             "build-inside", str(tmp), str(base_layer)],
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=str(LAB_DIR.parent))
    if result.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = log_path.read_text(errors="replace")[-3000:]
        raise LabError(f"building the EL 9 layer failed (exit {result.returncode}); full log in {log_path}:\n{tail}")
    shutil.rmtree(tmp / "work")
    for name in ("mnt", "base"):
        (tmp / name).rmdir()
    (tmp / "layer").rename(layer_path(base_layer))
    shutil.rmtree(tmp)


def run(argv: list[str], **kwargs) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, check=True, env=APT_ENV, stdin=subprocess.DEVNULL, **kwargs)


def chroot(mnt: Path, *argv: str) -> None:
    run(["chroot", str(mnt), *argv])


def build_inside(tmp: Path, base_layer: Path) -> None:
    """Runs in a private mount namespace: every mount here vanishes when it exits."""
    layer, work, mnt, base = tmp / "layer", tmp / "work", tmp / "mnt", tmp / "base"
    mount_lab_copy(base_layer, base)   # overlayfs refuses a lower dir inside another lower (/)
    run(["mount", "-t", "overlay", "gpuconf-lab-el9", "-o",
         f"lowerdir={base}:/,upperdir={layer},workdir={work}", str(mnt)])
    for target in (STATE_ROOT, IMAGES_DIR, Path("/tmp"), Path("/run"), Path("/var/tmp")):
        if (mnt / target.relative_to("/")).is_dir():
            run(["mount", "-t", "tmpfs", "-o", "mode=1777" if "tmp" in target.name else "mode=755",
                 "tmpfs", str(mnt / target.relative_to("/"))])
    run(["mount", "-t", "proc", "proc", str(mnt / "proc")])
    run(["mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", str(mnt / "dev")])
    for device in ("null", "zero", "full", "random", "urandom"):
        (mnt / "dev" / device).touch()
        run(["mount", "--bind", f"/dev/{device}", str(mnt / "dev" / device)])
    remove_debian_only(mnt)
    install_rpm_repo(mnt)
    configure_dnf(mnt)
    install_base_packages(mnt)
    install_el_boot(mnt)
    chroot(mnt, "ldconfig")
    unmount_lab_copy(base)


def remove_debian_only(mnt: Path) -> None:
    """Deleting in the overlay leaves whiteouts in the layer: the node does not see these."""
    for path in DEBIAN_ONLY:
        target = mnt / path.lstrip("/")
        if target.is_symlink() or target.exists():
            target.unlink()
    for path in DEBIAN_ONLY_DIRS:
        shutil.rmtree(mnt / path.lstrip("/"), ignore_errors=True)
    for lists in (mnt / "var/lib/apt/lists").glob("*gpuconf-lab*"):
        lists.unlink()


def install_rpm_repo(mnt: Path) -> None:
    from gpuconf_lab.repo_rpm import build_rpm_repo

    build_rpm_repo(mnt / RPM_REPO_IN_IMAGE.lstrip("/"), mnt / KERNEL_RPMS_IN_IMAGE.lstrip("/"))
    run(["chmod", "-R", "a+rX", str(mnt / RPM_REPO_IN_IMAGE.lstrip("/"))])


def configure_dnf(mnt: Path) -> None:
    from gpuconf_lab.repo_rpm import REPO_ID, repo_file

    files = {"etc/rpm/macros": "# gpuconf lab: the node's own rpm database, where EL keeps it\n%_dbpath /var/lib/rpm\n",
             "etc/dnf/dnf.conf": DNF_CONF, "etc/dnf/plugins/versionlock.conf": VERSIONLOCK_CONF,
             f"etc/yum.repos.d/{REPO_ID}.repo": repo_file(RPM_REPO_IN_IMAGE), "etc/default/grub": DEFAULT_GRUB,
             "etc/ld.so.conf.d/gpuconf-lab-lib64.conf": "/usr/lib64\n"}
    for relative, text in files.items():
        target = mnt / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        target.write_text(text)
        target.chmod(0o644)
    locklist = mnt / "etc/dnf/plugins/versionlock.list"
    if not locklist.exists():
        locklist.write_text("")


def install_base_packages(mnt: Path) -> None:
    """The rpm database of a fresh Rocky 9.4 host, then the metadata cache dnf -C reads."""
    from gpuconf_lab.sim.catalog import EL_IMAGE_MACHINE_ID as IMAGE_MACHINE_ID

    (mnt / "var/lib/rpm").mkdir(parents=True, exist_ok=True)
    chroot(mnt, "rpm", "--initdb")
    chroot(mnt, "dnf", "-y", "-q", "--releasever=9", "install", *BASE_PACKAGES)
    chroot(mnt, "dnf", "-q", "makecache")
    # Root reads after the last transaction (the first one rebuilds sqlite's -shm WAL index of the
    # rpm and history databases, so a fresh node starts past that), and proof that dnf -C answers.
    for read in (["rpm", "-qa"], ["dnf", "-q", "-C", "list", "--installed"], ["dnf", "-q", "-C", "versionlock", "list"],
                 ["dnf", "-q", "-C", "module", "list", "nvidia-driver"]):
        chroot(mnt, *read)
    machine_id = mnt / "etc/machine-id"
    if machine_id.is_symlink():
        machine_id.unlink()
    machine_id.write_text(IMAGE_MACHINE_ID + "\n")   # each node's upper has its own


def install_el_boot(mnt: Path) -> None:
    from gpuconf_lab.sim.catalog import EL_DEFAULT_KERNEL as DEFAULT_KERNEL
    from gpuconf_lab.sim.install import run_sim, shim_text, write_file

    for tool_path, (module, first) in EL_TOOLS.items():
        write_file(mnt, tool_path, shim_text(module, *((first,) if first else ())), 0o755)
    if not (mnt / "etc/redhat-release").exists():
        raise LabError("rocky-release did not install /etc/redhat-release: "
                       "the simulators would take the node for Debian")
    run_sim(mnt, "kernels", "install", DEFAULT_KERNEL)
    if not (mnt / f"boot/initramfs-{DEFAULT_KERNEL}.img").is_file():
        raise LabError(f"the EL 9 layer has no /boot/initramfs-{DEFAULT_KERNEL}.img")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "build-inside":
        build_inside(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        print("usage: python -m gpuconf_lab.image_el9 build-inside TMPDIR BASE_LAYER", file=sys.stderr)
        sys.exit(2)
