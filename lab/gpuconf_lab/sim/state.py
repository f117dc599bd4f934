"""Where simulator state lives, and the small file helpers every simulator shares.

Inside a node every path is absolute: volatile state in ``/run/gpuconf-lab`` (cleared at each
boot, like the kernel's own state), persistent state in ``/var/lib/gpuconf-lab``. Tests set
``GPUCONF_SIM_ROOT`` (not the runtime's ``GPUCONF_LAB_ROOT``, its state directory on the machine)
to a temporary directory and every path gets that prefix, so the
simulators can be exercised without namespaces and can never reach the machine's own files.

Read-only commands (``lsmod``, ``nvidia-smi -q``, ``systemctl is-active`` ...) must not write
anything outside ``/run``: tests digest a node's overlay upper directory to prove it. So the
helpers here never create files as a side effect of reading.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time

ROOT = os.environ.get("GPUCONF_SIM_ROOT", "").rstrip("/")
TEST_MODE = bool(ROOT)

RUN = "/run/gpuconf-lab"
VAR = "/var/lib/gpuconf-lab"
FABRIC = "/run/gpuconf-lab-fabric"
NODE_JSON = "/etc/gpuconf-lab/node.json"
SIM_DIR = "/usr/lib/gpuconf-lab/sim"
# efivarfs, mounted there on a UEFI machine: the firmware's Secure Boot setting (sysfs.render_efivars)
SECURE_BOOT_VARIABLE = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e398e4b7df8c"
DEFAULT_KERNEL = "6.1.0-18-amd64"


def path(absolute: str) -> str:
    """The real location of a node path (prefixed with ``GPUCONF_SIM_ROOT`` in tests)."""
    return ROOT + absolute


def unroot(real: str) -> str:
    """The node path for a real location (inverse of :func:`path`)."""
    if ROOT and real.startswith(ROOT + "/"):
        return real[len(ROOT):]
    return real


def read_text(absolute: str, default: str | None = None) -> str | None:
    try:
        with open(path(absolute), encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return default


def read_json(absolute: str, default=None):
    text = read_text(absolute)
    if text is None:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def write_text(absolute: str, text: str, mode: int = 0o644) -> None:
    """Write atomically: a temporary file in the same directory, then rename."""
    real = path(absolute)
    os.makedirs(os.path.dirname(real), exist_ok=True)
    tmp = f"{real}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, real)


def write_in_place(absolute: str, text: str, bound_at: str | None = None) -> None:
    """Rewrite a file keeping its inode: the runtime bind-mounts some of these over /proc.
    With `bound_at` (the /proc file it would be bound over), a file that is not bound there
    (a kernel without that file, or prefix mode) is replaced whole instead, so that a reader
    of it (the lab's lsmod) never sees it half-written."""
    real = path(absolute)
    if bound_at is not None and not _same_file(real, path(bound_at)):
        write_text(absolute, text)
        return
    os.makedirs(os.path.dirname(real), exist_ok=True)
    with open(real, "a+", encoding="utf-8") as handle:
        handle.seek(0)
        handle.truncate()
        handle.write(text)


def _same_file(one: str, other: str) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def write_json(absolute: str, value) -> None:
    write_text(absolute, json.dumps(value, indent=1, sort_keys=True) + "\n")


def remove(absolute: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path(absolute))


def exists(absolute: str) -> bool:
    return os.path.lexists(path(absolute))


@contextlib.contextmanager
def locked(name: str):
    """Serialise read-modify-write of one piece of volatile state between concurrent commands.

    Locks are never held while a simulator runs another command, so one simulator calling
    another (``systemctl start`` running a daemon that loads a module) cannot deadlock.
    """
    real = path(f"{RUN}/locks/{name}.lock")
    os.makedirs(os.path.dirname(real), exist_ok=True)
    fd = os.open(real, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def node() -> dict:
    """This node's identity, written by the runtime: name, lab, profile, index."""
    info = read_json(NODE_JSON, {}) or {}
    info.setdefault("name", socket.gethostname())
    info.setdefault("lab", "lab")
    info.setdefault("profile", "a100")
    info.setdefault("index", 0)
    return info


BASEBOARD_JSON = f"{VAR}/baseboard.json"


def profile():
    """The hardware :class:`profiles.Profile` of this node, its GPUs at the firmware its BMC
    activated last (``baseboard.json``, written by the lab's BMC at a power cycle)."""
    import dataclasses

    import profiles  # installed next to the simulators

    found = profiles.get_profile(node()["profile"])
    vbios = (read_json(BASEBOARD_JSON, {}) or {}).get("vbios")
    if vbios:
        found = dataclasses.replace(found, gpu=dataclasses.replace(found.gpu, vbios=str(vbios)))
    return found


def hostname() -> str:
    return node()["name"]


def boot_info() -> dict:
    """The current boot: id, kernel release, wall-clock time it started."""
    info = read_json(f"{RUN}/boot.json")
    if info:
        return info
    return {"boot_id": "", "kernel": read_json(f"{VAR}/kernel.json", {}).get("next", DEFAULT_KERNEL),
            "booted_at": time.time() - 60}


def running_kernel() -> str:
    return boot_info()["kernel"]


FIRMWARE_JSON = f"{VAR}/firmware.json"


def firmware_secure_boot() -> bool:
    """The node's UEFI Secure Boot setting: the ``secure-boot`` fault's, else node.json's
    ``secure_boot`` (off by default). It takes effect at the next boot, as a firmware setting does."""
    setting = (read_json(FIRMWARE_JSON, {}) or {}).get("secure_boot")
    return bool(node().get("secure_boot", False) if setting is None else setting)


def secure_boot() -> bool:
    """Whether the running kernel was booted with Secure Boot (and so refuses unsigned modules)."""
    info = read_json(f"{RUN}/boot.json")
    return bool(info.get("secure_boot", False)) if info else firmware_secure_boot()


def uptime() -> float:
    """Seconds since this node booted (monotonic clock of the simulated kernel)."""
    return max(0.0, time.time() - boot_info()["booted_at"])


def is_root() -> bool:
    """Root inside a node. Tests run as whatever user they are and choose with
    ``GPUCONF_SIM_USER`` (set: an unprivileged user) so both paths are testable anywhere."""
    if TEST_MODE:
        return "GPUCONF_SIM_USER" not in os.environ
    return os.geteuid() == 0


def fail(tool: str, message: str, code: int = 1):
    """Print ``tool: message`` to stderr and exit, the way most Linux tools report errors."""
    sys.stderr.write(f"{tool}: {message}\n")
    raise SystemExit(code)


# Machine commands a unit may run in tests (everything else must exist under the test root).
TEST_SAFE_COMMANDS = {"/bin/sh", "/usr/bin/sh", "/bin/true", "/usr/bin/true", "/bin/false", "/usr/bin/false",
                      "/bin/echo", "/usr/bin/echo", "/bin/sleep", "/usr/bin/sleep"}


def resolve_command(argv0: str) -> str | None:
    """The real path of a command a simulator runs (a unit's ExecStart, a package script).

    Inside a node this is the path itself. In tests a path under the temporary root wins, so
    that ``/usr/bin/nv-fabricmanager`` runs the test image's shim; of the machine's own
    commands only a few harmless ones may run (None otherwise), so that no test can ever run,
    say, a package's ``ExecStopPost=/bin/rm -rf /var/run/...`` against the machine.
    """
    if not ROOT:
        return argv0
    if argv0.startswith("/") and os.path.exists(path(argv0)):
        return path(argv0)
    return argv0 if argv0 in TEST_SAFE_COMMANDS else None
