"""The per-host run lock: `flock` on /run/gpuconf.lock, and the reboot marker beside it.

Root's applies share that one lock. An apply without root (no become, a plain login) can
change only what its user may, and cannot write /run: it takes that user's own lock,
node-local, in $XDG_RUNTIME_DIR or else in /tmp/gpuconf-UID (made 0700, refused unless it
is the user's own). It serialises that user's applies, not root's.

An apply holds it exclusively for the whole run through a small process on
the host that lives as long as its channel: when the run ends, or the
controller dies and the connection drops, the process reads EOF and exits,
and the kernel releases the lock. A check takes it shared in each of its
round trips, waiting a bounded time, so it never silently reads a host in
the middle of an apply.

A reboot must not free the lock while the host is still up: another apply
waiting on it would start a package transaction that the reboot then cuts
(a half-configured DKMS package, no driver). So the reboot op first writes a
marker (`/run/gpuconf.lock.reboot`: the boot id, the run that owns it, and
until when the reboot may take), and the holder of that run keeps the lock
after its channel closes: it dies with the host, or, if the reboot never
comes, gives the lock up at that deadline and removes the marker. A holder
that finds a marker of the *current* boot (while it waits, or once it has
the lock) knows the host is about to go down: it answers `rebooting` and
gives the lock up, and the controller waits for the new boot. /run is a
tmpfs, so a reboot clears the marker; one of an earlier boot is stale.
"""
from __future__ import annotations

import shlex

from gpuconf.facts.wire import CheckLock

LOCK_PATH = "/run/gpuconf.lock"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def marker_path(lock_path: str) -> str:
    return lock_path + ".reboot"


HOLDER = r"""
import fcntl, json, os, stat, sys, time
path, wait, owner = sys.argv[1], float(sys.argv[2]), sys.argv[3]

def refuse(why):
    print("error " + why, flush=True)
    sys.exit(77)

def own_directory():
    # node-local and this user's alone: the login's runtime directory, else one made in /tmp
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/") and os.path.isdir(runtime) and os.stat(runtime).st_uid == os.getuid():
        return runtime
    mine = "/tmp/gpuconf-%d" % os.getuid()
    try:
        os.mkdir(mine, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        refuse("cannot make %s: %s" % (mine, exc.strerror))
    found = os.lstat(mine)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        refuse("%s is not a private directory of this user (uid %d): remove it" % (mine, os.getuid()))
    return mine

if os.geteuid() != 0:   # without root an apply changes only what its user may: that user's own lock
    path = os.path.join(own_directory(), os.path.basename(path))
marker = path + ".reboot"

def boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""

def read_marker():
    try:
        with open(marker) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None

def pending(note):
    return bool(note) and note.get("boot_id") == boot_id() and time.time() < float(note.get("until", 0))

def rebooting(note):
    print("rebooting " + json.dumps(note), flush=True)
    sys.exit(76)

try:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
except OSError as exc:
    refuse("cannot open %s: %s" % (path, exc.strerror))
deadline = time.time() + wait
while True:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
    except (BlockingIOError, PermissionError):
        note = read_marker()
        if pending(note):
            rebooting(note)
        if time.time() >= deadline:
            try:
                print("busy " + open(path + ".owner").read().strip(), flush=True)
            except OSError:
                print("busy unknown", flush=True)
            sys.exit(75)
        time.sleep(0.2)
note = read_marker()
if pending(note):
    rebooting(note)
if note is not None:
    os.unlink(marker)   # an earlier boot's, or a reboot that never came: stale
me = "%s (pid %d, since %s)" % (owner, os.getpid(), time.strftime("%H:%M:%S"))
with open(path + ".owner", "w") as handle:
    handle.write(me)
print("locked", flush=True)
sys.stdin.read()
note = read_marker()
if pending(note) and note.get("owner") == me:
    while time.time() < float(note["until"]):   # the host goes down with the lock held
        time.sleep(min(5.0, max(0.1, float(note["until"]) - time.time())))
    try:
        os.unlink(marker)
    except OSError:
        pass
"""


def holder_command(python: str, path: str, wait: float, owner: str) -> str:
    return " ".join(shlex.quote(part) for part in (python, "-B", "-c", HOLDER, path, f"{wait:g}", owner))


def check_lock(path: str = LOCK_PATH, wait: float = 60.0) -> CheckLock:
    """The `lock` field of a read-only request, as the session keeps it and the connection sends it."""
    return {"path": path, "wait": wait}
