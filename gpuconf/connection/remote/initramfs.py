# The remote runner, part 4 of 5: the initramfs reader (gpuconf/facts/wire.py: CpioRequest).
# It stays on the host: an image is tens of MB, and only the members asked for come back; what
# they mean is read on the controller (gpuconf/facts/initramfs.py).
import hashlib
import json
import os
import subprocess

from gpuconf.connection.remote.process import MYPY
from gpuconf.connection.remote.writes import replace_file

if MYPY:
    from typing import Dict  # noqa: F401, UP035 - for the type comments (Python 3.6)


def newc_members(data, pattern, found, names_only=False):
    """Members of one or more concatenated newc cpio archives (an early microcode archive
    first, then the main one) whose names match `pattern` (with `names_only`, their names
    with empty contents: a kernel module is megabytes). Returns where parsing stopped."""
    import fnmatch
    pos = 0
    while pos + 110 <= len(data) and data[pos:pos + 6] in (b"070701", b"070702"):
        header = data[pos:pos + 110]
        size, name_size = int(header[54:62], 16), int(header[94:102], 16)
        name = data[pos + 110:pos + 110 + name_size - 1].decode("utf-8", "replace")
        body = (pos + 110 + name_size + 3) & ~3
        if name == "TRAILER!!!":
            pos = (body + size + 3) & ~3
            while pos < len(data) and data[pos:pos + 1] == b"\0":
                pos += 1
            continue
        if fnmatch.fnmatch(name, pattern) and int(header[14:22], 16) & 0o170000 == 0o100000:
            found[name] = "" if names_only else data[body:body + size].decode("utf-8", "replace")
        pos = (body + size + 3) & ~3
    return pos


# The one write a read-only request makes: what an initramfs holds, derived from it and keyed
# by its identity, so that a check reads (decompresses) an initramfs only once it has changed.
# Derived data outside any configuration, written only here, by root (docs/task-contract.md).
# GPUCONF_CACHE_DIR moves it (the test suite's runs on its own machine); sudo's clean
# environment keeps it where it is on a host reached over SSH.
CPIO_CACHE = os.path.join(os.environ.get("GPUCONF_CACHE_DIR") or "/var/cache/gpuconf", "initramfs")


def cpio_cache_path(path, members):
    return os.path.join(CPIO_CACHE, hashlib.sha256(("%s\0%s" % (path, members)).encode()).hexdigest()[:32] + ".json")


def cpio_stamp(st):
    # a rebuild replaces the file (a new inode) or rewrites it (size, mtime, ctime)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def cpio_cached(path, members, st):
    try:
        with open(cpio_cache_path(path, members)) as handle:
            entry = json.load(handle)
        if entry["path"] == path and entry["members"] == members and entry["stamp"] == cpio_stamp(st):
            return dict(entry["files"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def cpio_remember(path, members, st, found):
    """Write the cache entry atomically (temporary file, fsync, rename); as any other user
    than root, or on a read-only /var, there is no cache and nothing is written."""
    if os.geteuid() != 0:
        return
    target = cpio_cache_path(path, members)
    entry = {"path": path, "members": members, "stamp": cpio_stamp(st), "files": found}
    try:
        os.makedirs(CPIO_CACHE, 0o700, exist_ok=True)
        replace_file("%s.%d.tmp" % (target, os.getpid()), target, json.dumps(entry).encode(), os.O_TRUNC)
    except OSError:
        pass


def op_cpio(op):
    """The files matching `members` inside an initramfs, read here with no process: newc
    cpio archives, plain or compressed with gzip or xz (Debian's and Ubuntu's defaults;
    zstd through the zstd program). Read again only when the file has changed since the
    last read (CPIO_CACHE): `cached` says which."""
    paths = op["paths"]  # the first that exists (Debian's, then dracut's name)
    if any("{kernel}" in path for path in paths):
        with open("/proc/sys/kernel/osrelease") as handle:
            release = handle.read().strip()
        paths = [path.replace("{kernel}", release) for path in paths]
    data, members, names_only = None, op["members"], op.get("names_only", False)
    key = [members, "names only"] if names_only else members  # the cache's: a names-only read has no content
    for path in paths:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            continue
        known = cpio_cached(path, key, st)
        if known is not None:
            return {"exists": True, "path": path, "files": known, "cached": True}
        try:
            with open(path, "rb") as handle:
                st = os.fstat(handle.fileno())  # the identity of what is read
                data = handle.read()
            break
        except FileNotFoundError:
            continue
    if data is None:
        return {"exists": False, "path": paths[0]}
    found, pos = {}, 0  # type: Dict[str, bytes], int
    while pos < len(data):
        rest = data[pos:]
        if rest[:6] in (b"070701", b"070702"):
            pos += newc_members(rest, members, found, names_only) or len(rest)
            continue
        if rest[:2] == b"\x1f\x8b":
            import gzip
            rest = gzip.decompress(rest)
        elif rest[:6] == b"\xfd7zXZ\x00":
            import lzma
            rest = lzma.decompress(rest)
        elif rest[:4] == b"\x28\xb5\x2f\xfd":
            rest = subprocess.run(["zstd", "-dc"], input=rest, stdout=subprocess.PIPE, check=True,
                                  timeout=float(op.get("timeout", 60))).stdout
        else:
            return {"error": "%s: unknown format at byte %d" % (path, pos)}
        newc_members(rest, members, found, names_only)
        break
    cpio_remember(path, key, st, found)
    return {"exists": True, "path": path, "files": found, "cached": False}
