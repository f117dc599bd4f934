"""RHEL-family packages: ``dnf module list NAME`` and ``rpm -qa``.

``dnf module list nvidia-driver`` prints, per repository, a table::

    Name           Stream          Profiles                   Summary
    nvidia-driver  latest          default [d], fm, ks, src   Nvidia driver for latest branch
    nvidia-driver  open-dkms [d]   default [d], fm, ks        Nvidia driver for open-dkms branch

then a ``Hint: [d]efault, [e]nabled, [x]disabled, [i]nstalled`` line. A stream carries
``[d]``, ``[e]`` or ``[x]`` after its name, a profile ``[d]`` (default) or ``[i]``
(installed). A row with no summary, or no profiles, was cut short: the listing is then
``complete=False``, and the row is kept out rather than read half. dnf closes every listing
with the Hint line: tables without it after them were cut short too, even at a line end
(``incomplete`` says so; the rows read are kept).

``rpm -qa`` prints ``NAME-VERSION-RELEASE.ARCH`` a line (``kmod-nvidia-4.18.0-553.el8_10-
570.86.16-1.el8.x86_64``: the name itself has dashes, the last two split off version and
release). Lines that are not package names (a prompt, another command's output) are left out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import reads_whole_lines

_FLAGS = re.compile(r"\s*\[([deixa])\]")
_ARCHES = ("x86_64", "aarch64", "i686", "noarch", "ppc64le", "s390x", "src")


@dataclass(frozen=True)
class ModuleStream:
    """One row of ``dnf module list``: ``default``/``enabled``/``disabled`` are the stream's
    flags; ``profiles`` maps each profile to its flags (``d`` default, ``i`` installed)."""

    name: str
    stream: str
    default: bool
    enabled: bool
    disabled: bool
    profiles: tuple[tuple[str, str], ...]
    summary: str

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.profiles)


@dataclass(frozen=True)
class ModuleList:
    streams: tuple[ModuleStream, ...]
    complete: bool
    incomplete: str = ""  # why the listing is not whole ("" when it is): gpuconf.facts.common

    def stream(self, name: str, stream: str) -> ModuleStream | None:
        return next((s for s in self.streams if (s.name, s.stream) == (name, stream)), None)


def _columns(header: str) -> list[int] | None:
    starts = [header.find(word) for word in ("Name", "Stream", "Profiles", "Summary")]
    return starts if all(s >= 0 for s in starts) and starts == sorted(starts) else None


@reads_whole_lines
def parse_dnf_module_list(text: str) -> ModuleList:
    """Rows of every table in the output; rows cut short make the listing incomplete."""
    streams, complete, columns = [], True, None
    hinted = True  # the Hint line came after the last table (nothing to close before a table)
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("Name") and (found := _columns(line)):
            columns, hinted = found, False
            continue
        if columns is None or not line.strip() or line.startswith(("Hint:", "$", "#")):
            if line.startswith("Hint:"):
                columns, hinted = None, True
            continue
        cells = [line[start:end].strip() for start, end in zip(columns, [*columns[1:], None], strict=True)]
        name, stream_text, profiles_text, summary = cells
        cut = number == len(lines) - 1 and not text.endswith("\n")
        if not (name and stream_text and profiles_text and summary) or cut:
            complete = False
            continue
        flags = set(_FLAGS.findall(stream_text))
        profiles = []
        for item in profiles_text.split(","):
            item = item.strip()
            profiles.append((_FLAGS.sub("", item).strip(), "".join(sorted(_FLAGS.findall(item)))))
        streams.append(ModuleStream(name, _FLAGS.sub("", stream_text).strip(), "d" in flags, "e" in flags,
                                    "x" in flags, tuple(profiles), summary))
    if not hinted:
        return ModuleList(tuple(streams), False, "dnf module list ends before its closing Hint line: cut short")
    return ModuleList(tuple(streams), complete)


@dataclass(frozen=True)
class RpmPackage:
    name: str
    version: str
    release: str
    arch: str

    @property
    def evr(self) -> str:
        return f"{self.version}-{self.release}"


@reads_whole_lines
def parse_rpm_qa(text: str) -> tuple[RpmPackage, ...]:
    """Installed packages from ``rpm -qa`` (the default NAME-VERSION-RELEASE.ARCH format)."""
    packages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or " " in line:
            continue
        stem, dot, arch = line.rpartition(".")
        if not dot or arch not in _ARCHES:
            continue
        head, _, release = stem.rpartition("-")
        name, _, version = head.rpartition("-")
        if name and version and release and version[0].isdigit():
            packages.append(RpmPackage(name, version, release, arch))
    return tuple(packages)
