"""``update-initramfs``, ``lsinitramfs``, ``unmkinitramfs``: the initramfs as a snapshot of
``/etc/modprobe.d``.

``/boot/initrd.img-<release>`` is a real gzip'ed ``newc`` cpio archive, so ``lsinitramfs``,
``cpio -t`` and a task's own checks can read it. What matters at boot is the copy of
``modprobe.d`` inside it: the early boot decides whether nouveau loads from that copy, not
from ``/etc``. Writing a blacklist without running ``update-initramfs -u`` therefore changes
nothing until the initramfs is rebuilt, exactly the trap real hosts set.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import sys
import time

import catalog
import el
import entry
import state
from modprobe_conf import CONFIG_DIRS, ModprobeConfig, parse

STATE_DIR = "/var/lib/initramfs-tools"
EARLY_MODULES = ("nouveau", "drm", "drm_kms_helper", "ttm", "drm_ttm_helper", "drm_display_helper")


def initrd_path(release: str) -> str:
    if el.is_el():
        return el.initrd_path(release)
    return f"/boot/initrd.img-{release}"


def version_key(release: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", release)]


def cpio_newc(entries: list[tuple[str, int, bytes]]) -> bytes:
    """A newc archive of (name, mode, data) entries."""
    out = io.BytesIO()
    mtime = int(time.time())

    def put(name: str, mode: int, data: bytes, ino: int) -> None:
        encoded = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, 1, mtime, len(data), 0, 0, 0, 0, len(encoded), 0)
        out.write(b"070701" + b"".join(b"%08X" % value for value in fields) + encoded)
        out.write(b"\0" * ((4 - (110 + len(encoded)) % 4) % 4))
        out.write(data)
        out.write(b"\0" * ((4 - len(data) % 4) % 4))

    for ino, (name, mode, data) in enumerate(entries, start=1):
        put(name, mode, data, ino)
    put("TRAILER!!!", 0, b"", 0)
    return out.getvalue()


def read_cpio(blob: bytes) -> list[tuple[str, int, bytes]]:
    """(name, mode, data) of every entry of a newc archive."""
    entries, offset = [], 0
    while offset + 110 <= len(blob) and blob[offset:offset + 6] == b"070701":
        fields = [int(blob[offset + 6 + 8 * i: offset + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        name_start = offset + 110
        name = blob[name_start:name_start + namesize - 1].decode(errors="replace")
        data_start = name_start + namesize + (4 - (110 + namesize) % 4) % 4
        data = blob[data_start:data_start + size]
        offset = data_start + size + (4 - size % 4) % 4
        if name == "TRAILER!!!":
            break
        entries.append((name, mode, data))
    return entries


def build(release: str, omit: frozenset = frozenset()) -> bytes:
    """Build the initrd for ``release`` from the filesystem as it is now (without the kernel
    modules named in ``omit``, as dracut's omit_drivers leaves them out)."""
    entries: list[tuple[str, int, bytes]] = []
    dirs = [".", "conf", "etc", "etc/modprobe.d", "usr", "usr/lib", "usr/lib/modprobe.d",
            "usr/lib/modules", f"usr/lib/modules/{release}", "scripts"]
    entries += [(d, 0o40755, b"") for d in dirs]
    entries.append(("init", 0o100755, b"#!/bin/sh\n# gpuconf lab initramfs (simulated early boot)\n"))
    entries.append(("conf/initramfs.conf", 0o100644, b"MODULES=most\nBUSYBOX=auto\nCOMPRESS=gzip\n"))
    seen = set()
    for directory in CONFIG_DIRS:
        target = "usr/lib/modprobe.d" if "lib" in directory else "etc/modprobe.d"
        real = state.path(directory)
        if not os.path.isdir(real) or os.path.realpath(real) in seen:
            continue
        seen.add(os.path.realpath(real))
        for name in sorted(os.listdir(real)):
            if name.endswith(".conf") and os.path.isfile(os.path.join(real, name)):
                with open(os.path.join(real, name), "rb") as handle:
                    entries.append((f"{target}/{name}", 0o100644, handle.read()))
    for module in EARLY_MODULES:
        if module in omit:
            continue
        relpath, text = catalog.in_tree_ko(module, release)
        entries.append((f"usr/lib/modules/{release}/{relpath}", 0o100644, text.encode()))
    return gzip.compress(cpio_newc(entries), compresslevel=6, mtime=0)


def write(release: str, omit: frozenset = frozenset()) -> None:
    blob = build(release, omit)
    real = state.path(initrd_path(release))
    os.makedirs(os.path.dirname(real), exist_ok=True)
    tmp = real + ".new"
    with open(tmp, "wb") as handle:
        handle.write(blob)
    os.replace(tmp, real)
    if el.is_el():
        return   # the sha1 record is initramfs-tools' own
    state.write_text(f"{STATE_DIR}/{release}", hashlib.sha1(blob).hexdigest() + "  " + initrd_path(release) + "\n")


def snapshot(release: str) -> list[tuple[str, int, bytes]] | None:
    try:
        with open(state.path(initrd_path(release)), "rb") as handle:
            return read_cpio(gzip.decompress(handle.read()))
    except (OSError, EOFError, ValueError):
        return None


def carries_module(release: str, name: str) -> bool:
    """Whether the initramfs of ``release`` holds module ``name`` (dracut may omit drivers).
    Without an initramfs the early stage is judged by its configuration alone, as before."""
    entries = snapshot(release)
    if entries is None:
        return True
    return any(entry_name.endswith(f"/{name}.ko") for entry_name, _mode, _data in entries)


def snapshot_config(release: str) -> ModprobeConfig:
    """The modprobe configuration the early boot of ``release`` sees (empty without an initrd)."""
    entries = snapshot(release) or []
    chosen = {}
    for name, _mode, data in entries:
        for prefix in ("usr/lib/modprobe.d/", "lib/modprobe.d/", "etc/modprobe.d/"):
            if name.startswith(prefix) and name.endswith(".conf"):
                chosen.setdefault(prefix, {})[name[len(prefix):]] = data.decode(errors="replace")
    merged: dict = {}
    for prefix in ("usr/lib/modprobe.d/", "lib/modprobe.d/", "etc/modprobe.d/"):
        merged.update(chosen.get(prefix, {}))
    return parse([merged[name] for name in sorted(merged)])


def known_versions() -> list[str]:
    found = set()
    for directory, prefix in (("/boot", "initrd.img-"), (STATE_DIR, "")):
        try:
            names = os.listdir(state.path(directory))
        except OSError:
            continue
        found.update(name[len(prefix):] for name in names if name.startswith(prefix) and
                     not name.endswith((".new", ".tmp")) and ".tmp." not in name)
    installed = set()
    try:
        installed = set(os.listdir(state.path("/lib/modules")))
    except OSError:
        pass
    return sorted((v for v in found if v in installed), key=version_key)


def update_initramfs(args: list[str]) -> int:
    action, version, verbose = None, None, False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-u", "-c", "-d"):
            action = arg
        elif arg == "-k":
            i += 1
            version = args[i] if i < len(args) else None
        elif arg.startswith("-k") and len(arg) > 2:
            version = arg[2:]
        elif arg == "-v":
            verbose = True
        elif arg in ("-t", "-b"):
            i += 1 if arg == "-b" else 0
        elif arg in ("-h", "--help"):
            print("Usage: update-initramfs {-c|-d|-u} [-k version] [-v] [-b directory]")
            return 0
        i += 1
    if action is None:
        sys.stderr.write("Usage: update-initramfs {-c|-d|-u} [-k version] [-v] [-b directory]\n")
        return 2
    if not state.is_root():
        return state.fail("update-initramfs", "error: run as root", 1)
    versions = known_versions()
    if version == "all":
        targets = versions
    elif version in (None, "latest"):
        targets = versions[-1:] if action != "-c" else [state.running_kernel()]
    else:
        targets = [version]
    for release in targets:
        if action == "-d":
            state.remove(initrd_path(release))
            state.remove(f"{STATE_DIR}/{release}")
            print(f"update-initramfs: Deleting {initrd_path(release)}")
            continue
        if not os.path.isdir(state.path(f"/lib/modules/{release}")):
            sys.stderr.write(f"update-initramfs: /lib/modules/{release} does not exist. Cannot update.\n")
            return 1
        if action == "-u" and not state.exists(initrd_path(release)):
            sys.stderr.write(f"update-initramfs: {initrd_path(release)} does not exist. Cannot update.\n")
            return 1
        print(f"update-initramfs: Generating {initrd_path(release)}")
        if verbose:
            print("Copying module directory kernel/drivers/gpu/drm/nouveau")
        write(release)
    return 0


def lsinitramfs(args: list[str]) -> int:
    long = "-l" in args
    files = [a for a in args if not a.startswith("-")]
    if not files:
        sys.stderr.write("Usage: lsinitramfs [--help] [-l] initramfs-file...\n")
        return 2
    for filename in files:
        real = state.path(filename) if filename.startswith("/") else filename
        try:
            with open(real, "rb") as handle:
                entries = read_cpio(gzip.decompress(handle.read()))
        except (OSError, EOFError, ValueError):
            sys.stderr.write(f"lsinitramfs: {filename}: not a valid initramfs\n")
            return 1
        for name, mode, data in entries:
            if long:
                kind = "d" if mode & 0o40000 else "-"
                print(f"{kind}rw-r--r--   1 root     root     {len(data):>8} {name}")
            else:
                print(name)
    return 0


def unmkinitramfs(args: list[str]) -> int:
    """``unmkinitramfs INITRAMFS DIR`` (``--list`` lists instead), as initramfs-tools has it."""
    files = [a for a in args if not a.startswith("-")]
    if "--list" in args and files:
        return lsinitramfs(files[:1])
    if len(files) != 2:
        sys.stderr.write("Usage: unmkinitramfs [-v] initramfs-file directory\n")
        return 2
    source, target = files
    try:
        with open(state.path(source) if source.startswith("/") else source, "rb") as handle:
            entries = read_cpio(gzip.decompress(handle.read()))
    except (OSError, EOFError, ValueError):
        sys.stderr.write(f"unmkinitramfs: {source}: not a valid initramfs\n")
        return 1
    base = state.path(target) if target.startswith("/") else target
    for name, mode, data in entries:
        path = os.path.normpath(os.path.join(base, name))
        if not path.startswith(os.path.normpath(base)):
            continue                      # never write outside the target directory
        if mode & 0o40000:
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(data)
    return 0


def main(argv: list[str]) -> int:
    tool, args = (argv[0], argv[1:]) if argv else ("update-initramfs", [])
    handler = {"lsinitramfs": lsinitramfs, "unmkinitramfs": unmkinitramfs}.get(tool, update_initramfs)
    return handler(args)


if __name__ == "__main__":
    entry.run(main)
