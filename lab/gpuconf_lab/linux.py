"""Thin ctypes wrappers for the Linux calls a node's PID 1 needs: mount, umount2, pivot_root, caps.

Standard library only: init.py runs under the system Python before any package is importable,
and loads this file by path.
"""
import ctypes
import os
import time

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
LIBC.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
CLONE_NEWTIME = 0x80
PR_CAPBSET_DROP = 24
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}
CAP_NUMBERS = {"sys_module": 16, "sys_rawio": 17, "sys_boot": 22, "sys_time": 25, "syslog": 34}


def _encode(value):
    return None if value is None else os.fsencode(value)


def mount(source, target, fstype=None, flags=0, data=None):
    if LIBC.mount(_encode(source), _encode(target), _encode(fstype), flags, _encode(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def umount(target, flags=MNT_DETACH):
    if LIBC.umount2(_encode(target), flags) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"umount {target}: {os.strerror(errno)}")


def bind(source, target, readonly=False):
    mount(source, target, None, MS_BIND)
    if readonly:
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)


def tmpfs(target, mode, flags=MS_NOSUID | MS_NODEV):
    mount("tmpfs", target, "tmpfs", flags, f"mode={mode}")


def new_time_namespace():
    """unshare(CLONE_NEWTIME) and set its offsets so that CLOCK_MONOTONIC and CLOCK_BOOTTIME start
    again near 0 for every process started afterwards (the caller itself stays where it was).
    Needs CAP_SYS_TIME in the permitted set (raised only to write timens_offsets) and a kernel
    with time namespaces (5.6+)."""
    if LIBC.unshare(CLONE_NEWTIME) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare(CLONE_NEWTIME): {os.strerror(errno)}")
    lines = []
    for name, clock in (("monotonic", time.CLOCK_MONOTONIC), ("boottime", time.CLOCK_BOOTTIME)):
        seconds, nanoseconds = divmod(-time.clock_gettime_ns(clock), 1_000_000_000)   # -now, 0 <= ns < 1e9
        lines.append(f"{name} {seconds} {nanoseconds}\n")
    set_effective("sys_time", True)
    try:
        with open("/proc/self/timens_offsets", "w") as handle:
            handle.write("".join(lines))
    finally:
        set_effective("sys_time", False)


def pivot_root(new_root):
    """Make `new_root` the root and drop the machine's tree from this mount namespace."""
    number = SYS_PIVOT_ROOT[os.uname().machine]
    os.chdir(new_root)
    if LIBC.syscall(number, b".", b".") != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"pivot_root {new_root}: {os.strerror(errno)}")
    umount(".", MNT_DETACH)
    os.chdir("/")


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities(names, keep_permitted=()):
    """Drop from the bounding set (so no exec can regain them) and from PID 1's own sets, except
    the permitted bit of `keep_permitted`: PID 1 may raise those for one call (`raised`), and no
    program it starts can hold them (the bounding and inheritable sets lack them)."""
    for name in names:
        if LIBC.prctl(PR_CAPBSET_DROP, CAP_NUMBERS[name], 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {name}")
    header, data = _capget()
    for name in names:
        word, bit = divmod(CAP_NUMBERS[name], 32)
        keep = ~(1 << bit) & 0xFFFFFFFF
        data[word].effective &= keep
        if name not in keep_permitted:
            data[word].permitted &= keep
        data[word].inheritable &= keep
    _capset(header, data)


def _capget():
    header, data = CapHeader(0x20080522, 0), (CapData * 2)()
    if LIBC.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    return header, data


def _capset(header, data):
    if LIBC.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def set_effective(name, on):
    """Raise or lower one capability of the permitted set in this process's effective set."""
    header, data = _capget()
    word, bit = divmod(CAP_NUMBERS[name], 32)
    if on:
        data[word].effective |= 1 << bit
    else:
        data[word].effective &= ~(1 << bit) & 0xFFFFFFFF
    _capset(header, data)
