"""An EL 9 node's boot: grubby's BLS entries become /proc/cmdline, dracut writes the initramfs.

The node here is the simulators' image plus what the el9 layer adds (``/etc/redhat-release``, the
EL kernel installed by ``kernels install``); no namespaces, no rpm. The formats are grubby's
and dracut's own (grubby-bls on EL 9).
"""
from __future__ import annotations

import shutil

import pytest

from gpuconf_lab.sim.catalog import EL_DEFAULT_KERNEL, EL_IMAGE_MACHINE_ID, EL_UPGRADE_KERNEL

from .conftest import Node

ENTRY = f"/boot/loader/entries/{EL_IMAGE_MACHINE_ID}-{EL_DEFAULT_KERNEL}.conf"


@pytest.fixture(scope="module")
def el_image(image, tmp_path_factory):
    """The simulators' image turned into an EL 9 one, as image_el9 does it."""
    root = tmp_path_factory.mktemp("el9") / "root"
    shutil.copytree(image, root, symlinks=True)
    (root / "etc/rocky-release").write_text("Rocky Linux release 9.4 (Blue Onyx)\n")
    (root / "etc/redhat-release").symlink_to("rocky-release")
    (root / "etc/machine-id").write_text(EL_IMAGE_MACHINE_ID + "\n")
    for stale in ("var/lib/gpuconf-lab/kernel.json", "lib/modules/6.1.0-18-amd64"):
        path = root / stale
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    node = Node(root, tmp_path_factory.mktemp("el9-fabric"), "a100")
    node.run("kernels", "install", EL_DEFAULT_KERNEL, check=True)
    return root


@pytest.fixture
def el_node(el_image, tmp_path) -> Node:
    root = tmp_path / "el9"
    shutil.copytree(el_image, root, symlinks=True)
    (tmp_path / "fabric").mkdir()
    node = Node(root, tmp_path / "fabric", "a100")
    node.boot()
    return node


def cmdline(node: Node) -> str:
    return node.read("/run/gpuconf-lab/proc/cmdline")


def test_the_kernel_is_els_and_boots_from_its_bls_entry(el_node):
    assert el_node.read("/run/gpuconf-lab/proc/osrelease") == EL_DEFAULT_KERNEL + "\n"
    assert el_node.run("uname", "-v").stdout.startswith("#1 SMP PREEMPT_DYNAMIC Wed May 1 19:11:28 UTC 2024")
    assert "(mockbuild@iad1-prod-build001.bld.equ.rockylinux.org)" in el_node.read("/run/gpuconf-lab/proc/version")
    assert el_node.path(f"/usr/src/kernels/{EL_DEFAULT_KERNEL}/Makefile").is_file()
    assert el_node.path(f"/lib/modules/{EL_DEFAULT_KERNEL}/build").resolve().name == EL_DEFAULT_KERNEL
    assert cmdline(el_node) == (f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{EL_DEFAULT_KERNEL} root=/dev/mapper/rl-root ro "
                                "crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap "
                                "rd.lvm.lv=rl/root rd.lvm.lv=rl/swap console=ttyS0,115200n8\n")
    assert "nouveau" in el_node.lsmod()


def test_grubby_info_prints_grubbys_format(el_node):
    done = el_node.run("grubby", "--info=ALL", check=True)
    assert done.stdout == (
        "index=0\n"
        f'kernel="/boot/vmlinuz-{EL_DEFAULT_KERNEL}"\n'
        'args="ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap rd.lvm.lv=rl/root '
        'rd.lvm.lv=rl/swap console=ttyS0,115200n8 $tuned_params"\n'
        'root="/dev/mapper/rl-root"\n'
        f'initrd="/boot/initramfs-{EL_DEFAULT_KERNEL}.img $tuned_initrd"\n'
        f'title="Rocky Linux ({EL_DEFAULT_KERNEL}) 9.4 (Blue Onyx)"\n'
        f'id="{EL_IMAGE_MACHINE_ID}-{EL_DEFAULT_KERNEL}"\n')
    assert el_node.run("grubby", "--default-kernel").stdout == f"/boot/vmlinuz-{EL_DEFAULT_KERNEL}\n"
    assert el_node.run("grubby", "--info=DEFAULT").stdout == done.stdout
    assert el_node.run("grubby", "--info=/boot/vmlinuz-nope").returncode == 1


def test_grubby_args_reach_proc_cmdline_at_the_next_boot_only(el_node):
    done = el_node.run("grubby", "--update-kernel=ALL", "--args=rd.driver.blacklist=nouveau nvidia-drm.modeset=1",
                       "--remove-args=crashkernel", check=True)
    assert done.stdout == ""
    assert "rd.driver.blacklist" not in cmdline(el_node)          # the running kernel keeps its line
    options = el_node.read(ENTRY)
    assert "options root=/dev/mapper/rl-root ro resume=" in options
    assert "rd.driver.blacklist=nouveau nvidia-drm.modeset=1 $tuned_params" in options
    assert "nvidia-drm.modeset=1" in el_node.read("/etc/kernel/cmdline")   # what a later kernel starts from
    el_node.run("grubby", "--update-kernel=DEFAULT", "--args=nvidia-drm.modeset=0", check=True)
    el_node.boot()
    line = cmdline(el_node)
    assert "crashkernel" not in line and "rd.driver.blacklist=nouveau nvidia-drm.modeset=0" in line
    # rd.driver.blacklist keeps nouveau out of the initramfs stage only: udev loads it afterwards
    # unless modprobe.d (nvidia-kmod-common's /usr/lib/modprobe.d/nvidia.conf) or modprobe.blacklist says no
    assert "nouveau" in el_node.lsmod()
    el_node.run("grubby", "--update-kernel=ALL", "--args=modprobe.blacklist=nouveau", check=True)
    el_node.boot()
    assert "nouveau" not in el_node.lsmod()
    denied = el_node.run("grubby", "--update-kernel=ALL", "--args=quiet", GPUCONF_SIM_USER="gpuadmin")
    assert denied.returncode == 1 and "Permission denied" in denied.stderr


def test_dracut_writes_the_initramfs_els_way(el_node):
    image = f"/boot/initramfs-{EL_DEFAULT_KERNEL}.img"
    assert not el_node.path(f"/boot/initrd.img-{EL_DEFAULT_KERNEL}").exists()
    refused = el_node.run("dracut", "dracut")
    assert refused.returncode == 1
    assert refused.stderr == f"dracut: Will not override existing initramfs ({image}) without --force\n"
    el_node.write("/etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau\n")
    el_node.write("/etc/dracut.conf.d/nouveau.conf", 'omit_drivers+=" nouveau "\n')
    done = el_node.run("dracut", "dracut", "-f", "--kver", EL_DEFAULT_KERNEL)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    listing = el_node.run("dracut", "lsinitrd", check=True).stdout
    assert listing.startswith(f"Image: {image}: ") and " etc/modprobe.d/blacklist-nouveau.conf\n" in listing
    assert "/drm.ko\n" in listing and "/nouveau.ko\n" not in listing   # omit_drivers
    assert el_node.run("dracut", "lsinitrd", "-f", "etc/modprobe.d/blacklist-nouveau.conf").stdout == \
        "blacklist nouveau\n"
    el_node.boot()
    assert "nouveau" not in el_node.lsmod()


def test_kernel_upgrade_adds_an_entry_that_becomes_the_default(el_node):
    el_node.run("grubby", "--update-kernel=ALL", "--args=rd.driver.blacklist=nouveau", check=True)
    done = el_node.run("fault", "kernel-upgrade", check=True)
    assert EL_UPGRADE_KERNEL in done.stdout
    info = el_node.run("grubby", "--info=ALL", check=True).stdout
    assert info.index(f"vmlinuz-{EL_UPGRADE_KERNEL}") < info.index(f"vmlinuz-{EL_DEFAULT_KERNEL}")   # newest first
    assert el_node.run("grubby", "--default-kernel").stdout == f"/boot/vmlinuz-{EL_UPGRADE_KERNEL}\n"
    assert el_node.path(f"/boot/initramfs-{EL_UPGRADE_KERNEL}.img").is_file()
    el_node.boot()
    assert el_node.run("uname", "-r").stdout == EL_UPGRADE_KERNEL + "\n"
    assert "rd.driver.blacklist=nouveau" in cmdline(el_node)   # from /etc/kernel/cmdline
    el_node.run("grubby", f"--set-default=/boot/vmlinuz-{EL_DEFAULT_KERNEL}", check=True)
    el_node.boot()
    assert el_node.run("uname", "-r").stdout == EL_DEFAULT_KERNEL + "\n"
