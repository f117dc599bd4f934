"""The EL layers: what turns the lab image into a Rocky Linux 9.4 or 10.0 node with the real rpm and dnf.

One per EL major version (``el9``, ``el10``), built once per image hash, only when a lab has a
node of that version, as the upper dir of a throw-away overlay whose lower layers are (a tmpfs
copy of) the lab image and the machine's ``/``. On top of the Debian node it adds:

* an rpm database of its own (``%_dbpath /var/lib/rpm`` in ``/etc/rpm/macros``) holding the
  OS packages of a Rocky 9.4 or 10.0 host (``rocky-release`` ships ``/etc/os-release`` and
  ``/etc/redhat-release``), installed with dnf (``--releasever`` 9 or 10) from the lab's repository;
* ``/etc/yum.repos.d/gpuconf-lab.repo`` (``baseurl=file:///var/lib/gpuconf-lab-rpm-repo``, built
  by ``repo_rpm`` for that version: module streams on EL 9, none on EL 10), the stock RHEL
  ``dnf.conf`` and the versionlock plugin enabled, with the metadata cache primed so that
  ``dnf -C`` never needs to fetch;
* EL's boot: the version's kernel (5.14.0-427.13.1.el9_4 or 6.12.0-55.12.1.el10_0: modules,
  ``/usr/src/kernels``, a BLS entry, ``/boot/initramfs-*.img``), and ``dracut``, ``lsinitrd``
  and ``grubby`` shims;
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

from gpuconf_lab.image import LAB_DIR, mount_build_root, mount_lab_copy, run, unmount_lab_copy
from gpuconf_lab.runtime import IMAGES_DIR, REPO_IN_IMAGE, LabError

RPM_REPO_IN_IMAGE = "/var/lib/gpuconf-lab-rpm-repo"
KERNEL_RPMS_IN_IMAGE = "/usr/lib/gpuconf-lab/el/kernel-rpms"   # sim/el.py reads them there
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


def layer_path(base_layer: Path, el: str) -> Path:
    return base_layer.parent / f"el{el}-layer"


def ensure_el_layer(base_layer: Path, el: str, log=print) -> Path:
    """The cached EL `el` layer for this image, building it first when needed."""
    layer = layer_path(base_layer, el)
    if layer.is_dir():
        return layer
    with open(IMAGES_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if layer.is_dir():
            return layer
        log(f"building the EL {el} layer of the lab image (rpmbuild, createrepo_c, dnf; once per image)...")
        started = time.monotonic()
        build(base_layer, el)
        log(f"EL {el} layer built in {time.monotonic() - started:.1f}s")
    return layer


def build(base_layer: Path, el: str) -> None:
    tmp = base_layer.parent / f".build-el{el}"
    shutil.rmtree(tmp, ignore_errors=True)
    for name in ("layer", "work", "mnt", "base"):
        (tmp / name).mkdir(parents=True)
    log_path = base_layer.parent / f"build-el{el}.log"
    env = dict(os.environ, PYTHONPATH=str(LAB_DIR.parent), PYTHONDONTWRITEBYTECODE="1")
    with open(log_path, "wb") as log_file:
        result = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "gpuconf_lab.image_el",
             "build-inside", str(tmp), str(base_layer), el],
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=str(LAB_DIR.parent))
    if result.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = log_path.read_text(errors="replace")[-3000:]
        raise LabError(f"building the EL {el} layer failed (exit {result.returncode}); full log in {log_path}:\n{tail}")
    shutil.rmtree(tmp / "work")
    for name in ("mnt", "base"):
        (tmp / name).rmdir()
    (tmp / "layer").rename(layer_path(base_layer, el))
    shutil.rmtree(tmp)


def chroot(mnt: Path, *argv: str) -> None:
    run(["chroot", str(mnt), *argv])


def build_inside(tmp: Path, base_layer: Path, el: str) -> None:
    """Runs in a private mount namespace: every mount here vanishes when it exits."""
    layer, work, mnt, base = tmp / "layer", tmp / "work", tmp / "mnt", tmp / "base"
    mount_lab_copy(base_layer, base)   # overlayfs refuses a lower dir inside another lower (/)
    run(["mount", "-t", "overlay", f"gpuconf-lab-el{el}", "-o",
         f"lowerdir={base}:/,upperdir={layer},workdir={work}", str(mnt)])
    mount_build_root(mnt)
    remove_debian_only(mnt)
    install_rpm_repo(mnt, el)
    configure_dnf(mnt, el)
    install_base_packages(mnt, el)
    install_el_boot(mnt, el)
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


def install_rpm_repo(mnt: Path, el: str) -> None:
    from gpuconf_lab.repo_rpm import build_rpm_repo

    build_rpm_repo(mnt / RPM_REPO_IN_IMAGE.lstrip("/"), mnt / KERNEL_RPMS_IN_IMAGE.lstrip("/"), el)
    run(["chmod", "-R", "a+rX", str(mnt / RPM_REPO_IN_IMAGE.lstrip("/"))])


def configure_dnf(mnt: Path, el: str) -> None:
    from gpuconf_lab.repo_rpm import REPO_ID, repo_file

    files = {"etc/rpm/macros": "# gpuconf lab: the node's own rpm database, where EL keeps it\n%_dbpath /var/lib/rpm\n",
             "etc/dnf/dnf.conf": DNF_CONF, "etc/dnf/plugins/versionlock.conf": VERSIONLOCK_CONF,
             f"etc/yum.repos.d/{REPO_ID}.repo": repo_file(RPM_REPO_IN_IMAGE, el), "etc/default/grub": DEFAULT_GRUB,
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


def install_base_packages(mnt: Path, el: str) -> None:
    """The rpm database of a fresh Rocky 9.4 or 10.0 host, then the metadata cache dnf -C reads."""
    from gpuconf_lab.repo_rpm import MODULAR
    from gpuconf_lab.sim.catalog import EL_IMAGE_MACHINE_ID as IMAGE_MACHINE_ID

    (mnt / "var/lib/rpm").mkdir(parents=True, exist_ok=True)
    chroot(mnt, "rpm", "--initdb")
    chroot(mnt, "dnf", "-y", "-q", f"--releasever={el}", "install", *BASE_PACKAGES)
    chroot(mnt, "dnf", "-q", "makecache")
    # Root reads after the last transaction (the first one rebuilds sqlite's -shm WAL index of the
    # rpm and history databases, so a fresh node starts past that), and proof that dnf -C answers.
    reads = [["rpm", "-qa"], ["dnf", "-q", "-C", "list", "--installed"], ["dnf", "-q", "-C", "versionlock", "list"]]
    if el in MODULAR:   # EL 10's repository has no module metadata: `module list` would fail there
        reads.append(["dnf", "-q", "-C", "module", "list", "nvidia-driver"])
    for read in reads:
        chroot(mnt, *read)
    machine_id = mnt / "etc/machine-id"
    if machine_id.is_symlink():
        machine_id.unlink()
    machine_id.write_text(IMAGE_MACHINE_ID + "\n")   # each node's upper has its own


def install_el_boot(mnt: Path, el: str) -> None:
    from gpuconf_lab.sim.catalog import EL_KERNELS
    from gpuconf_lab.sim.install import run_sim, shim_text, write_file

    default_kernel = EL_KERNELS[el][0]
    for tool_path, (module, first) in EL_TOOLS.items():
        write_file(mnt, tool_path, shim_text(module, *((first,) if first else ())), 0o755)
    if not (mnt / "etc/redhat-release").exists():
        raise LabError("rocky-release did not install /etc/redhat-release: "
                       "the simulators would take the node for Debian")
    run_sim(mnt, "kernels", "install", default_kernel)
    if not (mnt / f"boot/initramfs-{default_kernel}.img").is_file():
        raise LabError(f"the EL {el} layer has no /boot/initramfs-{default_kernel}.img")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "build-inside":
        build_inside(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
    else:
        print("usage: python -m gpuconf_lab.image_el build-inside TMPDIR BASE_LAYER EL_MAJOR", file=sys.stderr)
        sys.exit(2)
