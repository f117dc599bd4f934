"""The simulated kernel's mounts: `mount`, `umount` and `findmnt` as util-linux prints them, read
back with gpuconf's own parsers; fstab's entries mounted at boot, a mount by hand gone after it;
/proc/meminfo from the node's profile (what the RAM disk's size is judged against)."""
from __future__ import annotations

from gpuconf.facts.mounts import meminfo_bytes, parse_findmnt_list

FINDMNT = ("findmnt", "-l", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS")
OURS = {"/mnt/ramdisk", "/mnt/byhand", "/mnt/nowhere"}


def simulated(node) -> dict:
    found = parse_findmnt_list(node.run("mounts", *FINDMNT, check=True).stdout)
    return {m.target: m for m in found if m.target in OURS}   # outside a node, the machine's own are listed too


def test_meminfo_is_the_profiles_memory(node):
    node.boot()
    assert meminfo_bytes(node.read("/run/gpuconf-lab/proc/meminfo")) == 1024 << 30   # a DGX A100's 1 TiB


def test_a_tmpfs_reads_back_as_the_kernel_prints_it_and_fstab_is_mounted_at_boot(node):
    node.boot()
    node.path("/mnt/ramdisk").mkdir(parents=True)
    node.path("/mnt/byhand").mkdir(parents=True)
    node.write("/etc/fstab", "# a comment\ntmpfs\t/mnt/ramdisk\ttmpfs\tsize=64G,mode=1777\t0\t0\n")
    assert node.run("mounts", "mount", "/mnt/ramdisk").returncode == 0
    assert node.run("mounts", "mount", "-t", "tmpfs", "-o", "size=1G", "tmpfs", "/mnt/byhand").returncode == 0
    mounts = simulated(node)
    assert mounts["/mnt/ramdisk"].options == ("rw", "relatime", "mode=1777", "size=67108864k", "inode64")
    assert mounts["/mnt/byhand"].fstype == "tmpfs" and "size=1048576k" in mounts["/mnt/byhand"].options
    again = node.run("mounts", "mount", "/mnt/ramdisk")
    assert again.returncode == 32 and "already mounted" in again.stderr
    remount = node.run("mounts", "mount", "-o", "remount,size=32G", "/mnt/ramdisk")
    assert remount.returncode == 0 and "size=33554432k" in simulated(node)["/mnt/ramdisk"].options
    node.boot()
    after = simulated(node)
    assert set(after) == {"/mnt/ramdisk"} and "size=67108864k" in after["/mnt/ramdisk"].options
    assert node.run("mounts", "umount", "/mnt/ramdisk").returncode == 0
    assert simulated(node) == {}
    gone = node.run("mounts", "umount", "/mnt/ramdisk")
    assert gone.returncode == 32 and "not mounted" in gone.stderr


def test_a_mount_point_that_does_not_exist_is_refused(node):
    node.boot()
    missing = node.run("mounts", "mount", "-t", "tmpfs", "-o", "size=1G", "tmpfs", "/mnt/nowhere")
    assert missing.returncode == 32 and "mount point does not exist" in missing.stderr
    assert simulated(node) == {}
