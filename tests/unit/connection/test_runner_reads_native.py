"""The reads of the task contract, run by the real remote runner on this machine (-c local):
argv commands with no shell, the read-only program list enforced on the host too, globs of
small files, the host's identity, and an initramfs read with no zcat or cpio process."""
import gzip
import os
import sys
from pathlib import Path

import pytest

from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.local import LocalConnection
from gpuconf.facts.base import FactUnavailable, command, file_glob, host_info
from gpuconf.tasks.initramfs import initramfs_fact


def call(*facts, readonly: bool = True) -> list:
    connection = LocalConnection(ConnectionSpec.from_vars("localhost", {"python": sys.executable}))
    replies = connection.call([dict(f.request) for f in facts], readonly, 30)
    values = []
    for fact, reply in zip(facts, replies, strict=True):
        try:
            values.append(fact.parse(reply))
        except FactUnavailable as exc:
            values.append(exc)
    return values


def test_an_argv_is_never_read_by_a_shell(tmp_path):
    odd = tmp_path / "a b; echo pwned $(id)"
    odd.write_text("inside\n")
    [out] = call(command(["cat", str(odd)], lambda o: o))
    assert (out.rc, out.stdout) == (0, "inside\n")


def test_alternatives_grep_tail_and_unless_exists(tmp_path):
    text = tmp_path / "log"
    text.write_text("".join(f"line {i} {'Xid' if i % 2 else 'ok'}\n" for i in range(10)))
    missing, present = str(tmp_path / "none"), str(text)
    first, fallback, skipped = call(
        command(["cat", present], lambda o: o.stdout, grep="xid", tail=2),
        command(["cat", missing], lambda o: (o.rc, o.stdout), alternatives=[["cat", present]]),
        command(["cat", present], lambda o: (o.rc, o.stdout), unless_exists=present))
    assert first == "line 7 Xid\nline 9 Xid\n"
    assert fallback == (0, text.read_text())
    assert skipped == (0, "")


def test_a_program_that_is_not_read_only_is_refused_at_definition_and_on_the_host(tmp_path):
    with pytest.raises(ValueError, match="not a read-only program"):
        command(["rm", "-rf", str(tmp_path)], lambda o: o)
    with pytest.raises(ValueError, match="not a read-only use of systemctl"):
        command(["systemctl", "restart", "sshd"], lambda o: o)
    victim = tmp_path / "keep"
    victim.write_text("x")
    forged = command(["cat", str(victim)], lambda o: o)
    forged.request["argv"] = ["rm", str(victim)]  # a bug that bypassed the constructor
    [out] = call(forged)
    assert "refused" in out.stderr and victim.exists()


def test_glob_reads_small_files_links_and_names(tmp_path):
    for name, vendor in (("0000:07:00.0", "0x10de"), ("0000:08:00.0", "0x8086")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "vendor").write_text(vendor + "\n")
    os.symlink("/dev/null", tmp_path / "fd0")
    contents, links, names = call(
        file_glob([f"{tmp_path}/*/vendor"], lambda f: f),
        file_glob([f"{tmp_path}/fd*"], lambda f: f, what="link"),
        file_glob([f"{tmp_path}/0000:*"], lambda f: sorted(f), what="name"))
    assert contents == {f"{tmp_path}/0000:07:00.0/vendor": "0x10de", f"{tmp_path}/0000:08:00.0/vendor": "0x8086"}
    assert links == {f"{tmp_path}/fd0": "/dev/null"}
    assert names == [f"{tmp_path}/0000:07:00.0", f"{tmp_path}/0000:08:00.0"]


def test_host_identity_without_a_process():
    [host] = call(host_info())
    assert host["hostname"] == os.uname().nodename and host["cpus"] == len(os.sched_getaffinity(0))


def newc(files: dict[str, bytes]) -> bytes:
    """A newc cpio archive, as the kernel and update-initramfs write them."""
    out = b""
    for number, (name, data) in enumerate([*files.items(), ("TRAILER!!!", b"")]):
        mode = 0o100644 if name != "TRAILER!!!" else 0
        fields = [number + 1, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0]
        header = b"070701" + b"".join(b"%08X" % f for f in fields)
        entry = header + name.encode() + b"\0"
        entry += b"\0" * (-len(entry) % 4) + data
        out += entry + b"\0" * (-len(entry) % 4)
    return out + b"\0" * (-len(out) % 512)


def test_an_initramfs_with_early_microcode_then_gzip_is_read_by_the_runner(tmp_path, monkeypatch):
    early = newc({"kernel/x86/microcode/GenuineIntel.bin": b"\x01" * 10})
    main = gzip.compress(newc({"etc/modprobe.d/blacklist-nouveau.conf": b"blacklist nouveau\n",
                               "etc/modprobe.d/nvidia.conf": b"options nvidia NVreg_X=1\n", "bin/sh": b"ELF"}))
    image = tmp_path / "initrd.img-6.8.0-45-generic"
    image.write_bytes(early + main)
    fact = initramfs_fact("6.8.0-45-generic")
    fact.request["paths"] = [str(image)]
    missing = initramfs_fact("6.8.0-45-generic")
    missing.request["paths"] = [str(tmp_path / "initrd.img-none")]
    found, absent = call(fact, missing)
    assert found == {"etc/modprobe.d/blacklist-nouveau.conf": "blacklist nouveau\n",
                     "etc/modprobe.d/nvidia.conf": "options nvidia NVreg_X=1\n"}
    assert absent is None
    assert Path(image).read_bytes() == early + main


def test_the_nvidia_module_in_an_initramfs_is_found_by_name_without_its_content(tmp_path):
    """imex_channel asks whether nvidia loads from the initramfs: a module is megabytes, so only
    its name comes back (`names_only`)."""
    from gpuconf.facts.base import Fact
    from gpuconf.tasks.imex import NVIDIA_IN_INITRAMFS

    module = "usr/lib/modules/6.8.0-45-generic/updates/dkms/nvidia.ko.zst"
    image = tmp_path / "initrd.img-6.8.0-45-generic"
    image.write_bytes(gzip.compress(newc({module: b"\x7fELF" + b"\0" * 4096, "etc/modprobe.d/x.conf": b"x\n"})))
    fact = Fact(NVIDIA_IN_INITRAMFS.key, dict(NVIDIA_IN_INITRAMFS.request, paths=[str(image)]),
                NVIDIA_IN_INITRAMFS.parse)
    connection = LocalConnection(ConnectionSpec.from_vars("localhost", {"python": sys.executable}))
    reply = connection.call([dict(fact.request)], True, 30)[0]
    assert reply["files"] == {module: ""}
    assert fact.parse(reply) == [module]


def test_an_initramfs_is_read_again_only_once_it_has_changed(tmp_path):
    """The runner's one write in a read-only request: what the initramfs holds, keyed by its
    identity, under GPUCONF_CACHE_DIR here (tests/conftest.py), /var/cache/gpuconf on a host."""
    image = tmp_path / "initrd.img-6.8.0-45-generic"
    image.write_bytes(gzip.compress(newc({"etc/modprobe.d/a.conf": b"blacklist nouveau\n"})))
    fact = initramfs_fact("6.8.0-45-generic")
    fact.request["paths"] = [str(image)]
    connection = LocalConnection(ConnectionSpec.from_vars("localhost", {"python": sys.executable}))

    def read() -> tuple:
        [reply] = connection.call([dict(fact.request)], True, 30)
        return reply.get("cached"), fact.parse(reply)

    first, again = read(), read()
    if os.geteuid() != 0:
        assert first[0] is False and again[0] is False  # only root keeps the cache
        return
    assert first == (False, {"etc/modprobe.d/a.conf": "blacklist nouveau\n"})
    assert again == (True, {"etc/modprobe.d/a.conf": "blacklist nouveau\n"})
    image.write_bytes(gzip.compress(newc({"etc/modprobe.d/a.conf": b"blacklist nvidiafb\n"})))
    assert read() == (False, {"etc/modprobe.d/a.conf": "blacklist nvidiafb\n"})
    cached = [p for p in (Path(os.environ["GPUCONF_CACHE_DIR"]) / "initramfs").iterdir() if str(image) in p.read_text()]
    assert [p.stat().st_mode & 0o777 for p in cached] == [0o600]  # one entry per initramfs, overwritten
