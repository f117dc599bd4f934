"""The simulated kernel: modules, DKMS, the initramfs snapshot, and boot.

These are the semantics gpuconf's nouveau and driver roles rely on, checked against real
messages and parsed with gpuconf's own fact parsers.
"""
from __future__ import annotations

import gzip
import shutil
import subprocess

import pytest

from gpuconf.facts.dkms import parse_dkms_status
from gpuconf.facts.kernel import parse_proc_modules
from gpuconf.facts.nvidia.driver import parse_modinfo, parse_proc_driver_version


def test_fresh_node_looks_like_a_cloud_image(node):
    loaded = node.lsmod()
    assert "nouveau" in loaded and "mlx5_core" in loaded
    assert not loaded & {"nvidia", "mlx5_ib", "ib_uverbs", "ib_umad", "rdma_ucm"}
    assert not node.path("/etc/modprobe.d/blacklist-nouveau.conf").exists()
    assert node.read("/run/gpuconf-lab/proc/osrelease") == "6.1.0-18-amd64\n"
    assert not node.path("/proc/driver/nvidia").exists()


def test_proc_modules_and_lsmod_have_the_real_formats(node):
    text = node.read("/run/gpuconf-lab/proc/modules")
    parsed = parse_proc_modules(text)
    by_name = {m.name: m for m in parsed.modules}
    assert by_name["nouveau"].state == "Live"
    assert "nouveau" in by_name["drm"].used_by
    line = next(line for line in text.splitlines() if line.startswith("drm "))
    name, size, refcount, users, live, address = line.split()
    assert size.isdigit() and int(refcount) == len(users.rstrip(",").split(",")) and users.endswith(",")
    assert live == "Live" and address.startswith("0xffffffffc")
    lsmod = node.run("kmod", "lsmod").stdout.splitlines()
    assert lsmod[0] == "Module                  Size  Used by"
    drm = next(row for row in lsmod if row.startswith("drm "))
    assert drm.split()[3] == "drm_display_helper,drm_kms_helper,drm_ttm_helper,nouveau,ttm"


def test_nvidia_is_not_found_before_dkms_builds_it(node):
    done = node.run("kmod", "modprobe", "nvidia")
    assert done.returncode == 1
    assert done.stderr == "modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.1.0-18-amd64\n"
    info = node.run("kmod", "modinfo", "-F", "version", "nvidia")
    assert info.returncode == 1 and info.stderr == "modinfo: ERROR: Module nvidia not found.\n"


def test_nvidia_refuses_to_load_while_nouveau_owns_the_gpus(node):
    node.install_driver()
    done = node.run("kmod", "modprobe", "nvidia")
    assert done.returncode == 1
    assert done.stderr == "modprobe: ERROR: could not insert 'nvidia': No such device\n"
    dmesg = node.run("journalctl", "dmesg").stdout
    assert "NVRM: The NVIDIA probe routine was not called for 8 device(s)." in dmesg
    assert "NVRM: nouveau, rivafb, nvidiafb or rivatv" in dmesg


def test_nouveau_loaded_at_boot_is_in_use(node):
    assert node.run("kmod", "modprobe", "-r", "nouveau").stderr == "modprobe: FATAL: Module nouveau is in use.\n"
    assert node.run("kmod", "rmmod", "nouveau").stderr == "rmmod: ERROR: Module nouveau is in use\n"
    assert node.run("kmod", "rmmod", "drm").stderr.startswith("rmmod: ERROR: Module drm is in use by: ")
    assert node.run("kmod", "rmmod", "nvidia").stderr == "rmmod: ERROR: Module nvidia is not currently loaded\n"
    assert node.run("kmod", "modprobe", "-r", "nvidia").returncode == 0   # not loaded: kmod is silent


def test_a_blacklist_counts_at_boot_only_once_it_is_in_the_initramfs(node):
    node.install_driver()
    node.blacklist_nouveau(update_initramfs=False)
    node.boot()
    assert "nouveau" in node.lsmod() and "nvidia" not in node.lsmod()
    node.run("initramfs", "update-initramfs", "-u", check=True)
    listing = node.run("initramfs", "lsinitramfs", "/boot/initrd.img-6.1.0-18-amd64").stdout.split()
    assert "etc/modprobe.d/blacklist-nouveau.conf" in listing
    node.boot()
    loaded = node.lsmod()
    assert "nouveau" not in loaded
    assert {"nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"} <= loaded
    version = parse_proc_driver_version(node.read("/proc/driver/nvidia/version"))
    assert version.version == "535.104.05"
    assert node.read("/sys/module/nvidia/version") == "535.104.05\n"
    assert node.read("/run/gpuconf-lab/proc/tainted") == "12289\n"     # P, O and E, as a real nvidia load


def test_the_initrd_is_a_gzipped_newc_cpio(node):
    blob = gzip.decompress(node.path("/boot/initrd.img-6.1.0-18-amd64").read_bytes())
    assert blob.startswith(b"070701") and b"TRAILER!!!" in blob
    node.blacklist_nouveau()
    node.run("initramfs", "unmkinitramfs", "/boot/initrd.img-6.1.0-18-amd64", "/tmp/initrd", check=True)
    assert node.read("/tmp/initrd/etc/modprobe.d/blacklist-nouveau.conf").startswith("blacklist nouveau\n")


@pytest.mark.skipif(shutil.which("cpio") is None, reason="needs cpio")
def test_real_cpio_reads_the_snapshot(node):
    node.blacklist_nouveau()
    initrd = node.path("/boot/initrd.img-6.1.0-18-amd64")
    done = subprocess.run(f"zcat -f '{initrd}' | cpio -i --quiet --to-stdout 'etc/modprobe.d/*'", shell=True,
                          capture_output=True, text=True, check=True)
    assert done.stdout == "blacklist nouveau\noptions nouveau modeset=0\n"


def test_update_initramfs_output_and_the_rebuild_without_the_blacklist(node):
    node.blacklist_nouveau()
    node.path("/etc/modprobe.d/blacklist-nouveau.conf").unlink()
    done = node.run("initramfs", "update-initramfs", "-u")
    assert done.stdout == "update-initramfs: Generating /boot/initrd.img-6.1.0-18-amd64\n"
    node.boot()
    assert "nouveau" in node.lsmod()


def test_modules_load_d_loads_at_boot(node):
    node.write("/etc/modules-load.d/rdma.conf", "# IB\nib_uverbs\nib_umad\nmlx5_ib\nrdma_ucm\nno_such_module\n")
    node.boot()
    assert {"ib_uverbs", "ib_umad", "mlx5_ib", "rdma_ucm", "ib_core"} <= node.lsmod()
    journal = node.run("journalctl", "journalctl", "-t", "systemd-modules-load").stdout
    assert "Failed to find module 'no_such_module'" in journal


def test_ib_modules_need_hcas(make_node):
    t4 = make_node("t4")
    done = t4.run("kmod", "modprobe", "mlx5_ib")
    assert done.returncode == 1 and "could not insert" in done.stderr and "No such device" in done.stderr
    assert "mlx5_core" not in t4.lsmod()


def test_dkms_status_builds_and_removal(node):
    assert node.run("dkms", "status").stdout == ""
    node.install_driver()
    status = node.run("dkms", "status").stdout
    assert status == "nvidia/535.104.05, 6.1.0-18-amd64, x86_64: installed\n"
    parsed = parse_dkms_status(status)
    assert parsed.entries[0].module == "nvidia" and parsed.entries[0].state == "installed"
    assert node.path("/lib/modules/6.1.0-18-amd64/updates/dkms/nvidia.ko").is_file()
    info = parse_modinfo(node.run("kmod", "modinfo", "nvidia").stdout)
    assert info.version == "535.104.05"
    node.run("dkms", "remove", "-m", "nvidia", "-v", "535.104.05", "--all", check=True)
    assert node.run("dkms", "status").stdout == ""
    assert not node.path("/lib/modules/6.1.0-18-amd64/updates/dkms/nvidia.ko").exists()


def test_kernel_upgrade_needs_a_dkms_build_for_the_new_kernel(node):
    node.install_driver()
    node.blacklist_nouveau()
    node.run("fault", "kernel-upgrade", "6.1.0-21-amd64", check=True)
    assert node.run("uname", "-r").stdout == "6.1.0-18-amd64\n"      # until the reboot
    node.boot()
    assert node.run("uname", "-r").stdout == "6.1.0-21-amd64\n"
    assert node.read("/run/gpuconf-lab/proc/osrelease") == "6.1.0-21-amd64\n"
    assert "nvidia" not in node.lsmod() and "nouveau" not in node.lsmod()   # initrd built with the blacklist
    assert node.run("dkms", "status").stdout == "nvidia/535.104.05, 6.1.0-18-amd64, x86_64: installed\n"
    assert "not found in directory /lib/modules/6.1.0-21-amd64" in node.run("kmod", "modprobe", "nvidia").stderr
    node.run("dkms", "autoinstall", check=True)
    assert "nvidia/535.104.05, 6.1.0-21-amd64, x86_64: installed" in node.run("dkms", "status").stdout
    node.run("kmod", "modprobe", "nvidia", check=True)
    assert "nvidia" in node.lsmod()


def test_uname_and_boot_id(node):
    assert node.run("uname", "-a").stdout.split()[2] == "6.1.0-18-amd64"
    assert "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)" in node.run("uname", "-v").stdout
    first = node.read("/run/gpuconf-lab/proc/boot_id")
    node.boot()
    assert node.read("/run/gpuconf-lab/proc/boot_id") != first
    assert node.read("/run/gpuconf-lab/proc/version").startswith("Linux version 6.1.0-18-amd64 ")


def test_non_root_cannot_load_modules(node):
    done = node.run("kmod", "modprobe", "ib_umad", GPUCONF_SIM_USER="gpuadmin")
    assert done.stderr == "modprobe: ERROR: could not insert 'ib_core': Operation not permitted\n"
    assert node.run("journalctl", "dmesg", GPUCONF_SIM_USER="gpuadmin").stderr == \
        "dmesg: read kernel buffer failed: Operation not permitted\n"
