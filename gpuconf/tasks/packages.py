"""Packages through apt, behind a small backend seam so dnf can follow."""
from __future__ import annotations

import shlex
from typing import Literal

from pydantic import field_validator, model_validator

from gpuconf.facts.base import FactUnavailable, Output, shell
from gpuconf.facts.packages import DpkgPackage, parse_dpkg_query
from gpuconf.tasks.base import Change, Check, CheckContext, Params, TaskType, drift, in_sync, run

PACKAGE_NAME = __import__("re").compile(r"^[a-z0-9][a-z0-9+.\-]*$")


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


DPKG_FORMAT = "'${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'"


def installed_matching(pattern: str):
    """Packages whose names match a dpkg glob (`nvidia-*`), as a DpkgList."""
    command = f"dpkg-query -W -f={DPKG_FORMAT} -- {shlex.quote(pattern)} 2>/dev/null; true"
    return shell(f"dpkg-glob:{pattern}", command, _listing, timeout=30)


class AptBackend:
    """What `package` needs from a package manager."""

    LOCK_TIMEOUT = 120

    def query(self, names: tuple[str, ...]):
        command = f"dpkg-query -W -f={DPKG_FORMAT} -- " + " ".join(shlex.quote(n) for n in names) + \
            " 2>/dev/null; true"
        return shell("dpkg:" + ",".join(names), command, lambda out: _states(out, names), timeout=30)

    def _apt(self, verb: str, args: list[str], allow_held: bool) -> str:
        options = ["-y", "-q", "-o", f"DPkg::Lock::Timeout={self.LOCK_TIMEOUT}",
                   "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
        if verb == "install":
            options.append("--allow-downgrades")
        if allow_held:
            options.append("--allow-change-held-packages")
        return "DEBIAN_FRONTEND=noninteractive apt-get " + shlex.join([verb, *options, "--", *args])

    def install(self, specs: list[str], allow_held: bool):
        return run(self._apt("install", specs, allow_held), timeout=1800)

    def remove(self, names: list[str], purge: bool, allow_held: bool):
        return run(self._apt("purge" if purge else "remove", names, allow_held), timeout=1800)

    def hold(self, names: list[str], hold: bool):
        return run(["apt-mark", "hold" if hold else "unhold", *names], timeout=120)


BACKENDS = {"apt": AptBackend()}


class PackageParams(Params):
    name: str | list[str]
    version: str | None = None
    state: Literal["present", "absent", "purged"] = "present"
    hold: bool | None = None
    backend: Literal["apt"] = "apt"

    @field_validator("name")
    @classmethod
    def _names(cls, value: str | list[str]) -> str | list[str]:
        for name in [value] if isinstance(value, str) else value:
            if not PACKAGE_NAME.match(name):
                raise ValueError(f"'{name}' is not a valid package name")
        return value

    @model_validator(mode="after")
    def _version_present(self) -> "PackageParams":
        if self.version is not None and self.state != "present":
            raise ValueError("'version' only applies to state present")
        return self

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,) if isinstance(self.name, str) else tuple(self.name)


class Package(TaskType):
    """Packages present (optionally at an exact version), absent or purged;
    held or unheld (`apt-mark`). Waits up to two minutes for the dpkg lock and
    then fails naming the holder, never killing it."""

    name = "package"
    Params = PackageParams

    def facts(self, params: PackageParams):
        return [BACKENDS[params.backend].query(params.names)]

    def check(self, ctx: CheckContext, params: PackageParams) -> Check:
        backend = BACKENDS[params.backend]
        fact = backend.query(params.names)
        states: dict[str, DpkgPackage | None] = ctx.get(fact)
        changes: list[Change] = []
        allow_held = bool(params.hold)
        if params.state == "present":
            wanted = []
            for name in params.names:
                state = states[name]
                if not _installed(state):
                    wanted.append((name, f"install {name}" + (f" {params.version}" if params.version else "")))
                elif params.version and state.version != params.version:
                    wanted.append((name, f"{name} {state.version} installed, want {params.version}"))
            if wanted:
                specs = [f"{n}={params.version}" if params.version else n for n, _ in wanted]
                changes.append(Change("; ".join(s for _, s in wanted),
                                      [backend.install(specs, allow_held or any(_held(states[n]) for n, _ in wanted))],
                                      before={n: states[n].version if states[n] else None for n, _ in wanted},
                                      after={n: params.version or "latest" for n, _ in wanted}))
        else:
            purge = params.state == "purged"
            present = [n for n in params.names if _installed(states[n]) or (purge and _config_only(states[n]))]
            if present:
                verb = "purge" if purge else "remove"
                changes.append(Change(f"{verb} {', '.join(present)}",
                                      [backend.remove(present, purge, any(_held(states[n]) for n in present))]))
        if params.hold is not None and params.state == "present":
            flip = [n for n in params.names if _held(states[n]) != params.hold]
            if flip:
                verb = "hold" if params.hold else "unhold"
                changes.append(Change(f"{verb} {', '.join(flip)}", [backend.hold(flip, params.hold)]))
        if changes:
            return drift(*changes)
        return in_sync(self._describe(params, states))

    @staticmethod
    def _describe(params: PackageParams, states: dict[str, DpkgPackage | None]) -> str:
        if params.state != "present":
            return f"{', '.join(params.names)} {params.state}"
        parts = []
        for name in params.names:
            state = states[name]
            parts.append(f"{name} {state.version}" + (" (held)" if _held(state) else ""))
        return ", ".join(parts) + " installed"
