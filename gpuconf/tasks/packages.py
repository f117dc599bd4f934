"""Packages through apt, behind a small backend seam so dnf can follow."""
from __future__ import annotations

import re
import shlex
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpuconf.errors import TaskError
from gpuconf.facts.base import FactUnavailable, Output, command
from gpuconf.facts.packages import DpkgPackage, parse_apt_mark, parse_dpkg_query
from gpuconf.tasks.base import Change, Facts, Op, Params, TaskType, Verdict, drift, in_sync, run

PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9+.\-]*$")
# apt's words when DPkg::Lock::Timeout runs out: "Could not get lock /var/lib/dpkg/lock-frontend.
# It is held by process 1234 (unattended-upgr)"
LOCK_HELD = re.compile(r"Could not get lock (?P<path>\S+?)\.?\s+It is held by process (?P<pid>\d+)"
                       r"(?: \((?P<name>[^)]*)\))?")
DPKG_LOCKED = re.compile(r"lock was locked by another process with pid (?P<pid>\d+)")
LOCK_FAILED = re.compile(r"Could not get lock|Unable to acquire the dpkg")


def _listing(output: Output):
    if output.timed_out:  # a partial listing would read as "not installed": drift that is not there
        raise FactUnavailable("dpkg-query timed out")
    return parse_dpkg_query(output.stdout)


def _states(output: Output, names: tuple[str, ...]) -> dict[str, DpkgPackage | None]:
    listing = _listing(output)
    return {name: listing.get(name) for name in names}


def _installed(package: DpkgPackage | None) -> bool:
    # unpacked and configured, with triggers still to run (`it`, `iW`): reinstalling changes nothing
    return package is not None and package.status in ("installed", "triggers-pending", "triggers-awaited")


def _config_only(package: DpkgPackage | None) -> bool:
    return package is not None and package.status == "config-files"


def _held(package: DpkgPackage | None) -> bool:
    return package is not None and package.held


DPKG_FORMAT = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"


def installed_matching(pattern: str):
    """Packages whose names match a dpkg glob (`nvidia-*`), as a DpkgList."""
    return command(["dpkg-query", "-W", f"-f={DPKG_FORMAT}", "--", pattern], _listing, timeout=30,
                   key=f"dpkg-glob:{pattern}")


class AptBackend:
    """What `package` needs from a package manager. Every apt call waits up to
    `lock_timeout` seconds for the dpkg lock (apt's DPkg::Lock::Timeout)."""

    LOCK_TIMEOUT = 120.0

    def query(self, names: tuple[str, ...]):
        return command(["dpkg-query", "-W", f"-f={DPKG_FORMAT}", "--", *names], lambda out: _states(out, names),
                       timeout=30, key="dpkg:" + ",".join(names))

    def _apt(self, verb: str, args: list[str], allow_held: bool, lock_timeout: float) -> str:
        options = ["-y", "-q", "-o", f"DPkg::Lock::Timeout={lock_timeout:.0f}",
                   "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
        if verb == "install":
            options.append("--allow-downgrades")
        if allow_held:
            options.append("--allow-change-held-packages")
        return "DEBIAN_FRONTEND=noninteractive apt-get " + shlex.join([verb, *options, "--", *args])

    def install(self, specs: list[str], allow_held: bool, lock_timeout: float = LOCK_TIMEOUT):
        return run(self._apt("install", specs, allow_held, lock_timeout), timeout=1800 + lock_timeout)

    def remove(self, names: list[str], purge: bool, allow_held: bool, lock_timeout: float = LOCK_TIMEOUT):
        return run(self._apt("purge" if purge else "remove", names, allow_held, lock_timeout),
                   timeout=1800 + lock_timeout)

    def hold(self, names: list[str], hold: bool):
        # dpkg --set-selections under apt-mark does not wait for the lock: it fails at once, naming the holder
        op = run(["apt-mark", "hold" if hold else "unhold", *names], timeout=120)
        return Op(dict(op.request, marks=list(names)) if hold else op.request, op.description)


def lock_error(output: str, lock_timeout: float) -> str | None:
    """A failure because another process holds the dpkg lock, said plainly, with the holder's PID
    when apt or dpkg names it."""
    held = LOCK_HELD.search(output) or DPKG_LOCKED.search(output)
    if held:
        who = f"process {held['pid']}" + (f" ({held['name']})" if held.groupdict().get("name") else "")
        return (f"the dpkg lock is held by {who}: waited {lock_timeout:g} s (lock_timeout) and left it alone; "
                "retry when it has finished, or raise lock_timeout")
    if LOCK_FAILED.search(output):
        return (f"the dpkg lock is held by another process: waited {lock_timeout:g} s (lock_timeout) "
                "and left it alone")
    return None


BACKENDS = {"apt": AptBackend()}


class PackageParams(Params):
    name: str | list[str]
    version: str | None = None
    state: Literal["present", "absent", "purged"] = "present"
    hold: bool | None = None
    backend: Literal["apt"] = "apt"
    lock_timeout: float = Field(AptBackend.LOCK_TIMEOUT, ge=0, le=86400)  # seconds to wait for the dpkg lock

    @field_validator("name")
    @classmethod
    def _names(cls, value: str | list[str]) -> str | list[str]:
        for name in [value] if isinstance(value, str) else value:
            if not PACKAGE_NAME.match(name):
                raise ValueError(f"'{name}' is not a valid package name")
        return value

    @model_validator(mode="after")
    def _version_present(self) -> PackageParams:
        if self.version is not None and self.state != "present":
            raise ValueError("'version' only applies to state present")
        return self

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,) if isinstance(self.name, str) else tuple(self.name)


class Package(TaskType):
    """Packages present (optionally at an exact version), absent or purged;
    held or unheld (`apt-mark`). Waits up to `lock_timeout` seconds (default
    120) for the dpkg lock, then fails naming the holder's PID; it never kills
    the holder."""

    name = "package"
    Params = PackageParams

    def reads(self, params: PackageParams):
        return [BACKENDS[params.backend].query(params.names)]

    def check(self, params: PackageParams, facts: Facts) -> Verdict:
        backend = BACKENDS[params.backend]
        fact = backend.query(params.names)
        states: dict[str, DpkgPackage | None] = facts[fact]
        changes: list[Change] = []
        allow_held = bool(params.hold)
        if params.state == "present":
            wanted = []
            for name in params.names:
                state = states[name]
                if state is None or not _installed(state):
                    wanted.append((name, f"install {name}" + (f" {params.version}" if params.version else "")))
                elif params.version and state.version != params.version:
                    wanted.append((name, f"{name} {state.version} installed, want {params.version}"))
            if wanted:
                specs = [f"{n}={params.version}" if params.version else n for n, _ in wanted]
                changes.append(Change("; ".join(s for _, s in wanted),
                                      [backend.install(specs, allow_held or any(_held(states[n]) for n, _ in wanted),
                                                       params.lock_timeout)],
                                      before={n: getattr(states[n], "version", None) for n, _ in wanted},
                                      after={n: params.version or "latest" for n, _ in wanted}))
        else:
            purge = params.state == "purged"
            present = [n for n in params.names if _installed(states[n]) or (purge and _config_only(states[n]))]
            if present:
                verb = "purge" if purge else "remove"
                changes.append(Change(f"{verb} {', '.join(present)}",
                                      [backend.remove(present, purge, any(_held(states[n]) for n in present),
                                                     params.lock_timeout)]))
        if params.hold is not None and params.state == "present":
            flip = [n for n in params.names if _held(states[n]) != params.hold]
            if flip:
                verb = "hold" if params.hold else "unhold"
                changes.append(Change(f"{verb} {', '.join(flip)}", [backend.hold(flip, params.hold)]))
        if changes:
            return drift(*changes)
        return in_sync(self._describe(params, states))

    def apply(self, ctx, params: PackageParams, changes: list[Change]) -> None:
        """One op at a time (install before hold), so that a failure stops the rest and a held
        dpkg lock is told apart from any other failure: apt names the holder on stdout."""
        for op in (op for change in changes for op in change.ops):
            output = ctx.execute([Op(dict(op.request, check=False), op.description)])[0]
            if output.rc == 0:
                if op.request.get("marks"):  # apt-mark hold: every name must be reported held
                    marked = parse_apt_mark(output.stdout)
                    missed = set(op.request["marks"]) - set(marked.held) - set(marked.already_held)
                    if missed:
                        raise TaskError(f"{op.description}: apt-mark did not hold {', '.join(sorted(missed))}: "
                                        f"{'; '.join(marked.problems) or output.stdout.strip()[-300:]}")
                continue
            plain = lock_error(output.stdout + "\n" + output.stderr, params.lock_timeout)
            tail = (output.stderr.strip() or output.stdout.strip())[-800:]
            raise TaskError(plain or f"{op.description} failed (exit {output.rc}): {tail}")

    @staticmethod
    def _describe(params: PackageParams, states: dict[str, DpkgPackage | None]) -> str:
        if params.state != "present":
            return f"{', '.join(params.names)} {params.state}"
        parts = []
        for name in params.names:
            state = states[name]
            parts.append(f"{name} {state.version if state else '?'}" + (" (held)" if _held(state) else ""))
        return ", ".join(parts) + " installed"
