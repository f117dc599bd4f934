# The remote runner, part 2 of 5: the reads (gpuconf/facts/wire.py: ShRequest, ExecRequest,
# StatRequest, GlobRequest, HostRequest), done here with no process where the runner can.
import base64
import glob
import grp
import hashlib
import os
import pwd
import re
import shutil
import stat
import time

from gpuconf.connection.remote.process import ENV, MAX_CONTENT, MYPY, run_argv, run_shell, text

if MYPY:
    # for the type comments (Python 3.6)
    from typing import Dict, List, Optional, Pattern, Set, Tuple  # noqa: F401, UP035

# programs an exec in a read-only request may start (gpuconf/facts/base.py READ_ONLY_PROGRAMS)
# filled in by gpuconf/connection/base.py when the runner is sent
READ_ONLY_PROGRAMS = {}  # type: Dict[str, Optional[Tuple[Tuple[str, ...], ...]]]


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


# read once per request: every op guarded by `if_os` asks the same question
OS_RELEASE_IDS = []  # type: List[Set[str]]


def os_release_ids():
    """The host's os-release ID and ID_LIKE words (an empty set without the file)."""
    if OS_RELEASE_IDS:
        return OS_RELEASE_IDS[0]
    ids = set()
    try:
        with open("/etc/os-release") as handle:
            text = handle.read(65536)
    except (OSError, UnicodeDecodeError):
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("ID", "ID_LIKE"):
            ids.update(value.strip().strip("\"'").split())
    OS_RELEASE_IDS.append(ids)
    return ids


def skipped_because(op):
    """Why a read is not run here ("" to run it): a path that exists or is missing, or an
    os-release naming none of `if_os` (the platform's choice of package manager, made by the
    controller's one table: gpuconf/facts/platform.py)."""
    if op.get("unless_exists") and os.path.exists(op["unless_exists"]):
        return op["unless_exists"]
    if op.get("if_exists") and not os.path.exists(op["if_exists"]):
        return "no " + op["if_exists"]
    if op.get("if_os") and not os_release_ids() & set(op["if_os"]):
        return "os-release names none of " + " ".join(op["if_os"])
    return ""


def exec_argvs(op):
    """An exec's argv and its alternatives (`or`), in the order they are tried."""
    return [op["argv"]] + list(op.get("or", []))


def op_exec(op):
    """A read: the first of `argv` and its alternatives (`or`) that succeeds, then `grep` and
    `tail` on its output, so that a filter costs no second process. A read-only request's
    programs were checked before (dispatch.py refusal)."""
    argvs = exec_argvs(op)
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
    groups = log_records(result["out"]) if op.get("records") else [[line] for line in result["out"].splitlines(True)]
    if op.get("grep") and not result["timed_out"]:
        pattern = re.compile(op["grep"], re.IGNORECASE)
        groups = [group for group in groups if any(pattern.search(line) for line in group)]
    if op.get("tail"):
        groups = groups[-int(op["tail"]):]
    if op.get("grep") or op.get("tail"):
        result["out"] = "".join(line for group in groups for line in group)
    result["argv"] = argv
    return result


# a line that starts a kernel log record: dmesg's [seconds] or [date], an ISO or kmsg number, a
# syslog date, dmesg --decode's facility and level (gpuconf/facts/kernel_log.py reads the same)
RECORD_START = re.compile(r"(?:\[|\d|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d |[a-z0-7]+ *:[a-z]+ *: |kernel: )")


def log_records(text):
    """The lines of a kernel log in records: an indented line, or one without a prefix in a log
    whose lines have one, continues the record before it (one printk printed on several lines)."""
    groups, prefixed = [], False  # type: List[List[str]], bool
    for line in text.splitlines(True):
        starts = bool(RECORD_START.match(line))
        if groups and (line[:1] in (" ", "\t") or (prefixed and not starts)):
            groups[-1].append(line)
        else:
            groups.append([line])
        prefixed = prefixed or starts
    return groups


DPKG_ARCHES = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64"}


def apt_architectures():
    """apt's architectures (`-o APT::Architectures::=X`), read here: without them apt-cache
    asks dpkg, three processes, for the native and foreign architectures, which dpkg reads
    from /var/lib/dpkg/arch. Nothing (apt asks dpkg) on a machine this does not know. It stays
    on the host: the words must be in the argv before apt-cache starts, and the controller
    could know them only from a read of this host, a second round trip (docs/task-contract.md)."""
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


def drop_refused(argv, result, rule, deadline):
    """A program that refuses a whole run for one item of a comma-separated argument (nvidia-smi
    and a `--query-gpu` field its driver does not know): rerun it, within the same deadline,
    without that item (or with its old name, `renames`), at most `max` times. The controller
    names the refusal (`refused`, a pattern whose first group is the item: gpuconf/facts/
    nvidia_smi.py); the reruns stay here, in the same round trip. The items dropped are in the
    result."""
    refused, dropped = re.compile(rule["refused"], re.MULTILINE), []  # type: Pattern[str], List[str]
    while not result["timed_out"] and len(dropped) < int(rule.get("max", 8)):
        found = refused.search(result["out"]) or refused.search(result["err"])
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


def op_host(op):
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


