"""``apt-cache policy PKG...``; part of :mod:`gpuconf.facts.packages` (import from there).

The output is localised::

    nvidia-driver:
      Installiert:           555.42.06-1          (Installed:)
      Installationskandidat: 555.42.06-1          (Candidate:)
      Versionstabelle:                            (Version table:)
         560.28.03-1 500
            500 https://developer.download.nvidia.com/... Packages
     *** 555.42.06-1 1001
            100 /var/lib/dpkg/status

Labels are matched in English and German and otherwise by position (installed, then
candidate, then an optional package pin, then the table), so other locales parse too.
``(none)``/``(keine)`` become None. ``***`` marks the installed version. A version
line whose source lines were cut off simply has no sources. A block that lacks its
Installed or Candidate line (output cut short, or a filtered paste) names them in
``missing``: None there means *not known*, never "(none)".
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuconf.facts.common import reads_whole_lines


@dataclass(frozen=True)
class AptSource:
    """Where a version comes from, with that source's priority (``100 /var/lib/dpkg/status``)."""

    priority: int
    origin: str


@dataclass(frozen=True)
class AptVersion:
    """A version table row: ``priority`` is the pin priority (1001 for a held pin)."""

    version: str
    priority: int
    installed: bool
    sources: tuple[AptSource, ...] = ()


@dataclass(frozen=True)
class AptPolicy:
    """One package's policy. ``installed``/``candidate`` are None when apt says (none)."""

    package: str
    installed: str | None
    candidate: str | None
    package_pin: str | None
    versions: tuple[AptVersion, ...]
    missing: tuple[str, ...] = ()  # "installed", "candidate": lines the output lacks, so not known

    @property
    def complete(self) -> bool:
        return not self.missing


_INSTALLED = {"installed", "installiert"}
_CANDIDATE = {"candidate", "installationskandidat"}
_PIN = {"package pin", "paket-pinning"}
_VERSION_ROW = re.compile(r"^ (\*\*\*| {3}) (\S+) (-?\d+)\s*$")
_SOURCE_ROW = re.compile(r"^ {6,}(-?\d+) (.+?)\s*$")


def _none(value: str) -> str | None:
    value = value.strip()
    return None if not value or re.fullmatch(r"\(.*\)", value) else value


def _whole_policy_line(line: str) -> bool:
    """A whole last line of apt-cache policy: a package's header or field, or a version's source
    (a version row is followed by its sources; a source ends with its index, ``... Packages``, or is
    dpkg's status file); apt's own N:/W:/E: words."""
    if match := _SOURCE_ROW.match(line):
        origin = match.group(2).rstrip()
        return origin.endswith(" Packages") or origin == "/var/lib/dpkg/status"
    if _VERSION_ROW.match(line):
        return False
    return (not line.startswith(" ") and line.rstrip().endswith(":")) or bool(re.match(r"^  \S[^:]*:", line)) \
        or bool(re.match(r"^[NWE]: ", line))


@dataclass
class _Block:
    """One package's block while it is read: its label lines, then its version rows with their sources."""

    package: str
    fields: list[tuple[str, str]] = field(default_factory=list)
    versions: list[tuple[str, int, bool, list[AptSource]]] = field(default_factory=list)
    cut: bool = False


@reads_whole_lines(row=_whole_policy_line)
def parse_apt_cache_policy(text: str) -> tuple[AptPolicy, ...]:
    """Parse ``apt-cache policy PKG...`` (one block per package). Never raises."""
    blocks: list[_Block] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" ") and line.rstrip().endswith(":"):
            blocks.append(_Block(line.strip()[:-1]))
            continue
        if not blocks:
            continue
        block = blocks[-1]
        if match := _VERSION_ROW.match(line):
            block.versions.append((match.group(2), int(match.group(3)), match.group(1) == "***", []))
        elif (match := _SOURCE_ROW.match(line)) and block.versions:
            block.versions[-1][3].append(AptSource(int(match.group(1)), match.group(2)))
        elif re.match(r"^  \S", line) and ":" in line and not block.versions:
            label, _, value = line.strip().partition(":")
            block.fields.append((label.strip().lower(), value.strip()))
    cut = bool(blocks) and not text.endswith("\n") and bool(blocks[-1].versions)
    if cut and blocks[-1].versions[-1][3]:
        last = blocks[-1].versions[-1][3][-1]
        if not (last.origin.endswith(" Packages") or last.origin == "/var/lib/dpkg/status"):
            blocks[-1].versions[-1][3].pop()  # a source cut mid-line is not a source
            blocks[-1].cut = True
    return tuple(_policy(block) for block in blocks)


def _policy(block: _Block) -> AptPolicy:
    fields = [(label, value) for label, value in block.fields if value]  # drop the table label
    by_label = dict(fields)
    positional = [value for _, value in fields]

    def pick(labels: set[str], position: int) -> str | None:
        for label in labels:
            if label in by_label:
                return _none(by_label[label])
        known = _INSTALLED | _CANDIDATE | _PIN
        if any(label in known for label, _ in fields):
            return None  # a recognised locale that lacks this line
        return _none(positional[position]) if position < len(positional) else None

    labels = {label for label, _ in fields}
    if labels & (_INSTALLED | _CANDIDATE | _PIN):
        missing = tuple(name for name, known in (("installed", _INSTALLED), ("candidate", _CANDIDATE))
                        if not labels & known)
    else:  # another locale: by position
        missing = ("installed", "candidate")[len(positional):]
    if block.cut:
        missing += ("sources",)
    return AptPolicy(
        package=block.package,
        installed=pick(_INSTALLED, 0),
        candidate=pick(_CANDIDATE, 1),
        package_pin=pick(_PIN, 2),
        versions=tuple(AptVersion(v, p, i, tuple(s)) for v, p, i, s in block.versions),
        missing=missing,
    )
