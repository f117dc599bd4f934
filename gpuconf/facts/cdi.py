"""The Container Device Interface (CDI) as NVIDIA's toolkit writes and lists it: pure parsers.

`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` writes a spec (YAML: `cdiVersion`,
`kind: nvidia.com/gpu`, `devices` named `0`, a GPU UUID, ..., `all`, and `containerEdits`) whose
mounts name the driver's libraries by their full version (`libcuda.so.575.64.03`). After a
driver change those files are gone, so a spec made for another driver is stale. The spec does
not carry the driver version as a field: it is read from the versioned driver libraries'
host paths and the `enable-cuda-compat --host-driver-version=` hook, and all of them must agree.
`nvidia-ctk cdi list` prints `INFO[0000] Found N CDI devices`, then one qualified name a line.
Real captures: tests/fixtures/real/nvidia-ctk/.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import yaml

from gpuconf.facts.common import reads_whole_lines
from gpuconf.files.values import JSONValue, items_of

DRIVER_VERSION = r"\d{3}\.\d+(?:\.\d+)?"
# the driver's own libraries, named by the driver version (others, such as libnvidia-egl-gbm.so.1.1.2,
# carry their own version and say nothing about the driver)
DRIVER_LIBRARY = re.compile(rf"/lib(?:cuda|nvidia-ml|nvidia-ptxjitcompiler|nvidia-nvvm)\.so\.({DRIVER_VERSION})$")
HOST_DRIVER_FLAG = re.compile(rf"^--host-driver-version=({DRIVER_VERSION})$")
QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*=[A-Za-z0-9][A-Za-z0-9_.:-]*$")
FOUND = re.compile(r"Found (\d+) CDI devices?")


class CdiSpecError(ValueError):
    """The spec cannot be read as a complete CDI spec of one driver: the message says why."""


@dataclass(frozen=True)
class CdiSpec:
    """A CDI spec: its version, kind, device names, and the driver it was made for."""

    cdi_version: str
    kind: str
    devices: tuple[str, ...]
    driver_version: str

    def qualified(self, device: str) -> str:
        return f"{self.kind}={device}"


def parse_cdi_spec(text: str) -> CdiSpec:
    """The spec in `text` (YAML or JSON). Raises CdiSpecError when it is not a whole CDI spec,
    names no driver library, or names libraries of two drivers (never a guess)."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CdiSpecError(f"not YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(document, dict):
        raise CdiSpecError("not a CDI spec: the document is not a mapping")
    missing = [key for key in ("cdiVersion", "kind", "devices") if key not in document]
    if missing:
        raise CdiSpecError(f"incomplete CDI spec: no {', '.join(missing)}")
    kind, devices = document["kind"], document["devices"]
    if not isinstance(kind, str) or "/" not in kind:
        raise CdiSpecError(f"kind {kind!r} is not vendor/class (nvidia.com/gpu)")
    if not isinstance(devices, list) or not all(isinstance(d, dict) and d.get("name") is not None for d in devices):
        raise CdiSpecError("devices is not a list of named devices")
    versions = sorted(set(_driver_versions(document)))
    if not versions:
        raise CdiSpecError("the spec names no versioned driver library (libcuda.so.<version>): incomplete, or "
                           "not made by nvidia-ctk")
    if len(versions) > 1:
        raise CdiSpecError(f"the spec names libraries of several drivers ({', '.join(versions)})")
    return CdiSpec(str(document["cdiVersion"]), kind, tuple(str(d["name"]) for d in devices), versions[0])


def _driver_versions(document: Mapping[str, JSONValue]) -> Iterator[str]:
    edits = [document.get("containerEdits") or {}]
    edits += [device.get("containerEdits") or {} for device in items_of(document["devices"])
              if isinstance(device, dict)]
    for edit in edits:
        if not isinstance(edit, dict):
            raise CdiSpecError("containerEdits is not a mapping")
        for mount in items_of(edit.get("mounts")):
            match = DRIVER_LIBRARY.search(str(mount.get("hostPath", ""))) if isinstance(mount, dict) else None
            if match:
                yield match[1]
        for hook in items_of(edit.get("hooks")):
            for arg in items_of(hook.get("args")) if isinstance(hook, dict) else ():
                match = HOST_DRIVER_FLAG.match(str(arg))
                if match:
                    yield match[1]


class CdiListError(ValueError):
    """`nvidia-ctk cdi list` printed something that is not a device list."""


def parse_cdi_list(output: str) -> tuple[str, ...]:
    """The qualified device names `nvidia-ctk cdi list` printed. Its log lines (`INFO[...]`,
    `WARN[...]`) are skipped; when it says how many it found, that many names must follow."""
    names, announced = [], None
    for line in output.splitlines():
        line = line.strip()
        if not line:
            continue
        if re.match(r"^(INFO|WARN|WARNING|DEBU|ERRO)\[", line) or line.startswith("time="):
            found = FOUND.search(line)
            announced = int(found[1]) if found else announced
            continue
        if not QUALIFIED_NAME.match(line):
            raise CdiListError(f"not a CDI device name: {line[:120]!r}")
        names.append(line)
    if announced is not None and announced != len(names):
        raise CdiListError(f"nvidia-ctk said it found {announced} CDI devices but listed {len(names)}: "
                           "the output was cut short")
    return tuple(names)


@dataclass(frozen=True)
class CtkMessage:
    """One message of nvidia-ctk's log: ``level`` info, warning, error or fatal (either of its two formats)."""

    level: str
    text: str


@dataclass(frozen=True)
class CdiGenerateLog:
    """What ``nvidia-ctk cdi generate`` (or the nvidia-cdi-refresh unit's journal) said: its messages in
    order, the mode it chose, and whether a spec was written. ``errors`` are why it failed."""

    messages: tuple[CtkMessage, ...]
    mode: str | None = None
    generated: bool = False
    incomplete: str = ""

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(m.text for m in self.messages if m.level in ("error", "fatal"))

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(m.text for m in self.messages if m.level == "warning")


# logrus's text format (a terminal: `ERRO[0000] failed to ...`) and its logfmt one (the journal:
# `level=error msg="failed to ..."`)
_LOGRUS = re.compile(r"\b(INFO|WARN|ERRO|FATA|DEBU)\[\d+\]\s+(.*?)\s*$")
_LOGFMT = re.compile(r'\blevel=(\w+) msg="((?:[^"\\]|\\.)*)"')
_LEVELS = {"INFO": "info", "WARN": "warning", "ERRO": "error", "FATA": "fatal", "DEBU": "debug"}
_MODE = re.compile(r"Auto-detected mode as ['\"]?(\w+)['\"]?")
_GENERATED = re.compile(r"Generated CDI spec with version", re.I)


@reads_whole_lines
def parse_cdi_generate_log(text: str) -> CdiGenerateLog:
    """nvidia-ctk's messages in either format (real captures: tests/fixtures/real/nvidia-ctk/). Never raises."""
    messages: list[CtkMessage] = []
    for line in text.splitlines():
        if match := _LOGFMT.search(line):
            messages.append(CtkMessage(match.group(1).lower(), match.group(2).replace("\\n", "\n")))
        elif match := _LOGRUS.search(line):
            messages.append(CtkMessage(_LEVELS[match.group(1)], match.group(2)))
    mode = next((m.group(1) for msg in messages if (m := _MODE.search(msg.text))), None)
    return CdiGenerateLog(tuple(messages), mode, any(_GENERATED.search(m.text) for m in messages))
