"""The connection protocol: each `call` is one round trip to the remote runner.

The runner (`remote/`, its parts joined into one script) is sent on stdin with the request,
so nothing is installed on a host and every host runs exactly the controller's version.
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from gpuconf.connection.sshconfig import config_path, lookup
from gpuconf.errors import InventoryError, RemoteError
from gpuconf.facts.base import READ_ONLY_PROGRAMS
from gpuconf.facts.wire import BusyLine, CheckLock, Reply, Request, RunnerRequest
from gpuconf.files.values import JSONValue

BUSY = "busy: another gpuconf run holds"  # how a HostBusy message starts (a task's error says it so)


class HostBusy(RemoteError):
    """Another gpuconf run holds the host's lock beyond the wait."""


class RebootPending(HostBusy):
    """Another gpuconf run rebooted the host and it has not gone down yet (connection/lock.py):
    `boot_id` is the boot that is ending; the caller waits for a new one."""

    def __init__(self, host: str, note: Mapping[str, JSONValue]):
        self.boot_id = str(note.get("boot_id", ""))
        self.owner = str(note.get("owner", "unknown"))
        super().__init__(f"{host}: a reboot started by another gpuconf run ({self.owner}; "
                         f"reboot sent at {note.get('when', '?')}) is pending")

SEPARATOR = "\n#--gpuconf-request--\n"
START = "#--gpuconf-runner--\n"
# The runner's parts (gpuconf/connection/remote/), in the order they are joined: each uses only
# names of the parts before it.
PARTS = ("process", "reads", "writes", "initramfs", "dispatch")
# A part's import of another part: true here, where each part is a module; on the host the parts
# are one script and share its names, so these lines are left out.
PART_IMPORT = re.compile(r"^from gpuconf\.connection\.remote\.\w+ import (?:\([^)]*\)|.*)\n", re.MULTILINE)


def runner_script() -> str:
    """The runner as one script. It refuses, in a read-only request, any program the facts may
    not run either: READ_ONLY_PROGRAMS is written into it."""
    folder = Path(__file__).with_name("remote")
    script = "".join(PART_IMPORT.sub("", (folder / f"{part}.py").read_text()) for part in PARTS)
    return script.replace("READ_ONLY_PROGRAMS = {}", f"READ_ONLY_PROGRAMS = {dict(READ_ONLY_PROGRAMS)!r}", 1)


SCRIPT = runner_script()
# Everything before START is skipped: a sudo password line that sudo -S did not
# need to read (NOPASSWD) must not reach the interpreter.
BOOTSTRAP = (
    f"import sys;s=sys.stdin.read();s=s[s.index({START!r})+{len(START)}:];a,b=s.split({SEPARATOR!r},1);"
    "exec(compile(a,'gpuconf-remote','exec'),{'REQUEST':b,'__name__':'gpuconf_remote'})"
)
# The runner that serves a host's run (gpuconf/connection/ssh.py): the script is read line by line up
# to the separator's line, then the runner answers one request per line until stdin closes.
SERVE_BOOTSTRAP = (
    "import sys\nr=sys.stdin.buffer\na=[]\nfor l in iter(r.readline,b''):\n"
    f" if l=={START.encode()!r}:\n  a=[]\n elif l=={SEPARATOR.lstrip().encode()!r}:\n  break\n"
    " else:\n  a.append(l)\n"
    "exec(compile(b''.join(a),'gpuconf-remote','exec'),{'REQUEST':None,'__name__':'gpuconf_remote'})"
)

# Ansible's names are accepted too, so an Ansible inventory works unchanged.
ALIASES = {
    "ansible_host": "address",
    "ansible_port": "port",
    "ansible_user": "user",
    "ansible_ssh_private_key_file": "ssh_key",
    "ansible_become": "become",
    "ansible_connection": "connection",
    "ansible_python_interpreter": "python",
    "ansible_become_password": "become_password",
    "ansible_become_pass": "become_password",
    # Ansible's older names, still in many inventories; given both, these win, as in Ansible's ssh plugin
    "ansible_ssh_host": "address",
    "ansible_ssh_port": "port",
    "ansible_ssh_user": "user",
}
OLDER_NAMES = ("ansible_ssh_host", "ansible_ssh_port", "ansible_ssh_user")
CONNECTION_VARS = ("address", "port", "user", "ssh_key", "become", "become_password", "connection",
                   "connect_timeout", "connect_retries", "jump_host", "proxy_command", "known_hosts_file", "python",
                   "ssh_config_file")


# every name a connection variable goes by, gpuconf's and Ansible's
CONNECTION_NAMES = (*(k for k, v in ALIASES.items() if v in CONNECTION_VARS), *CONNECTION_VARS)


class ConnectionSpec(BaseModel):
    """How to reach one host, read from its inventory variables."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)  # connect_timeout: .inf

    host: str
    address: str = ""
    port: int = Field(22, ge=1, le=65535)
    user: str | None = None
    ssh_key: str | None = None
    become: bool = False
    connection: str = "ssh"
    connect_timeout: float = Field(10.0, gt=0)
    connect_retries: int = Field(2, ge=0, le=10)
    jump_host: str | None = None  # a ProxyJump chain: [user@]host[:port], comma separated, reached in order
    proxy_command: str | None = None  # a command whose stdin and stdout reach the host (ssh's ProxyCommand)
    known_hosts_file: str | None = None
    python: str = "python3"
    become_password: SecretStr | None = None  # sent on stdin to sudo -S, never in arguments or logs
    ssh_config_file: str | None = None  # default: GPUCONF_SSH_CONFIG, else ~/.ssh/config

    @field_validator("connection")
    @classmethod
    def _known_connection(cls, value: str) -> str:
        if value not in ("ssh", "local"):
            raise ValueError(f"connection must be 'ssh' or 'local', not '{value}'")
        return value

    @model_validator(mode="after")
    def _default_address(self) -> ConnectionSpec:
        if not self.address:
            object.__setattr__(self, "address", self.host)
        return self

    @classmethod
    def from_vars(cls, host: str, variables: Mapping[str, object],
                  overrides: Mapping[str, object] | None = None) -> ConnectionSpec:
        given: dict[str, object] = {}
        for key, value in sorted(variables.items(), key=lambda item: item[0] in OLDER_NAMES):
            name = ALIASES.get(key, key)
            if name in CONNECTION_VARS:
                given[name] = value
        given.update(overrides or {})
        values: dict[str, object] = {"host": host}
        if given.get("connection", "ssh") == "ssh":
            # ~/.ssh/config below the inventory: its entry for the name ssh would be given
            path = config_path(str(given["ssh_config_file"]) if given.get("ssh_config_file") else None)
            configured = lookup(str(given.get("address") or host), path)
            if "address" in configured:
                given.pop("address", None)  # the inventory named the alias; its HostName is where to go
            if given.get("jump_host") or given.get("proxy_command"):  # the inventory's way through wins whole
                configured.pop("jump_host", None)
                configured.pop("proxy_command", None)
            values.update(configured)
        values.update(given)
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise InventoryError(f"host {host}: bad connection variable '{field}': {first['msg']}") from None


def uses_sudo(spec: ConnectionSpec, remote_user: str | None, become: bool | None = None,
              become_user: str | None = None) -> bool:
    """Whether the runner starts through sudo: become is on and it would run as someone else
    (root, or `become_user`)."""
    return bool(spec.become if become is None else become) and remote_user != (become_user or "root")


def sudo_prefix(spec: ConnectionSpec, become_user: str | None = None) -> str:
    # -n never prompts; with a password, -S reads it from stdin and -p '' prints no prompt
    user = f"-u {shlex.quote(become_user)} " if become_user else ""
    return f"sudo -S -p '' {user}-- " if spec.become_password is not None else f"sudo -n {user}-- "


def runner_command(spec: ConnectionSpec, remote_user: str | None, become: bool | None = None,
                   become_user: str | None = None, serve: bool = False) -> str:
    bootstrap = SERVE_BOOTSTRAP if serve else BOOTSTRAP
    command = f"{shlex.quote(spec.python)} -B -S -c {shlex.quote(bootstrap)}"  # -S: the stdlib only, no site
    if uses_sudo(spec, remote_user, become, become_user):
        command = sudo_prefix(spec, become_user) + command
    return command


def serve_preamble(spec: ConnectionSpec, sudo: bool) -> bytes:
    """What a serving runner reads first (SERVE_BOOTSTRAP): sudo's password line, the script."""
    password = ""
    if sudo and spec.become_password is not None:
        password = spec.become_password.get_secret_value() + "\n"
    return (password + START + SCRIPT + SEPARATOR).encode()


def payload(ops: Sequence[Request], readonly: bool, lock: CheckLock | None = None,
            spec: ConnectionSpec | None = None, sudo: bool = False) -> bytes:
    request: RunnerRequest = {"readonly": readonly, "ops": list(ops)}
    if lock:
        request["lock"] = lock
    password = ""
    if sudo and spec is not None and spec.become_password is not None:
        password = spec.become_password.get_secret_value() + "\n"
    return (password + START + SCRIPT + SEPARATOR + json.dumps(request)).encode()


def explain_failure(host: str, stderr: str, rc: int | None) -> str:
    """Turn a runner that did not run into a message that says what to do."""
    tail = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if "password is required" in stderr or "a terminal is required" in stderr:
        return (f"sudo on {host} wants a password: give it with --ask-become-pass or GPUCONF_BECOME_PASSWORD, "
                f"or allow passwordless sudo (NOPASSWD) for this user ({tail})")
    if "incorrect password" in stderr or "Sorry, try again" in stderr:
        return f"sudo on {host} refused the become password ({tail})"
    if rc == 127 or "not found" in stderr:
        return f"python3 was not found on {host}: gpuconf runs its probes with python3 (>= 3.6) ({tail})"
    return f"the gpuconf runner failed on {host} (exit {rc}): {tail or 'no output'}"


def parse_replies(host: str, ops: Sequence[Request], stdout: str, stderr: str, rc: int | None,
                  cut_short: str | None = None) -> list[Reply]:
    """Align the runner's JSON lines with the ops sent: each line is read as the declared `Reply`
    here, at the JSON boundary (tests/unit/facts/test_wire.py checks that the runner's replies are
    what gpuconf/facts/wire.py declares). An op without a reply was not reached: it gets an
    `error` saying why."""
    replies: dict[int, Reply] = {}
    done = False
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            found = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(found, dict):
            continue
        if found.get("busy"):
            busy = cast(BusyLine, found)
            raise HostBusy(f"{BUSY} {busy.get('path')} on {host}: {busy.get('owner')}")
        if found.get("done"):
            done = True
        elif isinstance(found.get("i"), int):
            reply = cast(Reply, found)
            replies[reply["i"]] = reply
    if not done and not replies and cut_short is None:
        raise RemoteError(explain_failure(host, stderr, rc))
    reason = cut_short or ("the runner stopped early: " + explain_failure(host, stderr, rc) if not done else "")
    lost: list[Reply] = [{"i": i, "error": reason or "no reply", "lost": True} for i in range(len(ops))]
    return [replies.get(i, lost[i]) for i in range(len(ops))]


class Connection:
    """Base class: counts connections and round trips for the benchmarks."""

    def __init__(self, spec: ConnectionSpec):
        self.spec = spec
        self.round_trips = 0
        self.connects = 0

    def open(self) -> None:
        raise NotImplementedError

    def call(self, ops: Sequence[Request], readonly: bool, timeout: float, become: bool | None = None,
             lock: CheckLock | None = None, become_user: str | None = None) -> list[Reply]:
        """Run `ops` on the host in one round trip; replies align with ops.

        `become` overrides the host's own setting for this call (sudo -n);
        `become_user` makes that sudo run the runner as this user instead of root (sudo -u);
        `lock` makes the runner take the run lock shared first (checks)."""
        raise NotImplementedError

    def hold_lock(self, path: str, wait: float, owner: str) -> LockHandle:
        """Take the run lock exclusively until the handle is closed (applies)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class LockHandle:
    """A run lock held on a host; close() releases it."""

    def __init__(self, close: Callable[[], None]):
        self._close = close

    def close(self) -> None:
        self._close()


def lock_reply(host: str, line: str, stderr: str) -> None:
    """Raise unless the holder said it has the lock."""
    if line.startswith("locked"):
        return
    if line.startswith("rebooting "):
        try:
            note = json.loads(line[len("rebooting "):])
        except ValueError:
            note = {}
        raise RebootPending(host, note if isinstance(note, dict) else {})
    if line.startswith("busy"):
        raise HostBusy(f"{BUSY} the lock on {host}: {line[5:]}")
    if line.startswith("error "):
        raise RemoteError(f"cannot take the run lock on {host}: {line[6:].strip()}")
    raise RemoteError(f"cannot take the run lock on {host}: {(stderr or line).strip()[-300:] or 'no answer'}")
