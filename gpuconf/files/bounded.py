"""The user's files: read within bounds, and written whole or not at all.

Playbooks, inventories, variables files, `-e @file`, role files, templates, `--limit @file`
and the configuration are all read here: a regular file (after symlinks) of at most
MAX_FILE_BYTES. A playbook that was a symlink to /dev/zero made `validate` run forever; a FIFO
blocked it before the first byte. What gpuconf writes on this machine (reports, the retry file,
the gate's state and verdict, vaults) goes through write_atomic: a reader never sees half a file.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from gpuconf.errors import GpuconfError, PlaybookError

MAX_FILE_BYTES = 16 * 1024 * 1024  # the most gpuconf reads from one file the user gives it (docs: README)
_MIB = MAX_FILE_BYTES // (1024 * 1024)
_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket"}


def read_source(path: str | Path, error: type[GpuconfError] = PlaybookError) -> bytes:
    """The bytes of a file the user gave gpuconf (playbook, inventory, variables, role file,
    template): a regular file, after symlinks, of at most MAX_FILE_BYTES. Anything else is refused
    before a byte is read: /dev/zero or a FIFO would never end, a huge file would hold the run's
    memory. The FIFO is opened without blocking: waiting for its writer would hang as well."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"file not found: {path}") from None
    except IsADirectoryError:
        raise error(f"cannot read {path}: it is a directory, not a file") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            raise error(f"cannot read {path}: it is a directory, not a file")
        if not stat.S_ISREG(mode):
            target = f" -> {os.path.realpath(path)}" if os.path.islink(path) else ""
            raise error(f"{path}{target} is not a regular file ({_KINDS.get(stat.S_IFMT(mode), 'a special file')}): "
                        f"gpuconf reads regular files only, of at most {_MIB} MiB")
        if info.st_size > MAX_FILE_BYTES:
            raise error(_too_big(path))
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)  # a file that grows while read is bounded too
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise error(_too_big(path))
    return data


def _too_big(path: Path) -> str:
    return f"{path} is larger than {_MIB} MiB, the most gpuconf reads from one file: is it the file you meant?"


def write_atomic(path: str | Path, text: str, mode: int = 0o644) -> None:
    """Write a file via a temporary file in the same directory, fsync and a rename, with `mode`; the
    temporary file is removed when anything fails."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
