"""A fact is one read-only request to a host plus a pure parse of its answer.

What a task may read is declared here, and nothing else can be read:
- `file_state(path)`: lstat (or stat) of a path, its sha256 and small content, read by the
  remote runner itself (no process);
- `file_glob(patterns)`: the small files (sysfs attributes) or link targets matching glob
  patterns, read by the remote runner itself;
- `command(argv)`: a read-only program from `READ_ONLY_PROGRAMS`, as an argv list (quoted
  by construction, no shell), under a timeout that kills its process group;
- `user_command(text)`: a command the playbook's author wrote (`probe`, `unless`), run by
  `sh` because that is what the author wrote; never built by gpuconf from parameters.

Facts are gathered in batches, one round trip for many facts, and cached per host until a
change invalidates them.
"""
from __future__ import annotations

import base64
import os
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypedDict

from typing_extensions import TypeVar

from gpuconf.facts.wire import ExecRequest, GlobRequest, HostRequest, Reply, Request, ShRequest, StatRequest

# Programs a task may run in a read, and for some the only argument prefixes it may use: each
# one reads state and changes nothing. The remote runner refuses any other program in a
# read-only request too.
READ_ONLY_PROGRAMS: dict[str, tuple[tuple[str, ...], ...] | None] = {
    "apt-cache": (("policy",), ("show",), ("madison",)),
    "apt-mark": (("showhold",),),
    "cat": None,
    "dcgmi": (("health", "-c"), ("discovery", "-l"), ("diag", "-r"), ("dmon",)),   # diag runs tests, dmon samples
    "dkms": (("status",),),
    "dmidecode": None,
    "dmesg": None,
    "dnf": (("module", "list"), ("-C", "-q", "--setopt=logdir=/run/gpuconf-dnf", "repoquery")),
    "dpkg": (("-l",),),
    "dpkg-query": None,
    "findmnt": None,
    "grubby": (("--info=ALL",), ("--info=DEFAULT",), ("--default-kernel",)),
    "ibstat": None,
    "ibstatus": None,
    "ibv_devinfo": None,
    "journalctl": None,
    "lsmod": None,
    "modinfo": None,
    "nvcc": (("--version",),),
    "nvidia-ctk": (("cdi", "list"),),   # lists the CDI devices the runtimes would resolve
    "nvidia-imex-ctl": (("-N",), ("-q",)),
    "nvidia-smi": None,
    "rpm": (("-q",), ("-qa",)),
    "scontrol": (("show",),),
    "systemctl": (("show",), ("is-active",), ("is-enabled",), ("status",), ("list-units",)),
    "uname": None,
}


@dataclass(frozen=True)
class Output:
    """What a command printed; `timed_out` means it was killed at its timeout, `timeout`
    (seconds) is the limit it ran under, which a task's `timeout:` keyword may have lowered."""

    stdout: str
    stderr: str = ""
    rc: int = 0
    timed_out: bool = False
    timeout: float | None = None
    argv: tuple[str, ...] = ()  # for a command read: the argv that answered (one of its alternatives)


class FactUnavailable(Exception):
    """A fact whose value cannot be known (the command hung, failed oddly)."""


@dataclass(frozen=True)
class Merge:
    """How facts that read the same source share one request (`gpuconf/facts/merge.py`).

    Facts with the same `source` gathered together are sent as one request, built by
    `build(requests, parts)` from their own requests and the union of their `parts` (GPU
    fields, unit names), in order; each fact then parses `part_of(reply, parts)`, its own
    slice of the one reply. A fact read alone sends its own request."""

    source: str
    parts: tuple[str, ...]
    build: Callable[[list[Request], tuple[str, ...]], Request]
    part_of: Callable[[Reply, tuple[str, ...]], Reply]


# what a fact's parse gives: `facts[fact]` is typed by it (a bare `Fact` is a Fact[object])
Value = TypeVar("Value", covariant=True, default=object)
Parsed = TypeVar("Parsed")


@dataclass(frozen=True)
class Fact(Generic[Value]):
    """`key` identifies the fact in a host's cache; `request` is sent as is, unless `merge`
    says how to share one request with other facts of the same source, or `controller` reads it
    on the controller instead."""

    key: str
    request: Request = field(compare=False, hash=False)
    parse: Callable[[Reply], Value] = field(compare=False, hash=False)
    merge: Merge | None = field(default=None, compare=False, hash=False)
    # A fact read on the controller, not on the host (a node's BMC over Redfish, gpuconf/bmc/read.py):
    # the session calls it and parses what it returns; `request` is never sent. Read-only by
    # construction: it is given no session that can write.
    controller: Callable[[], Any] | None = field(default=None, compare=False, hash=False)


def reply_output(result: Reply) -> Output:
    return Output(result.get("out", ""), result.get("err") or result.get("error") or "", result.get("rc", -1),
                  bool(result.get("timed_out")), result.get("timeout"), tuple(result.get("argv") or ()))


def check_read_only(argv: Sequence[str]) -> None:
    """Refuse a program (or a use of it) that is not known to be read-only."""
    if not argv:
        raise ValueError("a command read needs a program")
    program = os.path.basename(argv[0])
    if program not in READ_ONLY_PROGRAMS:
        raise ValueError(f"'{program}' is not a read-only program gpuconf may run in a check")
    allowed = READ_ONLY_PROGRAMS[program]
    if allowed is not None and not any(tuple(argv[1:1 + len(prefix)]) == prefix for prefix in allowed):
        raise ValueError(f"'{program} {' '.join(argv[1:3])}' is not a read-only use of {program} "
                         f"(allowed: {', '.join(' '.join(p) for p in allowed)})")


def command(argv: Sequence[str], parse: Callable[[Output], Parsed], timeout: float = 10.0, *,
            key: str | None = None, alternatives: Sequence[Sequence[str]] = (), unless_exists: str | None = None,
            if_exists: str | None = None, if_os: Sequence[str] = (),
            grep: str | None = None, tail: int | None = None, records: bool = False,
            apt_architectures: bool = False) -> Fact[Parsed]:
    """A read-only program run as an argv list (no shell) under a timeout.

    `alternatives` are run in order when the one before fails (exit status not 0, or not
    found), `unless_exists` skips the command (rc 0, no output) when that path exists, `if_exists`
    when it is missing, `if_os` when the host's os-release ID and ID_LIKE name none of these,
    `grep` keeps only the output lines matching a regular expression (case-insensitive),
    `tail` the last lines (with `records`, both keep whole kernel-log records: a record's
    continuation lines travel with the line that matched, gpuconf.facts.kernel_log), and
    `apt_architectures` tells apt-cache the host's architectures
    (read by the runner from dpkg's own file, where apt would ask dpkg: three processes): all
    done by the remote runner, with no second process. (nvidia-smi's `--query-gpu` has its own
    constructor, `facts/nvidia_smi.py`: its reruns without a refused field.)"""
    argvs = [list(argv), *[list(a) for a in alternatives]]
    for one in argvs:
        check_read_only(one)
    request: ExecRequest = {"op": "exec", "argv": argvs[0], "timeout": timeout}
    if alternatives:
        request["or"] = argvs[1:]
    if unless_exists:
        request["unless_exists"] = unless_exists
    if if_exists:
        request["if_exists"] = if_exists
    if if_os:
        request["if_os"] = sorted(if_os)
    if grep:
        request["grep"] = grep
    if tail:
        request["tail"] = tail
    if records:
        request["records"] = True
    if apt_architectures:
        request["apt_architectures"] = True
    name = key or "exec:" + "\0".join(argvs[0]) + "".join("|" + "\0".join(a) for a in argvs[1:])
    return Fact(name, request, lambda result: parse(reply_output(result)))


# A word sh passes on as it is: no expansion, quoting, redirection, globbing or control.
PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:,+@%=-]+")
PLAIN_PROGRAM = re.compile(r"[A-Za-z0-9_./+-]+")
# sh's own commands (no program of that name does the same); `exec` and the rest stay with sh
SHELL_BUILTINS = {".", ":", "alias", "bg", "break", "cd", "command", "continue", "eval", "exec", "exit", "export",
                  "fc", "fg", "getopts", "hash", "jobs", "local", "read", "readonly", "return", "set", "shift",
                  "source", "times", "trap", "type", "ulimit", "umask", "unalias", "unset", "wait"}
WORD = re.compile(r"'([^']*)'|([^\s']+)")


def simple_argv(text: str) -> list[str] | None:
    """The argv `sh -c TEXT` would run, when TEXT is one program and its words: plain words,
    or single-quoted ones (taken literally by sh), and nothing the shell would interpret."""
    try:
        split = shlex.split(text)
    except ValueError:
        return None
    # every word plain, or one whole single-quoted string: nothing else
    position, words = 0, list[str]()
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        match = WORD.match(text, position)
        end = match.end() if match else position
        if match is None or (end < len(text) and not text[end].isspace()):
            return None
        quoted, plain = match.group(1), match.group(2)
        if plain is not None and not (PLAIN_PROGRAM if not words else PLAIN_WORD).fullmatch(plain):
            return None
        words.append(quoted if quoted is not None else plain)
        position = end
    if not words or words[0] in SHELL_BUILTINS or "=" in words[0] or split != words:
        return None
    return words


def user_command(text: str, parse: Callable[[Output], Parsed], timeout: float = 10.0) -> Fact[Parsed]:
    """A shell command the playbook's author wrote and declared read-only (`probe`, `unless`).
    A simple one (`simple_argv`) runs as its program, without an sh process in between."""
    request: ShRequest = {"op": "sh", "cmd": text, "timeout": timeout}
    argv = simple_argv(text)
    if argv is not None:
        request["argv"] = argv
    return Fact(f"sh:{text}", request, lambda result: parse(reply_output(result)))


@dataclass(frozen=True)
class FileState:
    """A path as the host sees it (lstat, plus content when it is a small file)."""

    path: str
    exists: bool
    kind: str = ""  # file, directory, symlink, other
    mode: int | None = None
    owner: str | None = None
    group: str | None = None
    size: int | None = None
    sha256: str | None = None
    content: bytes | None = None
    target: str | None = None

    @property
    def text(self) -> str | None:
        return None if self.content is None else self.content.decode("utf-8", "replace")


def _parse_stat(path: str, result: Reply) -> FileState:
    if result.get("error"):
        raise FactUnavailable(f"cannot read {path}: {result['error']}")
    if not result.get("exists"):
        return FileState(path, False)
    content = result.get("content_b64")
    return FileState(
        path=path,
        exists=True,
        kind=result.get("kind", ""),
        mode=result.get("mode"),
        owner=result.get("owner"),
        group=result.get("group"),
        size=result.get("size"),
        sha256=result.get("sha256"),
        content=base64.b64decode(content) if content is not None else None,
        target=result.get("target"),
    )


def file_state(path: str, with_content: bool = True, follow: bool = False) -> Fact[FileState]:
    """lstat of `path` (stat with `follow`), its sha256 and (up to 4 MiB) its content."""
    request: StatRequest = {"op": "stat", "path": path, "content": with_content, "follow": follow}
    return Fact(f"stat:{int(with_content)}{'f' if follow else ''}:{path}", request,
                lambda result: _parse_stat(path, result))


def file_glob(patterns: Sequence[str], parse: Callable[[dict[str, str]], Parsed], *,
              what: Literal["content", "link", "name"] = "content", key: str | None = None) -> Fact[Parsed]:
    """Every path matching `patterns` (shell globs), mapped to its text (small files, stripped of
    the last newline), its link target (`what="link"`) or "" (`what="name"`). Unreadable
    paths are left out. Read by the remote runner itself: no process, however many files."""
    def parse_result(result: Reply) -> Parsed:
        if result.get("error"):
            raise FactUnavailable(f"cannot read {', '.join(patterns)}: {result['error']}")
        return parse(dict(result.get("files", {})))

    request: GlobRequest = {"op": "glob", "patterns": list(patterns), "what": what}
    return Fact(key or f"glob:{what}:" + "\0".join(patterns), request, parse_result)


class HostInfo(TypedDict):
    hostname: str
    architecture: str
    cpus: int | None


def host_info() -> Fact[HostInfo]:
    """The host name, machine and usable CPUs, from the remote runner itself (no process)."""
    def parse(result: Reply) -> HostInfo:
        if result.get("error"):
            raise FactUnavailable(f"cannot read the host's identity: {result['error']}")
        cpus = result.get("cpus")
        return HostInfo(hostname=str(result.get("hostname", "")), architecture=str(result.get("machine", "")),
                        cpus=cpus if isinstance(cpus, int) and not isinstance(cpus, bool) else None)

    request: HostRequest = {"op": "host"}
    return Fact("host", request, parse)
