"""Debian packages: ``dpkg-query -W -f=...``, ``dpkg -l``, ``apt-mark``, ``apt-cache policy``.

Format notes:

* ``dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`` (optionally a
  4th ``${Architecture}`` field). ``db:Status-Abbrev`` is 3 characters: desired
  (u/i/r/p/h), status (n/i/c/u/f/h/W/t), error flag (space or R).
* ``dpkg -l`` is the same data as a table whose columns are sized by the ``+++-===``
  ruler; with a narrow terminal dpkg *cuts* versions to the column width
  (``440.59-0ubuntu0.18`` for ``440.59-0ubuntu0.18.04.1``): ``version_may_be_cut``.
  ``dpkg-query: no packages found matching X`` lines (stderr) land in ``not_found``.
* ``apt-cache policy`` is in :mod:`gpuconf.facts.apt_policy` (re-exported here).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import NamedTuple

from gpuconf.facts.apt_policy import AptPolicy, AptSource, AptVersion, parse_apt_cache_policy
from gpuconf.facts.common import reads_whole_lines

_DESIRED = {"u": "unknown", "i": "install", "h": "hold", "r": "remove", "p": "purge"}
_STATUS = {
    "n": "not-installed", "i": "installed", "c": "config-files", "u": "unpacked",
    "f": "half-configured", "h": "half-installed", "w": "triggers-awaited",
    "t": "triggers-pending",
}


class DpkgPackage(NamedTuple):
    """One package. ``installed`` means status ``installed`` (``ii``/``hi``); ``held``
    means desired state ``hold``; ``arch`` comes from ``name:arch`` or a column. A named
    tuple: a host lists about 800 packages, read on every run (gpuconf.facts.installed)."""

    name: str
    version: str | None
    status_abbrev: str
    desired: str | None
    status: str | None
    error: bool
    arch: str | None = None
    version_may_be_cut: bool = False

    @property
    def installed(self) -> bool:
        """True for status ``installed`` (not ``rc``, not ``un``)."""
        return self.status == "installed"

    @property
    def held(self) -> bool:
        """True when the desired state is ``hold`` (``apt-mark hold``)."""
        return self.desired == "hold"


@dataclass(frozen=True)
class DpkgList:
    """Packages from ``dpkg-query -W`` or ``dpkg -l``; ``not_found`` holds the patterns
    dpkg-query reported as matching nothing; ``problems`` other unparsed lines."""

    packages: tuple[DpkgPackage, ...]
    not_found: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common

    def get(self, name: str, arch: str | None = None) -> DpkgPackage | None:
        """The package called ``name`` (first match; pass ``arch`` for multi-arch)."""
        return next((p for p in self.packages if p.name == name and (arch is None or p.arch == arch)), None)


@functools.lru_cache(maxsize=256)
def _flags(abbrev: str) -> tuple[str | None, str | None, bool]:
    """`db:Status-Abbrev` (`ii `, `hi `, `rc `, `iUR`): the desired state, the status and the
    error flag. A listing holds a handful of distinct values: each is read once."""
    flags = abbrev.ljust(3)
    return _DESIRED.get(flags[0].lower()), _STATUS.get(flags[1].lower()), flags[2] not in (" ", "")


def _package(name: str, version: str | None, abbrev: str, arch: str | None = None,
             cut: bool = False) -> DpkgPackage:
    name, _, name_arch = name.partition(":")
    desired, status, error = _flags(abbrev)
    return DpkgPackage(name, None if version in (None, "", "<none>") else version, abbrev.strip(), desired, status,
                       error, name_arch or (None if arch in (None, "", "<none>") else arch), cut)


_NOT_FOUND = re.compile(r"^dpkg-query: no packages found matching (.+)$")


def _whole_query_row(line: str) -> bool:
    """A whole last line of dpkg-query -W: name, version and status (tab-separated), or its own words."""
    cells = line.split("\t")
    return (len(cells) >= 3 and bool(cells[0]) and bool(cells[2].strip())) or line.startswith("dpkg-query: ")


@reads_whole_lines(row=_whole_query_row)
def parse_dpkg_query(text: str) -> DpkgList:
    """Parse tab-separated ``dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'``.

    One tight loop with the row built inline: every run reads a host's ~800 rows."""
    packages: list[DpkgPackage] = []
    not_found: list[str] = []
    problems: list[str] = []
    add, flags, none = packages.append, _flags, (None, "", "<none>")
    for line in text.splitlines():
        cells = line.split("\t")
        if len(cells) >= 3 and cells[0] and not line.isspace():
            name, _, name_arch = cells[0].partition(":")
            version, abbrev = cells[1], cells[2]
            arch = cells[3] if len(cells) > 3 else None
            add(DpkgPackage(name, None if version in none else version, abbrev.strip(), *flags(abbrev),
                            name_arch or (None if arch in none else arch)))
        elif not line.strip():
            continue
        elif match := _NOT_FOUND.match(line.strip()):
            not_found.append(match.group(1).strip())
        else:
            problems.append(line)
    return DpkgList(tuple(packages), tuple(not_found), tuple(problems))


_ROW_WITHOUT_RULER = re.compile(r"^([uihrpUIHRP][nciufhwtNCIUFHWT][ R]?)\s+(\S+)\s+(\S+)\s+(\S+)(?:\s+.*)?$")


def _whole_dpkg_l_row(line: str) -> bool:
    """A whole last line of dpkg -l: a package row as far as its architecture (the description may
    be empty), a header or ruler line, or dpkg-query's own words."""
    return bool(_ROW_WITHOUT_RULER.match(line)) or line.startswith(
        ("Desired=", "| ", "|/", "||/", "+++-", "dpkg-query: "))


@reads_whole_lines(row=_whole_dpkg_l_row)
def parse_dpkg_l(text: str) -> DpkgList:
    """Parse ``dpkg -l [PATTERN]``; columns come from the ``+++-====-...`` ruler, or, when
    the rows come without it (``dpkg -l | grep nvidia``), from the whitespace between
    status, name, version and architecture."""
    packages: list[DpkgPackage] = []
    not_found: list[str] = []
    problems: list[str] = []
    spans: list[tuple[int, int]] | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if match := _NOT_FOUND.match(line.strip()):
            not_found.append(match.group(1).strip())
        elif line.startswith("+++-"):
            spans = [(m.start(), m.end()) for m in re.finditer(r"[+=]+", line)]
        elif spans is None:
            if match := _ROW_WITHOUT_RULER.match(line):   # `dpkg -l | grep nvidia`: no header, no ruler
                abbrev, name, version, arch = match.groups()
                packages.append(_package(name, version, abbrev, arch))
            elif not line.startswith(("Desired=", "| ", "|/", "||/")):
                problems.append(line)
        elif len(spans) >= 4 and len(line) > spans[1][0]:
            cells = [line[start:end].strip() for start, end in spans[:3]] + [line[spans[3][0]:].strip()]
            abbrev, name, version, arch_cell = cells[0], cells[1], cells[2], cells[3]
            arch = arch_cell.split()[0] if arch_cell else None
            cut = len(version) >= spans[2][1] - spans[2][0]
            packages.append(_package(name, version, abbrev, arch, cut))
        else:
            problems.append(line)
    return DpkgList(tuple(packages), tuple(not_found), tuple(problems))


@dataclass(frozen=True)
class AptMark:
    """``apt-mark hold``/``unhold``/``showhold`` results, by package name."""

    held: tuple[str, ...] = ()
    already_held: tuple[str, ...] = ()
    unheld: tuple[str, ...] = ()
    already_unheld: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common


_MARK_PATTERNS = (
    (re.compile(r"^(\S+) set on hold\.$"), "held"),
    (re.compile(r"^(\S+) was already set on hold\.$"), "already_held"),
    (re.compile(r"^Canceled hold on (\S+)\.$"), "unheld"),
    (re.compile(r"^(\S+) was already not (?:on )?hold\.$"), "already_unheld"),
)


@reads_whole_lines
def parse_apt_mark(text: str) -> AptMark:
    """Parse ``apt-mark hold PKG...`` / ``apt-mark unhold PKG...`` messages."""
    found: dict[str, list[str]] = {kind: [] for _, kind in _MARK_PATTERNS}
    problems: list[str] = []
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        kind = next(((k, m) for p, k in _MARK_PATTERNS if (m := p.match(line))), None)
        if kind is None:
            problems.append(line)
        else:
            found[kind[0]].append(kind[1].group(1))
    return AptMark(tuple(found["held"]), tuple(found["already_held"]), tuple(found["unheld"]),
                   tuple(found["already_unheld"]), tuple(problems))


@reads_whole_lines
def parse_apt_mark_showhold(text: str) -> tuple[str, ...]:
    """Parse ``apt-mark showhold``: one held package name per line."""
    return tuple(line.strip() for line in text.splitlines() if re.fullmatch(r"\s*[\w.+:-]+\s*", line))

__all__ = [
    "AptMark", "AptPolicy", "AptSource", "AptVersion", "DpkgList", "DpkgPackage",
    "parse_apt_cache_policy", "parse_apt_mark", "parse_apt_mark_showhold", "parse_dpkg_l",
    "parse_dpkg_query",
]
