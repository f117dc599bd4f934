"""The node agent's bundle: this controller's own gpuconf and its dependencies, built for a node's
Python, as one .tar.gz the node unpacks with nothing but its Python (no package index, no pip).

gpuconf depends on compiled libraries (pydantic-core, PyYAML's and MarkupSafe's speedups,
cryptography), so what a node needs depends on its Python: a bundle is built for a `Target`,
CPython major.minor on a machine architecture. Each distribution of gpuconf's dependency closure
(its markers evaluated for the target) comes from, in order:

1. this controller's own installed copy, when its wheel tags suit the target (always for a pure
   wheel; for a compiled one, when the node's Python is the controller's major.minor);
2. a wheel of the same name and version in the wheelhouse (`wheelhouse=`, a directory of .whl);
3. with `download=True`, `pip download` of that exact wheel for the target, from the index this
   controller uses;

else the build fails naming every missing wheel and the command that gets it. gpuconf itself is
the installed wheel's files, or, run from a checkout (an editable install), the checkout's package
and GPU library, so the agent is always the controller's own code.

The bundle's files have one fixed mtime, and when the target is this interpreter's version they
are byte-compiled here once (the .pyc stay valid after the node unpacks them); otherwise the node
compiles them when it installs.
"""
from __future__ import annotations

import compileall
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags, parse_tag
from packaging.utils import canonicalize_name, parse_wheel_filename

import gpuconf
from gpuconf import __version__
from gpuconf.errors import GpuconfError
from gpuconf.release.library import library_dir

FIXED_MTIME = 315532800  # 1980-01-01, the zip epoch: the same sources give the same files
# manylinux glibc levels a node may have; the node's import check (node_install.py) is the real test
GLIBC_MINORS = range(40, 4, -1)


class BundleError(GpuconfError):
    """The agent's bundle cannot be built for a node (a wheel is missing): the task fails."""

    exit_bit = 4


@dataclass(frozen=True)
class Target:
    """A node's Python: CPython major.minor on a machine architecture (uname -m)."""

    python: tuple[int, int]
    machine: str

    @property
    def tag(self) -> str:
        return f"cp{self.python[0]}{self.python[1]}-{self.machine}"

    def __str__(self) -> str:
        return f"CPython {self.python[0]}.{self.python[1]} on {self.machine}"

    def platforms(self) -> list[str]:
        legacy = [f"manylinux2014_{self.machine}"] + (
            [f"manylinux2010_{self.machine}", f"manylinux1_{self.machine}"] if self.machine in ("x86_64", "i686")
            else [])
        return [f"manylinux_2_{m}_{self.machine}" for m in GLIBC_MINORS] + legacy + [f"linux_{self.machine}"]

    def supported(self) -> frozenset[Tag]:
        platforms = self.platforms()
        return frozenset([*cpython_tags(self.python, platforms=platforms),
                          *compatible_tags(self.python, f"cp{self.python[0]}{self.python[1]}", platforms)])

    def environment(self) -> dict[str, str]:
        """PEP 508 marker values on the node."""
        version = f"{self.python[0]}.{self.python[1]}"
        return {"python_version": version, "python_full_version": f"{version}.0", "implementation_name": "cpython",
                "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
                "os_name": "posix", "platform_machine": self.machine, "implementation_version": f"{version}.0",
                "extra": ""}


@dataclass(frozen=True)
class Bundle:
    path: Path
    version: str                 # gpuconf's
    target: Target
    sha256: str
    size: int
    compiled: bool               # byte-compiled on the controller for the target's Python
    distributions: tuple[str, ...] = field(default=())   # name==version, gpuconf first


def this_target() -> Target:
    return Target((sys.version_info[0], sys.version_info[1]), os.uname().machine)


def closure(target: Target) -> list[metadata.Distribution]:
    """gpuconf and every distribution it needs on `target`, installed here (gpuconf first)."""
    found: dict[str, metadata.Distribution] = {}
    todo = ["gpuconf"]
    while todo:
        name = canonicalize_name(todo.pop(0))
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise BundleError(f"gpuconf's dependency {name} is not installed on this controller") from None
        found[name] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not Marker(str(requirement.marker)).evaluate(target.environment()):
                continue
            todo.append(requirement.name)
    return list(found.values())


def wheel_tags(dist: metadata.Distribution) -> frozenset[Tag]:
    text = dist.read_text("WHEEL") or ""
    return frozenset(tag for line in text.splitlines() if line.startswith("Tag:")
                     for tag in parse_tag(line.split(":", 1)[1].strip()))


def installed_copy(dist: metadata.Distribution) -> bool:
    """True when the gpuconf running now is that distribution's installed files (a wheel), False
    when it runs from a checkout (pip install -e, or a source tree on sys.path): then the bundle
    takes the checkout's files, so the agent is always the code the controller runs."""
    record = dist.read_text("RECORD") or ""   # an installed wheel's list of files (an egg-info has none)
    running = Path(gpuconf.__file__).resolve()
    return any(line.split(",", 1)[0] == "gpuconf/__init__.py" for line in record.splitlines()) and \
        Path(str(dist.locate_file("gpuconf/__init__.py"))).resolve() == running


def _copy_installed(dist: metadata.Distribution, site: Path) -> None:
    for entry in dist.files or []:
        parts = Path(str(entry)).parts
        if not parts or parts[0] == ".." or "__pycache__" in parts or str(entry).endswith((".pyc", ".pth")):
            continue
        source = Path(str(dist.locate_file(entry)))
        if source.is_file():
            target = site.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


def _copy_checkout(dist: metadata.Distribution, site: Path) -> None:
    """gpuconf from a checkout: the package, its GPU library (as the wheel lays it out), a dist-info."""
    package = Path(gpuconf.__file__).resolve().parent
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.retry")
    shutil.copytree(package, site / "gpuconf", ignore=ignore)
    for name in ("roles", "playbooks"):
        shutil.copytree(library_dir() / name, site / "gpuconf" / "library" / name, ignore=ignore)
    info = site / f"gpuconf-{__version__}.dist-info"
    info.mkdir()
    requires = "".join(f"Requires-Dist: {line}\n" for line in dist.requires or [])
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: gpuconf\nVersion: {__version__}\n{requires}")
    (info / "INSTALLER").write_text("gpuconf-agent (from a checkout)\n")


def _unpack_wheel(wheel: Path, site: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            parts = Path(member.filename).parts
            if member.is_dir() or ".." in parts or Path(member.filename).is_absolute():
                continue
            if parts[0].endswith(".data"):   # purelib/platlib go to the top; scripts, headers, data are not needed
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            target = site.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)


def find_wheel(name: str, version: str, target: Target, folders: Iterable[Path]) -> Path | None:
    supported = target.supported()
    for folder in folders:
        for wheel in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
            try:
                wheel_name, wheel_version, _, tags = parse_wheel_filename(wheel.name)
            except ValueError:
                continue
            if wheel_name == canonicalize_name(name) and str(wheel_version) == version and tags & supported:
                return wheel
    return None


def download_command(name: str, version: str, target: Target, dest: Path) -> list[str]:
    """`pip download` of exactly that wheel for the target (--only-binary: never a build)."""
    platforms = [arg for platform in [f"manylinux2014_{target.machine}", f"manylinux_2_28_{target.machine}",
                                      f"manylinux_2_34_{target.machine}"] for arg in ("--platform", platform)]
    return [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
            "--only-binary=:all:", "--implementation", "cp",
            "--python-version", f"{target.python[0]}.{target.python[1]}", *platforms,
            "--dest", str(dest), f"{name}=={version}"]


def _normalize(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = FIXED_MTIME
    if info.isfile():
        info.mode = 0o755 if info.name.endswith(".so") or ".so." in info.name else 0o644
    elif info.isdir():
        info.mode = 0o755
    return info


def cache_dir() -> Path:
    """Where this controller keeps the bundles it built: GPUCONF_AGENT_CACHE, else
    $XDG_CACHE_HOME/gpuconf/agent, else ~/.cache/gpuconf/agent."""
    given = os.environ.get("GPUCONF_AGENT_CACHE")
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    base = Path(given) if given else cache_home / "gpuconf" / "agent"
    base.mkdir(parents=True, exist_ok=True)
    return base


def _fingerprint(dist: metadata.Distribution, checkout: bool) -> str:
    """What identifies a distribution's files: its RECORD (every file's hash), or for a checkout
    every file's path, size and mtime."""
    if not checkout:
        return f"{dist.metadata['Name']}=={dist.version}\n{dist.read_text('RECORD') or ''}"
    roots = [Path(gpuconf.__file__).resolve().parent, library_dir() / "roles", library_dir() / "playbooks"]
    lines = [f"{p.relative_to(root.parent)} {p.stat().st_size} {p.stat().st_mtime_ns}"
             for root in roots for p in sorted(root.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".retry")]
    return "checkout\n" + "\n".join(lines)


def build_bundle(target: Target, directory: Path, wheelhouse: Path | None = None, download: bool = False) -> Bundle:
    """The bundle for `target`, in `directory`: the one built before from the same files when it is
    there (the newest four are kept), else built now."""
    dists = closure(target)
    supported = target.supported()
    names, sources = [], []
    for dist in dists:
        name, version = dist.metadata["Name"], dist.version
        names.append(f"{name}=={version}")
        checkout = canonicalize_name(name) == "gpuconf" and not installed_copy(dist)
        if checkout or wheel_tags(dist) & supported:
            sources.append(_fingerprint(dist, checkout))
        else:
            sources.append(f"wheel {name}=={version}")
    digest = hashlib.sha256("\n".join([__version__, target.tag, *sources]).encode()).hexdigest()[:16]
    path = directory / f"gpuconf-agent-{__version__}-{target.tag}-{digest}.tar.gz"
    compiled = target.python == sys.version_info[:2] and sys.implementation.name == "cpython"
    if not path.is_file():
        _build(dists, target, directory, path, wheelhouse, download, compiled, names)
        for old in sorted(directory.glob("gpuconf-agent-*.tar.gz"), key=lambda p: p.stat().st_mtime)[:-4]:
            old.unlink(missing_ok=True)
    data = path.read_bytes()
    return Bundle(path, __version__, target, hashlib.sha256(data).hexdigest(), len(data), compiled, tuple(names))


def _sources(dists: list[metadata.Distribution], target: Target, directory: Path, wheelhouse: Path | None,
             download: bool) -> list[tuple[metadata.Distribution, str, Path | None]]:
    """Where each distribution's files come from ("checkout", "installed" or "wheel" with its path),
    or a BundleError naming every wheel missing, before anything is copied."""
    supported = target.supported()
    downloads = directory / f"downloads-{target.tag}"
    found: list[tuple[metadata.Distribution, str, Path | None]] = []
    missing: list[tuple[str, str]] = []
    for dist in dists:
        name, version = dist.metadata["Name"], dist.version
        if canonicalize_name(name) == "gpuconf" and not installed_copy(dist):
            found.append((dist, "checkout", None))
        elif wheel_tags(dist) & supported:
            found.append((dist, "installed", None))
        else:
            wheel = find_wheel(name, version, target, [p for p in (wheelhouse, downloads) if p is not None])
            if wheel is None and download:
                downloads.mkdir(exist_ok=True)
                subprocess.run(download_command(name, version, target, downloads), capture_output=True, timeout=600)
                wheel = find_wheel(name, version, target, [downloads])
            if wheel is None:
                missing.append((name, version))
            found.append((dist, "wheel", wheel))
    if missing:
        wanted = " ".join(f"{n}=={v}" for n, v in missing)
        example = shlex.join(download_command("NAME", "VERSION", target, Path(str(wheelhouse or "WHEELHOUSE"))))
        raise BundleError(
            f"the node runs {target}, and this controller (CPython {sys.version_info[0]}.{sys.version_info[1]}) "
            f"has no wheel of {wanted} for it: put them in the wheelhouse "
            f"({wheelhouse or 'gpuconf_agent_wheelhouse'}), e.g. {example} for each, or set gpuconf_agent_download "
            "(pip download from this controller's index)")
    return found


def _build(dists: list[metadata.Distribution], target: Target, directory: Path, path: Path,
           wheelhouse: Path | None, download: bool, compiled: bool, names: list[str]) -> None:
    sources = _sources(dists, target, directory, wheelhouse, download)
    staging = Path(tempfile.mkdtemp(prefix=f".staging-{target.tag}-", dir=directory))
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        site = staging / "site"
        site.mkdir(parents=True)
        for dist, kind, wheel in sources:
            if kind == "checkout":
                _copy_checkout(dist, site)
            elif kind == "installed":
                _copy_installed(dist, site)
            elif wheel is not None:
                _unpack_wheel(wheel, site)
        for entry in site.rglob("*"):
            os.utime(entry, (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
        if compiled:
            compileall.compile_dir(str(site), quiet=2, workers=0)
        (staging / "bundle.json").write_text(json.dumps(
            {"version": __version__, "python": f"{target.python[0]}.{target.python[1]}", "machine": target.machine,
             "compiled": compiled, "distributions": names}, indent=1) + "\n")
        with tarfile.open(partial, "w:gz", compresslevel=6) as archive:
            for entry in [staging / "bundle.json", *sorted(site.rglob("*"))]:
                archive.add(entry, arcname=entry.relative_to(staging).as_posix(), recursive=False, filter=_normalize)
        os.replace(partial, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        partial.unlink(missing_ok=True)
