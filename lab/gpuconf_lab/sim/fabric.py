"""The InfiniBand fabric all nodes of a lab share: does a subnet manager run anywhere?

The runtime bind-mounts one machine directory at ``/run/gpuconf-lab-fabric`` in every node.
A running ``opensm`` holds an ``flock`` on ``sm-<node>.lock`` there for as long as it lives,
so a killed or rebooted subnet manager releases it without any cleanup code.

Port state must be visible to plain ``cat`` of sysfs on every node, and sysfs files are plain
tmpfs files that nothing recomputes on read. So each node's ``ports/1/state`` and ``sm_lid``
are symlinks to ``port-state`` and ``sm-lid`` in the shared directory, rewritten whenever any
simulator runs on any node (:func:`refresh`). A port therefore flips lab-wide the moment
``systemctl start/stop opensm`` returns; only an opensm that dies without a simulator running
afterwards leaves ``ACTIVE`` showing until the next simulator call on any node.
"""
from __future__ import annotations

import fcntl
import os

import state

ACTIVE = "4: ACTIVE\n"
INIT = "2: INIT\n"


def directory() -> str:
    """Real path of the shared directory (or a node-local stand-in outside a lab)."""
    override = os.environ.get("GPUCONF_SIM_FABRIC")
    if override:
        return override
    shared = state.path(state.FABRIC)
    if os.path.isdir(shared):
        return shared
    return state.path(f"{state.RUN}/fabric")


def subnet_managers() -> list[str]:
    """Names of nodes whose opensm currently holds its lock."""
    found = []
    base = directory()
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return found
    for name in names:
        if not (name.startswith("sm-") and name.endswith(".lock")):
            continue
        try:
            fd = os.open(os.path.join(base, name), os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            found.append(name[3:-5])
        except OSError:
            pass
        finally:
            os.close(fd)
    return found


def is_active() -> bool:
    return bool(subnet_managers())


def register_subnet_manager(node_name: str) -> int | None:
    """Take this node's SM lock; returns the fd to keep open (inherited across exec), or None
    when another opensm on this node already holds it."""
    base = directory()
    os.makedirs(base, exist_ok=True)
    fd = os.open(os.path.join(base, f"sm-{node_name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.set_inheritable(fd, True)
    return fd


def state_file() -> str:
    return os.path.join(directory(), "port-state")


def sm_lid_file() -> str:
    return os.path.join(directory(), "sm-lid")


def refresh() -> None:
    """Rewrite the shared port state if it changed. Never raises: readers may lack rights."""
    active = is_active()
    for real, text in ((state_file(), ACTIVE if active else INIT),
                       (sm_lid_file(), "0x1\n" if active else "0x0\n")):
        try:
            with open(real, encoding="ascii") as handle:
                if handle.read() == text:
                    continue
        except OSError:
            pass
        try:
            os.makedirs(os.path.dirname(real), exist_ok=True)
            tmp = f"{real}.{os.getpid()}"
            with open(tmp, "w", encoding="ascii") as handle:
                handle.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, real)
        except OSError:
            pass
