"""The wire between the controller and the remote runner, declared once.

A round trip sends one `RunnerRequest` (a list of ops) and gets one JSON line per op back. Each op
is one of a closed set of names (`OpName`): the runner's dispatch table has exactly these
(gpuconf/connection/remote/dispatch.py, compared by tests/unit/facts/test_wire.py), and every request a
builder makes is one of the TypedDicts below, checked by mypy where it is built: the facts'
constructors (facts/base.py, nvidia_smi.py, initramfs.py), the tasks' ops (tasks/base.py), the
engine's reboot ops (engine/context.py) and the run lock (connection/lock.py).

A key marked NotRequired is one the runner has a default for (the comment says which). What
comes back is declared per op (`REPLY_OF`); `Reply` is any of them, as a fact's parse reads it.

This module sits with the facts (layer 2: what a host can be asked) so that facts and tasks,
which build requests, can import it; the runner itself is standard-library Python 3.6 and
imports nothing from here. (No `from __future__ import annotations`: the tests read NotRequired
from each class at run time, which postponed annotations would hide.)
"""
from typing import Literal, NotRequired, TypedDict, get_args

# -- the op names: a closed set ---------------------------------------------------------------

# reads: a read-only (check) request may hold only these, and consecutive ones run at once
ReadOpName = Literal["sh", "stat", "exec", "glob", "host", "cpio"]
# writes: refused in a read-only request; each runs alone, in order, and a failed `run` (or any
# write that raised) skips the ops after it
WriteOpName = Literal["run", "write", "mkdir", "remove", "symlink", "reboot", "announce_reboot"]
OpName = Literal[ReadOpName, WriteOpName]

READ_OPS: frozenset[str] = frozenset(get_args(ReadOpName))
WRITE_OPS: frozenset[str] = frozenset(get_args(WriteOpName))


# -- reads --------------------------------------------------------------------------------------

class ShRequest(TypedDict):
    """A command the playbook's author wrote (`probe`, `unless`), run by sh, or as `argv` when
    it is one program and its plain words (facts/base.py simple_argv)."""

    op: Literal["sh"]
    cmd: str
    timeout: NotRequired[float]  # 10
    argv: NotRequired[list[str]]


class DropRefusedRule(TypedDict):
    """Rerun a program that refuses one item of a comma-separated argument: the output line
    matching `refused` names the item (its first group); the argument is the one starting with
    `prefix`; `renames` gives an item's old name to try instead; at most `max` reruns."""

    prefix: str
    refused: str
    renames: dict[str, str]
    max: int


# A read-only program as an argv list (no shell), with the runner's filters. Declared by call,
# not by class: "or" (the alternatives, run in turn while the one before fails) is a keyword.
ExecRequest = TypedDict("ExecRequest", {
    "op": Literal["exec"],
    "argv": list[str],
    "timeout": NotRequired[float],  # 10, for the op as a whole, alternatives and reruns included
    "or": NotRequired[list[list[str]]],
    "unless_exists": NotRequired[str],
    "if_exists": NotRequired[str],
    "if_os": NotRequired[list[str]],  # os-release ID or ID_LIKE words
    "grep": NotRequired[str],  # a regular expression, case-insensitive
    "tail": NotRequired[int],
    "records": NotRequired[bool],  # grep and tail keep whole kernel-log records (a match keeps its record)
    "drop_refused": NotRequired[DropRefusedRule],
    "apt_architectures": NotRequired[bool],  # apt's architectures as -o options after argv[0]
})


class StatRequest(TypedDict):
    op: Literal["stat"]
    path: str
    content: NotRequired[bool]  # False: the content of a file up to 4 MiB, base64
    follow: NotRequired[bool]  # False: lstat


class GlobRequest(TypedDict):
    op: Literal["glob"]
    patterns: list[str]
    what: NotRequired[Literal["content", "link", "name"]]  # content


class HostRequest(TypedDict):
    op: Literal["host"]


class CpioRequest(TypedDict):
    """Members of an initramfs: the first of `paths` that exists ({kernel}: the running kernel's
    release, read by the runner), members matching the glob `members`."""

    op: Literal["cpio"]
    paths: list[str]
    members: str
    names_only: NotRequired[bool]  # False
    timeout: NotRequired[float]  # 60, for a zstd process


# -- writes -------------------------------------------------------------------------------------

class RunRequest(TypedDict):
    op: Literal["run"]
    cmd: str  # run by sh; with argv, what is shown
    argv: NotRequired[list[str]]  # run with no shell: each word's $VAR and ~ expanded on the host, as Ansible's command
    prefix: NotRequired[str]  # sh text before the argv: `cd DIR && env K=V `
    timeout: NotRequired[float]  # 600
    check: NotRequired[bool]  # True: a failure skips the ops after it
    stdin: NotRequired[str]


class WriteRequest(TypedDict):
    """An atomic write; mode, owner and group default to those of the file replaced."""

    op: Literal["write"]
    path: str
    content_b64: str
    mode: NotRequired[int | None]
    owner: NotRequired[str | None]
    group: NotRequired[str | None]
    backup: NotRequired[bool]


class MkdirRequest(TypedDict):
    op: Literal["mkdir"]
    path: str
    mode: NotRequired[int | None]
    owner: NotRequired[str | None]
    group: NotRequired[str | None]


class RemoveRequest(TypedDict):
    op: Literal["remove"]
    path: str
    recursive: NotRequired[bool]


class SymlinkRequest(TypedDict):
    op: Literal["symlink"]
    path: str
    target: str


class RebootRequest(TypedDict):
    """`cmd` run detached after `delay` seconds, once the reply is out; with `lock`, announced
    beside the run lock first (announce_reboot)."""

    op: Literal["reboot"]
    cmd: str
    delay: NotRequired[float]  # 1
    lock: NotRequired[str]
    timeout: NotRequired[float]  # 600: how long the announcement holds


class AnnounceRebootRequest(TypedDict):
    op: Literal["announce_reboot"]
    lock: str
    timeout: NotRequired[float]  # 600


ReadRequest = ShRequest | ExecRequest | StatRequest | GlobRequest | HostRequest | CpioRequest
WriteOpRequest = (RunRequest | WriteRequest | MkdirRequest | RemoveRequest | SymlinkRequest | RebootRequest
                  | AnnounceRebootRequest)
Request = ReadRequest | WriteOpRequest

REQUEST_OF: dict[str, type] = {
    "sh": ShRequest, "exec": ExecRequest, "stat": StatRequest, "glob": GlobRequest, "host": HostRequest,
    "cpio": CpioRequest, "run": RunRequest, "write": WriteRequest, "mkdir": MkdirRequest, "remove": RemoveRequest,
    "symlink": SymlinkRequest, "reboot": RebootRequest, "announce_reboot": AnnounceRebootRequest,
}


class CheckLock(TypedDict):
    """A check's run lock: taken shared, waiting at most `wait` seconds (connection/lock.py)."""

    path: str
    wait: float


class RunnerRequest(TypedDict):
    """What one round trip sends after the runner's source."""

    readonly: bool
    ops: list[Request]
    lock: NotRequired[CheckLock]


# -- replies: one JSON line per op, with its index `i` -----------------------------------------

class ReplyBase(TypedDict, total=False):
    """What any op's reply may say instead: an `error` (the op raised, or was refused), or that
    it was `skipped` (an op before it failed); `lost` is the controller's, for an op with no
    reply (the runner stopped early, the call ran out of time)."""

    i: int
    error: str
    skipped: bool
    lost: bool


class CommandReply(ReplyBase, total=False):
    """sh, exec and run: the process's exit status and its output (the last MiB of each)."""

    rc: int
    out: str
    err: str
    timed_out: bool  # killed at its timeout, with its process group
    duration: float
    timeout: float
    argv: list[str]  # exec: the argv that answered (one of its alternatives, fields dropped)
    skipped_because: str  # exec: not run (unless_exists, if_exists, if_os)
    dropped: list[str]  # exec: the items drop_refused took out


class StatReply(ReplyBase, total=False):
    exists: bool
    kind: Literal["file", "directory", "symlink", "other"]
    mode: int
    owner: str
    group: str
    uid: int
    gid: int
    size: int
    sha256: str
    content_b64: str
    target: str


class GlobReply(ReplyBase, total=False):
    files: dict[str, str]  # path -> its text, link target or ""


class HostReply(ReplyBase, total=False):
    hostname: str
    machine: str
    cpus: int


class CpioReply(ReplyBase, total=False):
    exists: bool
    path: str  # the image read (or the first looked for)
    files: dict[str, str]  # member -> its text ("" with names_only)
    cached: bool  # answered from the runner's cache of this image


class DoneReply(ReplyBase, total=False):
    """The other writes: done (else `error`); `backup` is the copy a write made of the old file."""

    ok: bool
    backup: str | None


class Reply(CommandReply, StatReply, GlobReply, HostReply, CpioReply, DoneReply, total=False):
    """Any op's reply, as a fact's parse receives it: the op sent says which of the above."""


REPLY_OF: dict[str, type] = {
    "sh": CommandReply, "exec": CommandReply, "run": CommandReply, "stat": StatReply, "glob": GlobReply,
    "host": HostReply, "cpio": CpioReply, "write": DoneReply, "mkdir": DoneReply, "remove": DoneReply,
    "symlink": DoneReply, "reboot": DoneReply, "announce_reboot": DoneReply,
}


class BusyLine(TypedDict):
    """The one line of a check that did not get the run lock within its wait."""

    busy: Literal[True]
    owner: str
    path: str


class DoneLine(TypedDict):
    """The last line of a round trip the runner finished."""

    done: Literal[True]


# -- what every request has ---------------------------------------------------------------------

DEFAULT_TIMEOUT = {"run": 600.0, "cpio": 60.0}  # the runner's defaults where a request gives none; else 10


def op_timeout(op: Request) -> float:
    """The seconds the runner gives `op` (its own `timeout`, else the runner's default)."""
    given = op.get("timeout")
    return float(given) if isinstance(given, (int, float)) else DEFAULT_TIMEOUT.get(op["op"], 10.0)


def subject(op: Request) -> str:
    """What an op names, shortly (a path, a command, an argv, glob patterns), for -vvv and errors."""
    for key in ("path", "cmd", "argv", "patterns"):
        value = op.get(key)
        if isinstance(value, list):
            return " ".join(str(part) for part in value)
        if value:
            return str(value)
    return ""
