"""gpuconf_agent: the controller's own gpuconf on the node (the node's half: the pre-job gate, the
health check, the drift timer), with no package index on the node.

The node runs it on its distribution's Python when that is new enough (gpuconf needs 3.11:
Debian 12's 3.11 and EL 10's 3.12 are, Ubuntu 22.04's 3.10 and EL 9's 3.9 are not), else on the
distribution's newer Python package (EL 8 and 9, Ubuntu 22.04: python3.11), installed by apply;
where there is none the task fails saying so. The controller builds the bundle for that Python
(gpuconf/release/bundle.py) and copies it; the node unpacks it with that Python alone
(gpuconf/release/node_install.py). The agent's version is the controller's: a node behind (or
ahead) is drift, and apply brings it level.
"""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version
from pydantic import field_validator

from gpuconf import __version__
from gpuconf.facts.base import Fact, FileState, file_glob, file_state
from gpuconf.facts.platform import Platform
from gpuconf.files.values import JSONValue
from gpuconf.tasks.base import (
    ApplyContext,
    Change,
    Facts,
    Op,
    Params,
    Refused,
    TaskType,
    Verdict,
    drift,
    in_sync,
    make_directory,
    run,
    write_file,
)

if TYPE_CHECKING:
    from gpuconf.release.bundle import Bundle, Target

# gpuconf's requires-python (pyproject.toml): the node's half is the same package
NODE_PYTHON = (3, 11)
# The distribution's newer Python where its python3 is older than NODE_PYTHON: (os-release ID or
# family, major or VERSION_ID) -> package. RHEL 8.8+ and 9.2+ AppStream ship python3.11; Ubuntu
# 22.04 ships python3.11 in universe (jammy-updates).
NEWER_PYTHON: dict[tuple[str, str], str] = {
    ("RedHat", "8"): "python3.11",
    ("RedHat", "9"): "python3.11",
    ("ubuntu", "22.04"): "python3.11",
}
BIN = "/usr/bin"
VERSIONED = re.compile(r"^python(\d+)\.(\d+)$")


class GpuconfAgentParams(Params):
    prefix: str = "/opt/gpuconf"
    python: str | None = None          # an interpreter (pythonX.Y) instead of the distribution's choice
    wheelhouse: str | None = None      # on the controller: wheels for a node Python the controller is not
    download: bool = False             # pip download a missing wheel from the controller's index

    @field_validator("prefix")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or value.rstrip("/") == "":
            raise ValueError(f"prefix must be an absolute directory, not '{value}'")
        return value.rstrip("/")

    @field_validator("python", "wheelhouse", mode="before")
    @classmethod
    def _empty(cls, value: object) -> object:
        return None if value in ("", None) else value

    @field_validator("python")
    @classmethod
    def _versioned(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or not VERSIONED.match(value.rsplit("/", 1)[-1])):
            raise ValueError(f"python must be an absolute path to a pythonX.Y, not '{value}'")
        return value


@dataclass(frozen=True)
class Interpreter:
    """The Python the agent runs on, and the package that brings it when it is not there yet."""

    path: str
    version: tuple[int, int]
    package: str | None = None


def _version(name: str) -> tuple[int, int] | None:
    match = VERSIONED.match(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def choose_python(default_link: str | None, versioned: set[str], platform: Platform) -> Interpreter:
    """The distribution's python3 when it is new enough, else its newest pythonX.Y that is, else
    the distribution's newer Python package; Refused, naming what is missing, when there is none."""
    default = _version(default_link.rsplit("/", 1)[-1]) if default_link else None
    if default is not None and default >= NODE_PYTHON and f"python{default[0]}.{default[1]}" in versioned:
        return Interpreter(f"{BIN}/python{default[0]}.{default[1]}", default)
    present = sorted(v for v in map(_version, versioned) if v is not None and v >= NODE_PYTHON)
    if present:
        return Interpreter(f"{BIN}/python{present[-1][0]}.{present[-1][1]}", present[-1])
    system = f"{platform.distribution} {platform.version_id}"
    has = f"python3 is {default[0]}.{default[1]}" if default else "has no python3 of a version gpuconf can read"
    package = NEWER_PYTHON.get((platform.os_id, platform.version_id)) or \
        NEWER_PYTHON.get((platform.family, platform.major))
    if package is None:
        raise Refused(f"{system}'s {has}, and gpuconf's node half needs Python "
                      f"{NODE_PYTHON[0]}.{NODE_PYTHON[1]} or newer, which {system} does not package: install one "
                      "and give its path as gpuconf_agent_python (e.g. /usr/local/bin/python3.11)")
    version = _version(package)
    assert version is not None
    return Interpreter(f"{BIN}/{package}", version, package)


def install_python_op(platform: Platform, package: str) -> Op:
    """The distribution's package manager installs `package`, non-interactively."""
    if platform.packages == "apt":
        return run(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q", package], timeout=900)
    if platform.packages == "dnf":
        return run(["dnf", "-y", "-q", "install", package], timeout=900)
    raise Refused(f"{platform.distribution}: gpuconf installs {package} with apt or dnf only")


def _installed(state: FileState) -> Mapping[str, JSONValue]:
    if not state.exists or state.text is None:
        return {}
    try:
        data = json.loads(state.text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _relation(installed: str) -> str:
    try:
        return "behind" if Version(installed) < Version(__version__) else "ahead of"
    except InvalidVersion:
        return "not"


class GpuconfAgent(TaskType[GpuconfAgentParams]):
    """The controller's own gpuconf, installed on the node under `prefix` (default /opt/gpuconf:
    bin/gpuconf, agent.json, releases/), on the distribution's Python where it is new enough
    (3.11 or newer), else on its newer Python package (EL 8 and 9, Ubuntu 22.04: python3.11), with
    no package index on the node: the controller builds the bundle (gpuconf and its dependencies,
    for that Python) and copies it. An agent at another version than the controller's is drift.
    `wheelhouse` (a directory on the controller) holds wheels for a node Python the controller's
    own environment does not suit; `download: true` fetches them with pip."""

    name = "gpuconf_agent"
    Params = GpuconfAgentParams
    host_facts = frozenset({"architecture"})

    def reads(self, params: GpuconfAgentParams) -> list[Fact]:
        return [file_state(f"{params.prefix}/agent.json"), file_state(f"{params.prefix}/bin/gpuconf"),
                _python_link(), _pythons()]

    def check(self, params: GpuconfAgentParams, facts: Facts) -> Verdict:
        if params.python:
            version = _version(params.python.rsplit("/", 1)[-1])
            assert version is not None
            interpreter = Interpreter(params.python, version)
        else:
            link = facts[_python_link()].get(f"{BIN}/python3")
            interpreter = choose_python(link, facts[_pythons()], facts.platform)
        machine = facts.host_text("architecture") or ""
        if not machine:
            raise Refused("the node's machine architecture is unknown (uname -m)")
        tag = f"cp{interpreter.version[0]}{interpreter.version[1]}-{machine}"
        installed = _installed(facts[file_state(f"{params.prefix}/agent.json")])
        launcher = facts[file_state(f"{params.prefix}/bin/gpuconf")]
        want = {"version": __version__, "python": interpreter.path, "tag": tag}
        changes = []
        if interpreter.package:
            platform = facts.platform
            changes.append(Change(
                f"install {interpreter.package} ({platform.distribution} {platform.version_id}'s python3 is too old: "
                f"gpuconf's node half needs Python {NODE_PYTHON[0]}.{NODE_PYTHON[1]} or newer)",
                [install_python_op(platform, interpreter.package)]))
        have = {key: installed.get(key) for key in want}
        if have != want or not launcher.exists:
            if not installed.get("version"):
                summary = f"install gpuconf {__version__} (the controller's) on {interpreter.path}"
            elif installed["version"] != __version__:
                summary = f"gpuconf agent {installed['version']} is {_relation(str(installed['version']))} the " \
                          f"controller's {__version__}: install {__version__}"
            elif installed.get("python") != interpreter.path:
                summary = f"gpuconf agent {__version__} runs on {installed.get('python')}: install it on " \
                          f"{interpreter.path}"
            else:
                summary = f"gpuconf agent {__version__}: {params.prefix}/bin/gpuconf is missing: install it again"
            changes.append(Change(summary, [], before=installed.get("version"), after=dict(want)))
        if changes:
            return drift(*changes)
        return in_sync(f"gpuconf agent {__version__} (the controller's version) in {params.prefix}, on "
                       f"{interpreter.path}", version=__version__, python=interpreter.path)

    def apply(self, ctx: ApplyContext, params: GpuconfAgentParams, changes: list[Change]) -> None:
        for change in changes:
            if change.ops:
                ctx.execute(change.ops)
        want = next((change.after for change in reversed(changes) if isinstance(change.after, dict)), None)
        if want is None:
            return
        from gpuconf.release.bundle import Target

        python, tag = str(want["python"]), str(want["tag"])
        version = _version(python.rsplit("/", 1)[-1])
        assert version is not None
        bundle = bundle_for(Target(version, tag.split("-", 1)[1]), params)
        remote = f"{params.prefix}/.gpuconf-agent-{__version__}-{tag}.tar.gz"
        script = (Path(__file__).resolve().parents[1] / "release" / "node_install.py").read_text()
        ctx.execute([make_directory(params.prefix, 0o755), write_file(remote, bundle.path.read_bytes(), mode=0o600),
                     run([python, "-I", "-c", script, remote, params.prefix, __version__, tag], timeout=900,
                         description=f"install gpuconf {__version__} from {remote} on {python}")])


def _python_link() -> Fact[dict[str, str]]:
    return file_glob([f"{BIN}/python3"], dict, what="link", key="gpuconf_agent:python3")


def _pythons() -> Fact[set[str]]:
    return file_glob([f"{BIN}/python3.*"], lambda files: {p.rsplit("/", 1)[-1] for p in files}, what="name",
                     key="gpuconf_agent:pythons")


_BUNDLES: dict[tuple[Target, str | None, bool], Bundle] = {}
_LOCK = threading.Lock()


def bundle_for(target: Target, params: GpuconfAgentParams) -> Bundle:
    """The bundle for `target`, built once per run and kept in the controller's cache."""
    from gpuconf.release.bundle import build_bundle, cache_dir

    key = (target, params.wheelhouse, params.download)
    with _LOCK:   # hosts run in threads: one build, the others wait for it
        if key not in _BUNDLES:
            wheelhouse = Path(params.wheelhouse).expanduser() if params.wheelhouse else None
            _BUNDLES[key] = build_bundle(target, cache_dir(), wheelhouse, params.download)
        return _BUNDLES[key]
