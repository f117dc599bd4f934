"""A digest of a node's upper dir: proof that something did or did not write to a node.

gpuconf's check mode must never change a host; on the lab that is checked by digesting the
overlay's upper dir before and after. The digest covers what a write can change (paths, types,
modes, owners, contents, symlink targets, whiteouts and the xattrs that change what the node
sees) and nothing a mere read changes (timestamps, overlayfs's lazily set bookkeeping xattrs).

Given the node's lower layers, it also leaves out an entry that overlayfs copied up without any
change: a file opened for writing and never written (sqlite opens its databases and their
``-shm`` files read-write even to read them, as root's ``rpm -q`` and ``dnf -C`` do on an EL
node), or a directory in which something was created and removed. Such a copy-up is identical
to what the node saw below it; any difference in content, mode, owner or xattrs still counts.
gpuconf's own cache of derived data (``/var/cache/gpuconf``, what an initramfs holds, the one
write a read-only request makes: docs/task-contract.md) is left out too.
The content of sqlite's ``-shm`` files (the WAL index, rebuilt by the first reader after a write)
is not covered either; the database and its ``-wal`` are.
"""
from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

# overlayfs's own bookkeeping, which it sets lazily on a mere lookup (a read) of a directory the
# host created in the upper dir. `opaque` and `redirect` change what the node sees: they count.
OVERLAY_BOOKKEEPING = {"trusted.overlay.origin", "trusted.overlay.impure", "trusted.overlay.uuid"}


def is_sqlite_shm(path: str) -> bool:
    """sqlite's `<database>-shm`: the WAL index, shared memory that any reader with write access
    rebuilds (root's `rpm -q` after a transaction), holding no data of its own. (Its database
    may be only in a lower layer: a read copies up the index, not the database.)"""
    return path.endswith("-shm")


def entry_line(path: str, relative: str) -> bytes:
    info = os.lstat(path)
    fields = [relative, f"{info.st_mode:o}", str(info.st_uid), str(info.st_gid)]
    if stat.S_ISREG(info.st_mode) and is_sqlite_shm(path):
        fields.append("sqlite wal-index")
    elif stat.S_ISREG(info.st_mode):
        content = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                content.update(block)
        fields.append(content.hexdigest())
    elif stat.S_ISLNK(info.st_mode):
        fields.append("-> " + os.readlink(path))
    elif stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
        fields.append(f"dev {os.major(info.st_rdev)}:{os.minor(info.st_rdev)}")   # 0:0 is a whiteout
    for name in sorted(set(os.listxattr(path, follow_symlinks=False)) - OVERLAY_BOOKKEEPING):
        value = os.getxattr(path, name, follow_symlinks=False)
        fields.append(f"xattr {name}={value.hex()}")
    return "\0".join(fields).encode(errors="surrogateescape") + b"\n"


def unchanged_copy_up(path: str, relative: str, lowers: Sequence[Path]) -> bool:
    """Whether the first lower layer holding `relative` has exactly this entry (overlay lookup order)."""
    for lower in lowers:
        below = os.path.join(lower, relative)
        if os.path.lexists(below):
            try:
                return entry_line(below, relative) == entry_line(path, relative)
            except OSError:
                return False
    return False


# gpuconf's cache of derived data, the one write its read-only requests make: what an
# initramfs holds, keyed by the initramfs's identity (docs/task-contract.md). No configuration.
DERIVED_CACHE = os.path.join("var", "cache", "gpuconf")


def walk(root: Path, lowers: Sequence[Path]) -> Iterator[tuple[str, str]]:
    """(path, relative path) of every entry under `root` a digest covers, in a stable order:
    all but gpuconf's derived-data cache (DERIVED_CACHE)."""
    for directory, dirnames, filenames in os.walk(root):
        if os.path.relpath(directory, root) == os.path.dirname(DERIVED_CACHE):
            dirnames[:] = [d for d in dirnames if d != os.path.basename(DERIVED_CACHE)]
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root)
            if not (lowers and unchanged_copy_up(path, relative, lowers)):
                yield path, relative


def digest_tree(root: Path, lowers: Sequence[Path] = ()) -> str:
    """sha256 over every entry under `root`, in a stable order (without unchanged copy-ups of
    `lowers`, the node's lower layers from the top)."""
    digest = hashlib.sha256(entry_line(str(root), "."))
    for path, relative in walk(root, lowers):
        digest.update(entry_line(path, relative))
    return digest.hexdigest()


def list_tree(root: Path, lowers: Sequence[Path] = ()) -> list[str]:
    """The entries a digest covers, for a readable diff when two digests differ."""
    lines = [entry_line(str(root), ".").decode(errors="replace").rstrip("\n")]
    for path, relative in walk(root, lowers):
        lines.append(entry_line(path, relative).decode(errors="replace").rstrip("\n"))
    return lines
