"""Mount table and fstab parsers on real captures (jc's CentOS 7.7 and Ubuntu 18.04 fixtures)."""
from __future__ import annotations

from gpuconf.facts.mounts import kernel_options, missing_options, parse_findmnt_list, parse_fstab, size_bytes
from tests.real import read_real

CASES = [
    "findmnt/findmnt-l-centos-7.7-jc.txt",
    "fstab/fstab-ubuntu-18.04-jc.txt",
    "fstab/fstab-centos-7.7-jc.txt",
]


def test_findmnt_list_centos():
    mounts = parse_findmnt_list(read_real("findmnt/findmnt-l-centos-7.7-jc.txt"))
    by_target = {m.target: m for m in mounts}
    assert len(mounts) == 31   # 32 lines: the header and 31 mounts
    root = by_target["/"]
    assert (root.source, root.fstype) == ("/dev/mapper/centos-root", "xfs")
    user = by_target["/run/user/1000"]
    assert user.fstype == "tmpfs" and "size=386136k" in user.options and "mode=700" in user.options
    assert by_target["/var/lib/docker/containers"].source == "/dev/mapper/centos-root[/var/lib/docker/containers]"
    assert by_target["/sys/fs/cgroup/net_cls,net_prio"].fstype == "cgroup"   # a comma in a target


def test_fstab_ubuntu_with_tabs_and_a_comment_after_the_fields():
    entries = parse_fstab(read_real("fstab/fstab-ubuntu-18.04-jc.txt"))
    assert [(e.spec, e.file, e.vfstype, e.options) for e in entries] == [
        ("UUID=011527a0-c72a-4c00-a50e-ee90da26b6e2", "/", "ext4", ("defaults",)),
        ("/swap.img", "none", "swap", ("sw",)),
    ]


def test_fstab_centos_header_comments_and_line_numbers():
    text = read_real("fstab/fstab-centos-7.7-jc.txt")
    entries = parse_fstab(text)
    assert [e.file for e in entries] == ["/", "/boot", "swap"]
    assert text.splitlines()[entries[1].line].startswith("UUID=05d927bb")
    assert (entries[0].freq, entries[0].passno) == (0, 0)


def test_a_tmpfs_size_compares_in_bytes_as_the_kernel_prints_it():
    assert size_bytes("64G") == size_bytes("67108864k") == 64 << 30
    assert size_bytes("50%", 1 << 40) == 1 << 39 and size_bytes("50%") is None and size_bytes("big") is None
    assert missing_options(["size=64G"], ("rw", "relatime", "size=67108864k")) == []
    assert missing_options(["size=128G", "noatime"], ("rw", "relatime", "size=67108864k")) == ["size=128G", "noatime"]
    assert kernel_options(["defaults", "nofail", "x-systemd.automount", "_netdev", "noatime", "rw"]) == ["noatime", "rw"]
    assert missing_options(["rw"], ("ro",)) == ["rw"] and missing_options(["rw"], ("rw",)) == []
