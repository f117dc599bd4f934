"""Packages through apt, behind a small backend seam so dnf can follow."""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from pydantic import field_validator, model_validator

from gpuconf.facts.base import Output, shell
from gpuconf.tasks.base import Change, Check, CheckContext, Params, TaskType, Unknown, drift, in_sync, run

PACKAGE_NAME = __import__("re").compile(r"^[a-z0-9][a-z0-9+.\-]*$")


@dataclass(frozen=True)
class PackageState:
    name: str
    version: str | None  # None: dpkg does not know it
    status: str  # e.g. "ii", "rc", "hi"; "" when unknown

    @property
    def installed(self) -> bool:
        # second letter of db:Status-Abbrev: i installed, W/t triggers pending
        return self.status[1:2] in ("i", "W", "t")

    @property
    def config_only(self) -> bool:
        return self.status[1:2] == "c"

    @property
    def held(self) -> bool:
        return self.status.startswith("h")


def parse_dpkg_query(output: Output, names: tuple[str, ...]) -> dict[str, PackageState]:
    """`dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`."""
    states = {name: PackageState(name, None, "") for name in names}
    for line in output.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0] in states:
            states[parts[0]] = PackageState(parts[0], parts[1] or None, parts[2].strip())
    return states


class AptBackend:
    """What `package` needs from a package manager."""

    LOCK_TIMEOUT = 120

    def query(self, names: tuple[str, ...]):
        command = "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' -- " + \
            " ".join(shlex.quote(n) for n in names) + " 2>/dev/null; true"
        return shell("dpkg:" + ",".join(names), command, lambda out: parse_dpkg_query(out, names), timeout=30)

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
    def _version_single(self) -> "PackageParams":
        if self.version is not None and isinstance(self.name, list) and len(self.name) != 1:
            raise ValueError("'version' needs a single package name")
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
        states: dict[str, PackageState] = ctx.get(fact)
        if not states and params.names:
            raise Unknown("dpkg-query returned nothing")
        changes: list[Change] = []
        allow_held = bool(params.hold)
        if params.state == "present":
            wanted = []
            for name in params.names:
                state = states[name]
                if not state.installed:
                    wanted.append((name, f"install {name}" + (f" {params.version}" if params.version else "")))
                elif params.version and state.version != params.version:
                    wanted.append((name, f"{name} {state.version} installed, want {params.version}"))
            if wanted:
                specs = [f"{n}={params.version}" if params.version else n for n, _ in wanted]
                changes.append(Change("; ".join(s for _, s in wanted),
                                      [backend.install(specs, allow_held or any(states[n].held for n, _ in wanted))],
                                      before={n: states[n].version for n, _ in wanted},
                                      after={n: params.version or "latest" for n, _ in wanted}))
        else:
            purge = params.state == "purged"
            present = [n for n in params.names if states[n].installed or (purge and states[n].config_only)]
            if present:
                verb = "purge" if purge else "remove"
                changes.append(Change(f"{verb} {', '.join(present)}",
                                      [backend.remove(present, purge, any(states[n].held for n in present))]))
        if params.hold is not None and params.state == "present":
            flip = [n for n in params.names if states[n].held != params.hold]
            if flip:
                verb = "hold" if params.hold else "unhold"
                changes.append(Change(f"{verb} {', '.join(flip)}", [backend.hold(flip, params.hold)]))
        if changes:
            return drift(*changes)
        return in_sync(self._describe(params, states))

    @staticmethod
    def _describe(params: PackageParams, states: dict[str, PackageState]) -> str:
        if params.state != "present":
            return f"{', '.join(params.names)} {params.state}"
        parts = []
        for name in params.names:
            state = states[name]
            parts.append(f"{name} {state.version}" + (" (held)" if state.held else ""))
        return ", ".join(parts) + " installed"
