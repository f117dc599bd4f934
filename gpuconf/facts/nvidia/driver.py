"""The driver and toolkit as installed and as loaded: ``/proc/driver/nvidia/version``,
``modinfo [-F version] nvidia``, ``nvcc --version``.

Why three sources: the loaded module (``/proc``) and the installed one (``modinfo``)
differ after an upgrade until reboot, which is exactly when a node needs a reboot; the
``nvidia_driver`` and ``gsp`` roles need to know open vs proprietary kernel modules
(GSP cannot be disabled on the open ones); the ``cuda`` role verifies with ``nvcc``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import Unparseable, is_driver_version, reads_whole_lines, unparseable

OPEN = "open"
PROPRIETARY = "proprietary"


@dataclass(frozen=True)
class LoadedDriver:
    """``/proc/driver/nvidia/version``: the kernel module that is running now.

    ``flavour`` is ``open`` or ``proprietary``; ``build_date`` and ``builder`` are as
    printed (None when absent, e.g. self-built open modules print no date).
    """

    version: str
    flavour: str
    arch: str | None
    build_date: str | None
    builder: str | None
    gcc_version: str | None


# the same words open /proc/driver/nvidia/version and the kernel log's load banner
# ("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  535.98  Release Build ...")
_NVRM_OPEN = re.compile(
    r"NVRM(?: version:|: loading) NVIDIA UNIX Open Kernel Module for (?P<arch>\S+)\s+(?P<version>\d[\w.]*)"
    r"\s+Release Build\s*(?:\((?P<builder>[^)]*)\))?\s*(?P<date>.*?)\s*$"
)
_NVRM_PROPRIETARY = re.compile(
    r"NVRM(?: version:|: loading) NVIDIA UNIX (?:(?P<arch>\S+) )?Kernel Module(?: for (?P<arch2>\S+))?"
    r"\s+(?P<version>\d[\w.]*)\s*(?:Release Build\s*)?(?:\((?P<builder>[^)]*)\))?\s*(?P<date>.*?)\s*$"
)


@reads_whole_lines
def parse_proc_driver_version(text: str) -> LoadedDriver | Unparseable:
    """Parse ``cat /proc/driver/nvidia/version``, or the kernel log's load banner
    (``NVRM: loading NVIDIA UNIX ...``), which names the same module.

    Open:        ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release
    Build  (dvs-builder@U16-A24-9-2)  Thu Oct 10 12:15:00 UTC 2024``.
    Proprietary: ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  Thu Oct 26 ...``.
    """
    gcc = re.search(r"^GCC version:\s*(.*?)\s*$", text, re.M)
    for flavour, pattern in ((OPEN, _NVRM_OPEN), (PROPRIETARY, _NVRM_PROPRIETARY)):
        for line in text.splitlines():
            match = pattern.search(line)
            if match and not is_driver_version(match.group("version")):
                return unparseable(f"{match.group('version')!r} is not an NVIDIA driver version (a Jetson L4T "
                                   "release?)", text)
            if match:
                groups = match.groupdict()
                return LoadedDriver(
                    version=groups["version"],
                    flavour=flavour,
                    arch=groups.get("arch") or groups.get("arch2"),
                    build_date=groups["date"] or None,
                    builder=groups["builder"] or None,
                    gcc_version=gcc.group(1) if gcc else None,
                )
    return unparseable("expected an 'NVRM version: NVIDIA UNIX ... Kernel Module' line", text)


@dataclass(frozen=True)
class ModuleInfo:
    """``modinfo MODULE`` (or ``modinfo -F version MODULE``).

    ``found`` is False for ``modinfo: ERROR: Module nvidia not found.`` (then every
    other field is None). ``flavour`` comes from the license: the open modules are
    ``Dual MIT/GPL``, the proprietary ones ``NVIDIA``. A cut-short output cannot be detected
    (modinfo has no closing line): trailing ``parameters`` may be missing.
    """

    found: bool
    name: str | None = None
    version: str | None = None
    license: str | None = None
    flavour: str | None = None
    filename: str | None = None
    vermagic: str | None = None
    depends: tuple[str, ...] = ()
    firmware: tuple[str, ...] = ()
    parameters: tuple[str, ...] = ()


_NOT_FOUND = re.compile(r"modinfo: ERROR: Module (\S+) not found", re.I)


def _flavour(license_text: str | None) -> str | None:
    if license_text is None:
        return None
    if "MIT" in license_text:
        return OPEN
    return PROPRIETARY if license_text.strip() == "NVIDIA" else None


@reads_whole_lines
def parse_modinfo(text: str) -> ModuleInfo | Unparseable:
    """Parse ``modinfo nvidia`` (``key:   value`` lines, ``firmware``/``parm`` repeated)."""
    missing = _NOT_FOUND.search(text)
    if missing:
        return ModuleInfo(found=False, name=missing.group(1))
    fields: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = re.match(r"^([a-z_]+):\s*(.*?)\s*$", line)
        if match:
            fields.setdefault(match.group(1), []).append(match.group(2))
    if "version" not in fields and "filename" not in fields:
        return unparseable("expected 'key: value' lines with version/filename", text)

    def first(key: str) -> str | None:
        return fields.get(key, [None])[0]

    license_text = first("license")
    return ModuleInfo(
        found=True,
        name=first("name"),
        version=first("version"),
        license=license_text,
        flavour=_flavour(license_text),
        filename=first("filename"),
        vermagic=first("vermagic"),
        depends=tuple(d for d in (first("depends") or "").split(",") if d),
        firmware=tuple(fields.get("firmware", [])),
        parameters=tuple(p.split(":", 1)[0] for p in fields.get("parm", [])),
    )


@reads_whole_lines
def parse_modinfo_version(text: str) -> ModuleInfo | Unparseable:
    """Parse ``modinfo -F version MODULE``: one version line, or the not-found error."""
    missing = _NOT_FOUND.search(text)
    if missing:
        return ModuleInfo(found=False, name=missing.group(1))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and re.fullmatch(r"\d[\w.~+-]*", lines[0]):
        return ModuleInfo(found=True, version=lines[0])
    return unparseable("expected a single version line", text)


@dataclass(frozen=True)
class NvccVersion:
    """``nvcc --version``: ``release`` is ``X.Y`` (what CUDA pins compare), ``version``
    the full ``X.Y.Z``; ``build`` is absent before CUDA 11."""

    release: str
    version: str | None
    build: str | None
    built_on: str | None


@reads_whole_lines
def parse_nvcc_version(text: str) -> NvccVersion | Unparseable:
    """Parse ``nvcc --version`` (``Cuda compilation tools, release 11.0, V11.0.221``)."""
    release = re.search(r"release (\d+\.\d+)(?:, V(\S+))?", text)
    if release is None:
        return unparseable("expected 'Cuda compilation tools, release X.Y'", text)
    build = re.search(r"^Build (\S+)", text, re.M)
    built_on = re.search(r"^Built on (\S+)", text, re.M)
    return NvccVersion(
        release=release.group(1),
        version=release.group(2),
        build=build.group(1) if build else None,
        built_on=built_on.group(1) if built_on else None,
    )


@dataclass(frozen=True)
class ApiMismatch:
    """``NVRM: API mismatch: the client has the version X, but this kernel module has the
    version Y``: user space (nvidia-persistenced, nvidia-smi) and the loaded module differ.
    ``client`` is None when the line was cut before it (the kernel wraps it over lines)."""

    client: str | None
    module: str | None


_CLIENT = re.compile(r"the client has the version (\d[\w.]*\d)")
_MODULE = re.compile(r"this kernel module has the version (\d[\w.]*\d)")


def find_api_mismatch(text: str) -> ApiMismatch | None:
    """The NVRM API mismatch in a log or journal (persistenced's start failing), if any."""
    client, module = _CLIENT.search(text), _MODULE.search(text)
    if not client and not module:
        return None
    return ApiMismatch(client.group(1) if client else None, module.group(1) if module else None)


@reads_whole_lines
def parse_proc_driver_params(text: str) -> dict[str, str]:
    """``/proc/driver/nvidia/params``: ``Name: value`` a line (``EnableGpuFirmware: 0``)."""
    params = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() and " " not in name.strip():
            params[name.strip()] = value.strip()
    return params
