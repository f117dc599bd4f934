# The remote runner, part 3 of 5: the writes (gpuconf/facts/wire.py: RunRequest, WriteRequest,
# MkdirRequest, RemoveRequest, SymlinkRequest, RebootRequest, AnnounceRebootRequest).
import base64
import grp
import json
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import time

from gpuconf.connection.remote.process import ENV, run_shell


def resolve_ids(owner, group):
    uid = -1 if owner is None else (int(owner) if str(owner).isdigit() else pwd.getpwnam(owner).pw_uid)
    gid = -1 if group is None else (int(group) if str(group).isdigit() else grp.getgrnam(group).gr_gid)
    return uid, gid


def op_run(op):
    """A command as the task wrote it, through sh; with `check` (the default) its failure skips
    the ops after it (dispatch.py). An `argv` (Ansible's command) runs with no shell: only each
    word's $VAR and ~ are expanded, here, as Ansible's run_command expands them."""
    stdin_data = op["stdin"].encode() if op.get("stdin") is not None else None
    command = op["cmd"]
    if op.get("argv") is not None:
        words = [os.path.expanduser(os.path.expandvars(word)) for word in op["argv"]]
        command = op.get("prefix", "") + " ".join(shlex.quote(word) for word in words)
    return run_shell(command, op.get("timeout", 600), stdin_data)


def op_write(op):
    """Atomic write: temp file in the same directory, fsync, rename.

    Mode and owner default to those of the file being replaced."""
    path = op["path"]
    data = base64.b64decode(op["content_b64"])
    directory = os.path.dirname(path) or "."
    mode, uid, gid = op.get("mode"), -1, -1
    try:
        old = os.stat(path)
        if mode is None:
            mode = stat.S_IMODE(old.st_mode)
        uid, gid = old.st_uid, old.st_gid
    except FileNotFoundError:
        old = None
        if mode is None:
            mode = 0o644
    want_uid, want_gid = resolve_ids(op.get("owner"), op.get("group"))
    uid = want_uid if want_uid != -1 else uid
    gid = want_gid if want_gid != -1 else gid
    if not os.path.isdir(directory):
        raise FileNotFoundError("cannot write %s: its directory %s does not exist" % (path, directory))
    backup = make_backup(path, old) if old is not None and op.get("backup") else None
    def own(fd):
        os.fchmod(fd, mode)
        if uid != -1 or gid != -1:
            os.fchown(fd, uid, gid)
    replace_file(os.path.join(directory, ".%s.gpuconf-%d.tmp" % (os.path.basename(path), os.getpid())), path, data,
                 os.O_EXCL, own)
    dirfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)
    return {"ok": True, "backup": backup}


def replace_file(tmp, path, data, flag, before_sync=None):
    """Write `data` to `tmp` (mode 0600; `flag` O_EXCL or O_TRUNC), let `before_sync(fd)` set its
    mode and owner, fsync, rename it over `path`: `path` is the old file or the new one, never half
    of either. On any failure the temporary file is removed and the error raised."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | flag, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if before_sync is not None:
                before_sync(handle.fileno())
            os.fsync(handle.fileno())
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def make_backup(path, old):
    """A copy of `path` beside it, PATH.YYYYmmddTHHMMSS.gpuconf~ (-1, -2, ... within one second),
    with its mode, owner and times. It appears complete or not at all, and never replaces an
    earlier backup."""
    directory = os.path.dirname(path) or "."
    stamp = time.strftime("%Y%m%dT%H%M%S")
    tmp = os.path.join(directory, ".%s.gpuconf-backup-%d.tmp" % (os.path.basename(path), os.getpid()))
    try:
        shutil.copy2(path, tmp)
        try:
            os.chown(tmp, old.st_uid, old.st_gid)
        except PermissionError:  # not root: the copy is ours, with the file's mode
            pass
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        number = 0
        while True:
            name = "%s.%s%s.gpuconf~" % (path, stamp, "-%d" % number if number else "")
            try:
                os.link(tmp, name)  # atomic, and refuses a name that exists
                return name
            except FileExistsError:
                number += 1
            except OSError:  # no hard links on this filesystem (vfat): reserve the name, rename onto it
                try:
                    os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                except FileExistsError:
                    number += 1
                    continue
                os.rename(tmp, name)
                return name
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def op_mkdir(op):
    path, mode = op["path"], op.get("mode")
    if not os.path.isdir(path):
        os.makedirs(path, mode if mode is not None else 0o755)
    if mode is not None:
        os.chmod(path, mode)
    uid, gid = resolve_ids(op.get("owner"), op.get("group"))
    if uid != -1 or gid != -1:
        os.chown(path, uid, gid)
    return {"ok": True}


def op_remove(op):
    path = op["path"]
    if os.path.isdir(path) and not os.path.islink(path):
        if op.get("recursive"):
            shutil.rmtree(path)
        else:
            os.rmdir(path)
    elif os.path.lexists(path):
        os.unlink(path)
    return {"ok": True}


def op_symlink(op):
    path, target = op["path"], op["target"]
    tmp = "%s.gpuconf-%d.tmp" % (path, os.getpid())
    os.symlink(target, tmp)
    os.rename(tmp, path)
    return {"ok": True}


def op_announce_reboot(op):
    """Write the reboot marker beside the run lock (gpuconf/connection/lock.py) before the
    reboot is sent: this run's lock holder then keeps the lock until the host is down, and a
    run waiting on it waits for the new boot instead of starting a transaction the reboot cuts."""
    lock = op["lock"]
    try:
        with open(lock + ".owner") as handle:
            owner = handle.read().strip()
    except OSError:
        owner = "unknown"
    with open("/proc/sys/kernel/random/boot_id") as handle:
        boot_id = handle.read().strip()
    note = {"boot_id": boot_id, "owner": owner, "when": time.strftime("%H:%M:%S"),
            "until": time.time() + float(op.get("timeout", 600))}
    marker = lock + ".reboot"
    tmp = "%s.gpuconf-%d.tmp" % (marker, os.getpid())
    with open(tmp, "w") as handle:
        json.dump(note, handle)
    os.rename(tmp, marker)
    return {"ok": True}


def op_reboot(op):
    if op.get("lock"):
        op_announce_reboot(op)
    # Detach, so the reply reaches the controller before the host goes down.
    subprocess.Popen(["/bin/sh", "-c", "sleep %s; %s" % (float(op.get("delay", 1)), op["cmd"])],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     env=ENV, start_new_session=True)
    return {"ok": True}
