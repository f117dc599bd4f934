# The remote runner: sent over stdin and run by the host's python3 for every
# round trip. Standard library only, Python >= 3.6. It reads a JSON request
# ({"readonly": bool, "ops": [...]}) and prints one JSON line per op result as
# each finishes, so that a run cut short still says what was done.
import base64
import glob
import grp
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

MAX_CONTENT = 4 * 1024 * 1024
MAX_OUTPUT = 1024 * 1024
WRITE_OPS = ("write", "remove", "mkdir", "run", "reboot", "announce_reboot", "symlink")
READ_OPS = ("sh", "stat", "exec", "glob", "host", "cpio")
# programs an exec in a read-only request may start (gpuconf/facts/base.py READ_ONLY_PROGRAMS)
READ_ONLY_PROGRAMS = {}  # filled in by gpuconf/connection/base.py when the runner is sent
# reads at once: a node's own CPUs, 2 to 8 (more only queue for the CPUs, and a read's timeout
# counts its time in that queue)
PARALLEL_READS = max(2, min(8, os.cpu_count() or 2))
EMIT_LOCK = threading.Lock()
FLUSH_EVERY = 0.05
FLUSH_WANTED = threading.Event()
PENDING, FLUSHER = [], []  # a line is waiting for the flusher; the flusher thread, once started
ENV = dict(os.environ, LC_ALL="C", LANG="C", PYTHONDONTWRITEBYTECODE="1")
ENV["PATH"] = ENV.get("PATH", "/usr/bin:/bin") + ":/usr/local/sbin:/usr/sbin:/sbin"


def emit(result, final=False):
    """Print one reply line. Lines are flushed together, at most FLUSH_EVERY seconds after they
    were written (a flusher thread), and at once for the last: each flush is an SSH packet that
    both ends must encrypt, MAC and parse, and a batch of 40 facts made 40 of them."""
    line = json.dumps(result) + "\n"
    with EMIT_LOCK:  # reads run in threads: one whole line at a time
        sys.stdout.write(line)
        if final:
            sys.stdout.flush()
        elif not PENDING:
            PENDING.append(True)
            if not FLUSHER:
                FLUSHER.append(threading.Thread(target=flusher, daemon=True))
                FLUSHER[0].start()
            FLUSH_WANTED.set()


def flusher():
    while True:
        FLUSH_WANTED.wait()
        time.sleep(FLUSH_EVERY)
        with EMIT_LOCK:
            FLUSH_WANTED.clear()
            del PENDING[:]
            sys.stdout.flush()


def text(data):
    if len(data) > MAX_OUTPUT:
        data = data[-MAX_OUTPUT:]
    return data.decode("utf-8", "replace")


def run_argv(argv, timeout, stdin_data=None):
    """Run a program (no shell) in its own process group; on timeout kill the whole group.

    A process stuck in the kernel (a wedged GPU) cannot be reaped, so after the
    kill we wait only briefly and abandon it rather than hang with it."""
    started = time.time()
    program = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=ENV["PATH"])
    if program is None or not os.path.exists(program):  # known here: no process forked only to fail
        return {"rc": 127, "out": "", "err": "%s: No such file or directory" % argv[0], "timed_out": False,
                "duration": 0.0, "timeout": timeout}
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, start_new_session=True)
    except OSError as exc:  # not installed: as a shell says it
        return {"rc": 127 if isinstance(exc, FileNotFoundError) else 126, "out": "",
                "err": "%s: %s" % (argv[0], exc.strerror), "timed_out": False, "duration": 0.0, "timeout": timeout}
    try:
        out, err = proc.communicate(stdin_data, timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            out, err = b"", b"process did not exit after SIGKILL (stuck in the kernel)"
    return {"rc": proc.returncode if proc.returncode is not None else -9, "out": text(out or b""),
            "err": text(err or b""), "timed_out": timed_out, "duration": round(time.time() - started, 3),
            "timeout": timeout}


def run_shell(cmd, timeout, stdin_data=None):
    return run_argv(["/bin/sh", "-c", cmd], timeout, stdin_data)


def run_user_command(op):
    """A command the playbook's author wrote. A simple one (`argv`: one program and its words,
    nothing the shell would expand, split by the controller) runs as that program, as sh
    would run it, without the sh; anything else, or a program not found, through sh."""
    argv = op.get("argv")
    if argv and shutil.which(argv[0], path=ENV["PATH"]):
        return run_argv(argv, op.get("timeout", 10))
    return run_shell(op["cmd"], op.get("timeout", 10))


def read_only_argv(argv):
    program = os.path.basename(argv[0]) if argv else ""
    if program not in READ_ONLY_PROGRAMS:
        return False
    allowed = READ_ONLY_PROGRAMS[program]
    return allowed is None or any(tuple(argv[1:1 + len(prefix)]) == tuple(prefix) for prefix in allowed)


def os_release_ids():
    """The host's os-release ID and ID_LIKE words (an empty set without the file)."""
    ids = set()
    try:
        with open("/etc/os-release") as handle:
            text = handle.read(65536)
    except (OSError, UnicodeDecodeError):
        return ids
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("ID", "ID_LIKE"):
            ids.update(value.strip().strip("\"'").split())
    return ids


def skipped_because(op):
    """Why a read is not run here ("" to run it): a path that exists or is missing, or an
    os-release naming none of `if_os` (the platform's choice of package manager, made by the
    controller's one table: gpuconf/platform.py)."""
    if op.get("unless_exists") and os.path.exists(op["unless_exists"]):
        return op["unless_exists"]
    if op.get("if_exists") and not os.path.exists(op["if_exists"]):
        return "no " + op["if_exists"]
    if op.get("if_os") and not os_release_ids() & set(op["if_os"]):
        return "os-release names none of " + " ".join(op["if_os"])
    return ""


def op_exec(op, readonly):
    """A read: the first of `argv` and its alternatives (`or`) that succeeds, then `grep` and
    `tail` on its output, so that a filter costs no second process."""
    argvs = [op["argv"]] + list(op.get("or", []))
    if readonly and not all(read_only_argv(a) for a in argvs):
        return {"error": "refused: %s is not a read-only program" % " ".join(argvs[0][:2])}
    why = skipped_because(op)
    if why:
        return {"rc": 0, "out": "", "err": "", "timed_out": False, "timeout": op.get("timeout", 10),
                "skipped_because": why}
    if op.get("apt_architectures"):
        argvs = [a[:1] + apt_architectures() + a[1:] for a in argvs]
    deadline = time.time() + float(op.get("timeout", 10))
    for argv in argvs:
        result = run_argv(argv, max(0.1, deadline - time.time()))
        if op.get("drop_refused"):
            argv, result = drop_refused(argv, result, op["drop_refused"], deadline)
        result["timeout"] = op.get("timeout", 10)
        if result["rc"] == 0 or result["timed_out"]:
            break
    if op.get("grep") and not result["timed_out"]:
        pattern = re.compile(op["grep"], re.IGNORECASE)
        result["out"] = "".join(line for line in result["out"].splitlines(True) if pattern.search(line))
    if op.get("tail"):
        result["out"] = "".join(result["out"].splitlines(True)[-int(op["tail"]):])
    result["argv"] = argv
    return result


DPKG_ARCHES = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64"}


def apt_architectures():
    """apt's architectures (`-o APT::Architectures::=X`), read here: without them apt-cache
    asks dpkg, three processes, for the native and foreign architectures, which dpkg reads
    from /var/lib/dpkg/arch. Nothing (apt asks dpkg) on a machine this does not know."""
    native = DPKG_ARCHES.get(os.uname().machine)
    if native is None:
        return []
    try:
        with open("/var/lib/dpkg/arch") as handle:
            listed = handle.read().split()
    except OSError:
        listed = []
    arches = [native] + [a for a in listed if a != native]
    return [word for arch in dict.fromkeys(arches) for word in ("-o", "APT::Architectures::=" + arch)]


REFUSED = re.compile(r'^Field "([^"]*)" is not a valid field to query', re.MULTILINE)


def drop_refused(argv, result, rule, deadline):
    """nvidia-smi refuses a whole query when this driver does not know one field (`Field "X"
    is not a valid field to query.`): rerun it, within the same deadline, without X (or with
    its old name, `renames`), at most `max` times. The fields dropped are in the result."""
    dropped = []
    while not result["timed_out"] and len(dropped) < int(rule.get("max", 8)):
        found = REFUSED.search(result["out"]) or REFUSED.search(result["err"])
        position = next((n for n, arg in enumerate(argv) if arg.startswith(rule["prefix"])), None)
        if not found or position is None:
            break
        bad, renames = found.group(1), rule.get("renames", {})
        fields = argv[position][len(rule["prefix"]):].split(",")
        if bad not in fields:
            break
        fields = [renames.get(f, "") if f == bad else f for f in fields]
        argv = list(argv)
        argv[position] = rule["prefix"] + ",".join(f for f in fields if f)
        dropped.append(bad)
        result = run_argv(argv, max(0.1, deadline - time.time()))
    if dropped:
        result["dropped"] = dropped
    return argv, result


def op_glob(op):
    """The paths matching the patterns, each with its text (small files: sysfs attributes),
    its link target (`what: link`) or nothing (`what: name`). Unreadable ones are left out."""
    files, what = {}, op.get("what", "content")
    for pattern in op["patterns"]:
        for path in glob.glob(pattern):
            try:
                if what == "link":
                    files[path] = os.readlink(path)
                elif what == "name":
                    files[path] = ""
                else:
                    with open(path, "rb") as handle:
                        files[path] = text(handle.read(65536)).rstrip("\n")
            except OSError:
                continue  # gone, unreadable, a directory, or not a link
    return {"files": files}


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
    paths = op["paths"] if "paths" in op else [op["path"]]  # the first that exists (Debian's, then dracut's name)
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
    found, pos = {}, 0
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


def op_host():
    uname = os.uname()
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 0
    return {"hostname": uname.nodename, "machine": uname.machine, "cpus": cpus}


def names(st):
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return owner, group


def op_stat(op):
    path = op["path"]
    try:
        st = os.stat(path) if op.get("follow") else os.lstat(path)
    except FileNotFoundError:
        return {"exists": False}
    except NotADirectoryError:
        return {"exists": False}
    except OSError as exc:
        return {"error": exc.strerror}
    owner, group = names(st)
    result = {"exists": True, "mode": stat.S_IMODE(st.st_mode), "owner": owner, "group": group,
              "size": st.st_size, "uid": st.st_uid, "gid": st.st_gid}
    if stat.S_ISLNK(st.st_mode):
        result.update(kind="symlink", target=os.readlink(path))
    elif stat.S_ISDIR(st.st_mode):
        result["kind"] = "directory"
    elif stat.S_ISREG(st.st_mode):
        result["kind"] = "file"
        try:
            data = read_bounded(path)
        except OSError as exc:
            return dict(result, error=exc.strerror)
        result["sha256"] = hashlib.sha256(data).hexdigest()
        if op.get("content") and len(data) <= MAX_CONTENT:
            result["content_b64"] = base64.b64encode(data).decode()
    else:
        result["kind"] = "other"
    return result


def read_bounded(path):
    # small reads: procfs/sysfs handlers allocate a buffer of the requested size
    chunks, total = [], 0
    with open(path, "rb") as handle:
        while total <= MAX_CONTENT:
            chunk = handle.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    return b"".join(chunks)


def resolve_ids(owner, group):
    uid = -1 if owner is None else (int(owner) if str(owner).isdigit() else pwd.getpwnam(owner).pw_uid)
    gid = -1 if group is None else (int(group) if str(group).isdigit() else grp.getgrnam(group).gr_gid)
    return uid, gid


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


def shared_lock(lock):
    """Wait (bounded) for a shared flock: an apply holds it exclusively, so a
    check never reads a half-applied host. Returns the fd, or None if busy."""
    import fcntl
    try:
        fd = os.open(lock["path"], os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:  # not root: a lock made by root still opens read-only
        try:
            fd = os.open(lock["path"], os.O_RDONLY)
        except FileNotFoundError:
            return -1  # no lock file and no right to make one: no apply can hold it
    deadline = time.time() + float(lock.get("wait", 60))
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return fd
        except (BlockingIOError, PermissionError):
            if time.time() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.2)


def lock_owner(path):
    try:
        with open(path + ".owner") as handle:
            return handle.read().strip()
    except OSError:
        return "unknown"


WRITERS = {"write": op_write, "mkdir": op_mkdir, "remove": op_remove, "symlink": op_symlink, "reboot": op_reboot,
           "announce_reboot": op_announce_reboot}


def run_op(op, readonly):
    """One op's result fields, and whether the ops after it must be skipped."""
    kind = op.get("op")
    if readonly and kind in WRITE_OPS:
        return {"error": "refused: '%s' in a read-only (check) request" % kind}, True
    try:
        if kind == "sh":
            return run_user_command(op), False
        if kind == "stat":
            return op_stat(op), False
        if kind == "exec":
            return op_exec(op, readonly), False
        if kind == "glob":
            return op_glob(op), False
        if kind == "host":
            return op_host(), False
        if kind == "cpio":
            return op_cpio(op), False
        if kind == "run":
            stdin_data = op["stdin"].encode() if op.get("stdin") is not None else None
            result = run_shell(op["cmd"], op.get("timeout", 600), stdin_data)
            return result, op.get("check", True) and (result["rc"] != 0 or result["timed_out"])
        if kind in WRITERS:
            return WRITERS[kind](op), False
        return {"error": "unknown op %r" % kind}, True
    except Exception as exc:  # report, never crash: the controller decides
        return {"error": "%s: %s" % (type(exc).__name__, exc)}, kind not in READ_OPS


def run_reads(batch, readonly):
    """Reads (sh, stat) that follow each other run at the same time: a fact batch then takes as
    long as its slowest command, not the sum of all of them. Each result is printed as it ends."""
    def one(item):
        index, op = item
        result, _ = run_op(op, readonly)
        result["i"] = index
        emit(result)
    if len(batch) == 1:
        one(batch[0])
        return
    # plain threads: concurrent.futures would import logging, a tenth of the runner's own start
    waiting = list(reversed(batch))

    def worker():
        while True:
            try:
                item = waiting.pop()   # atomic under the GIL
            except IndexError:
                return
            one(item)
    workers = [threading.Thread(target=worker) for _ in range(min(PARALLEL_READS, len(batch)))]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()


def main(request):
    readonly = request.get("readonly", True)
    lock = request.get("lock")
    if lock and shared_lock(lock) is None:
        emit({"busy": True, "owner": lock_owner(lock["path"]), "path": lock["path"]}, final=True)
        return
    ops = list(enumerate(request["ops"]))
    stop, position = False, 0
    while position < len(ops):
        index, op = ops[position]
        if stop:
            emit({"i": index, "skipped": True})
            position += 1
        elif op.get("op") in READ_OPS:
            end = position
            while end < len(ops) and ops[end][1].get("op") in READ_OPS:
                end += 1
            run_reads(ops[position:end], readonly)  # reads never stop the ops after them
            position = end
        else:
            result, stop = run_op(op, readonly)
            result["i"] = index
            emit(result)
            position += 1
    emit({"done": True}, final=True)


main(json.loads(REQUEST))  # noqa: F821 - REQUEST is injected by the bootstrap
