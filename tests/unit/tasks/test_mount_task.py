"""The mount task's check, a table of cases: the mount table and /etc/fstab in, the changes out;
and the RAM disk refused when it would leave the jobs too little memory."""
from __future__ import annotations

import pytest

from gpuconf.facts.base import FileState, file_state
from gpuconf.facts.mounts import Mount
from gpuconf.tasks.base import Facts, Refused
from gpuconf.tasks.mounts import FSTAB, MEMINFO, TABLE, MountParams, MountTask

ROOT = Mount("/", "/dev/nvme0n1p2", "ext4", ("rw", "relatime"))
RAMDISK = Mount("/mnt/ramdisk", "tmpfs", "tmpfs", ("rw", "relatime", "size=67108864k", "inode64"))
FSTAB_BASE = "UUID=0a1b / ext4 defaults 0 1\n/swap.img\tnone\tswap\tsw\t0\t0\n"
LINE = "tmpfs\t/mnt/ramdisk\ttmpfs\tsize=64G\t0\t0\n"
TIB = 1 << 40


def facts(table, fstab: str | None, memory: int = TIB):
    task = MountTask()
    fstab_state = FileState(FSTAB, fstab is not None, "file", 0o644, content=(fstab or "").encode())
    meminfo = FileState("/proc/meminfo", True, "file", content=f"MemTotal:       {memory // 1024} kB\n".encode())
    values = {TABLE.key: tuple(table), file_state(FSTAB).key: fstab_state, MEMINFO.key: meminfo}
    return task, Facts(values, task.reads(None), {})


def check(table, fstab, memory=TIB, **params):
    task, found = facts(table, fstab, memory)
    values = {"path": "/mnt/ramdisk", "src": "tmpfs", "fstype": "tmpfs", "opts": "size=64G"} | params
    return task.check(MountParams.model_validate(values), found)


def commands(verdict):
    return [op.command or op.request.get("path") for change in verdict.changes for op in change.ops]


def test_a_fresh_node_gets_its_fstab_line_then_the_mount_from_it():
    verdict = check([ROOT], FSTAB_BASE)
    assert commands(verdict) == ["/etc/fstab", "mkdir -p /mnt/ramdisk", "mount /mnt/ramdisk"]
    written = verdict.changes[0].ops[0].request
    import base64
    assert base64.b64decode(written["content_b64"]).decode() == FSTAB_BASE + LINE   # the other lines kept


def test_mounted_and_in_fstab_is_in_sync_though_the_kernel_prints_the_size_in_k():
    verdict = check([ROOT, RAMDISK], FSTAB_BASE + LINE)
    assert verdict.changes == [] and "tmpfs is mounted at /mnt/ramdisk" in verdict.message


def test_a_new_size_remounts_live_and_rewrites_the_line():
    verdict = check([ROOT, RAMDISK], FSTAB_BASE + LINE, opts="size=128G")
    assert commands(verdict) == ["/etc/fstab", "mount -o remount,size=128G /mnt/ramdisk"]


def test_a_mount_missing_from_fstab_is_drift_even_while_mounted():
    verdict = check([ROOT, RAMDISK], FSTAB_BASE)
    assert [c.summary for c in verdict.changes] == [
        "/etc/fstab: mount tmpfs at /mnt/ramdisk at boot (tmpfs, size=64G)"]


def test_absent_unmounts_and_drops_only_its_line():
    verdict = check([ROOT, RAMDISK], FSTAB_BASE + LINE, state="absent")
    assert commands(verdict) == ["/etc/fstab", "umount /mnt/ramdisk"]
    assert check([ROOT], FSTAB_BASE, state="absent").changes == []


def test_another_filesystem_at_the_path_is_unmounted_and_mounted_again():
    nfs = Mount("/data", "storage:/export/data", "nfs4", ("rw", "relatime", "vers=4.2"))
    verdict = check([ROOT, nfs], "storage:/export/data /data nfs4 defaults 0 0\n", path="/data", src="/dev/nvme1n1",
                    fstype="xfs", opts="defaults,noatime")
    assert commands(verdict)[-2:] == ["umount /data", "mount /data"]


def test_two_lines_for_the_path_become_one():
    verdict = check([ROOT, RAMDISK], FSTAB_BASE + LINE + "tmpfs /mnt/ramdisk tmpfs size=8G 0 0\n")
    import base64
    assert base64.b64decode(verdict.changes[0].ops[0].request["content_b64"]).decode() == FSTAB_BASE + LINE


def test_a_ram_disk_that_leaves_the_jobs_too_little_is_refused():
    with pytest.raises(Refused, match=r"a 64.0 GiB RAM disk at /mnt/ramdisk would leave the jobs 32.0 GiB of the "
                                      r"node's 96.0 GiB; they need 48.0 GiB \(keep_for_jobs: 50%\)"):
        check([ROOT], FSTAB_BASE, memory=96 << 30, keep_for_jobs="50%")
    assert check([ROOT], FSTAB_BASE, memory=TIB, keep_for_jobs="50%").changes


def test_unreadable_mount_table_is_unknown():
    from gpuconf.tasks.base import Unknown
    task, found = facts([], FSTAB_BASE)
    found._values[TABLE.key] = "findmnt failed (exit 1): boom"   # what the fact's parse gives then
    with pytest.raises(Unknown, match="findmnt failed"):
        task.check(MountParams(path="/mnt/ramdisk", src="tmpfs", fstype="tmpfs"), found)


def test_paths_and_fields_are_validated():
    with pytest.raises(ValueError):
        MountParams(path="mnt/x", src="tmpfs", fstype="tmpfs")
    with pytest.raises(ValueError):
        MountParams(path="/mnt/x", src="tmp fs", fstype="tmpfs")
