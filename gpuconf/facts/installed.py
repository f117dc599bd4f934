"""Every installed package of a host in one read, whichever its package manager.

Debian family: `dpkg-query -W` over all packages (held = desired state `hold`). RHEL family:
`rpm -qa` with an explicit format, and the dnf versionlock list (held = locked). Both reads
are declared; the remote runner runs only the one the host's platform uses (its os-release,
judged by gpuconf/facts/platform.py's one table), so a check costs one package-manager process per
host, and every package question of the play is answered from that one listing.

The same listing tells when a package manager was cut short (killed, or the host rebooted under
it): dpkg leaves packages half-way (`iU` unpacked, `iF` half-configured, `iH` half-installed,
the reinstall-required flag `R`) and entries in its journal
(/var/lib/dpkg/updates, which apt checks before it says "dpkg was interrupted"); an rpm
transaction cut between installing the new version and erasing the old leaves the package
installed twice. Both are `unfinished` in the PackageSet.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple, Protocol

from gpuconf.facts.base import Fact, FactUnavailable, FileState, Output, Parsed, command, file_glob, file_state
from gpuconf.facts.common import incomplete
from gpuconf.facts.packages import parse_dpkg_query
from gpuconf.facts.platform import Platform, PlatformUnknown, os_ids

VERSIONLOCK_LIST = "/etc/dnf/plugins/versionlock.list"
DPKG_UPDATES = "/var/lib/dpkg/updates"
DPKG_FORMAT = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"
RPM_FORMAT = "%{NAME}\\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\t%{ARCH}\\n"


class Installed(NamedTuple):
    """One package as the package manager reports it. `version` is the full package version
    (`580.95.05-1`, `3:580.95.05-1.el9`); `status` is dpkg's (`installed`, `config-files`, ...),
    always `installed` for rpm; `held`: apt-mark hold, or a dnf versionlock entry. A named tuple:
    a host lists about 800 packages, read on every run, and frozen dataclasses made that read
    twice as slow."""

    name: str
    version: str
    status: str
    held: bool = False

    @property
    def installed(self) -> bool:
        # unpacked and configured, with triggers still to run (`it`, `iW`): installing again changes nothing
        return self.status in ("installed", "triggers-pending", "triggers-awaited")

    @property
    def upstream(self) -> str:
        """`3:580.95.05-1.el9` -> `580.95.05`."""
        return self.version.split(":")[-1].rsplit("-", 1)[0] if "-" in self.version else self.version.split(":")[-1]


class Unfinished(NamedTuple):
    """A package an interrupted package manager left half-way: dpkg's status for it
    (`half-configured`, ...) or, for rpm, `installed twice (v1, v2)`. `reinstall`: dpkg cannot
    finish it by configuring (half-installed, or flagged reinstall-required)."""

    name: str
    state: str
    reinstall: bool = False


class Listing(NamedTuple):
    """One package manager's listing: every package by name, and the unfinished ones."""

    packages: Mapping[str, Installed]
    unfinished: tuple[Unfinished, ...] = ()


@dataclass(frozen=True)
class PackageSet:
    backend: str  # the platform's package backend: "apt" or "dnf"
    packages: Mapping[str, Installed]
    unfinished: tuple[Unfinished, ...] = ()
    journal: tuple[str, ...] = ()  # dpkg's journal entries not yet in its status file

    def get(self, name: str) -> Installed | None:
        return self.packages.get(name)

    def installed(self, name: str) -> Installed | None:
        package = self.packages.get(name)
        return package if package is not None and package.installed else None


def _complete(output: Output, program: str) -> str:
    if output.timed_out:  # a partial listing would read as "not installed": drift that is not there
        raise FactUnavailable(f"{program} did not finish within {output.timeout or 30:g} s")
    if output.rc != 0:
        raise FactUnavailable(f"{program} failed (exit {output.rc}): {output.stderr.strip()[:200]}")
    return output.stdout


# A converged fleet's hosts list the same packages, byte for byte: each distinct listing is
# parsed once, and its hosts share the result, read-only (about 1 ms a host for 800 rows).
LISTINGS_KEPT = 16


# dpkg statuses of a package that a dpkg run began and did not finish. Triggers still to run
# (`it`, `iW`) are not among them: the package works, and apt's next run processes them itself.
HALF_WAY = ("unpacked", "half-configured", "half-installed")


def _dpkg(output: Output) -> Listing:
    return _dpkg_listing(_complete(output, "dpkg-query"))


@functools.lru_cache(maxsize=LISTINGS_KEPT)
def _dpkg_listing(text: str) -> Listing:
    listing = parse_dpkg_query(text)
    if incomplete(listing):   # a package missing from a cut listing would read as "not installed"
        raise FactUnavailable(f"dpkg-query: {incomplete(listing)}")
    packages = MappingProxyType({p.name: Installed(p.name, p.version or "", p.status or "unknown", p.held)
                                 for p in listing.packages})
    unfinished = tuple(Unfinished(p.name, p.status if p.status in HALF_WAY else "reinstall-required",
                                  p.status == "half-installed" or p.error)
                       for p in listing.packages if p.status in HALF_WAY or p.error)
    return Listing(packages, unfinished)


def _rpm(output: Output) -> Listing:
    return _rpm_listing(_complete(output, "rpm -qa"))


def _install_only(name: str) -> bool:
    """Packages rpm keeps several versions of by design (dnf's installonlypkgs, gpg keys)."""
    return name in ("kernel", "gpg-pubkey") or (
        name.startswith("kernel-") and not name.startswith(("kernel-headers", "kernel-tools", "kernel-srpm")))


@functools.lru_cache(maxsize=LISTINGS_KEPT)
def _rpm_listing(text: str) -> Listing:
    if text and not text.endswith("\n"):
        raise FactUnavailable("rpm -qa: the listing was cut short")
    packages = {}
    versions: dict[tuple[str, str], list[str]] = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 3:
            continue
        name, version, arch = fields
        version = version[2:] if version.startswith("0:") else version
        packages[name] = Installed(name, version, "installed")
        versions.setdefault((name, arch), []).append(version)
    twice = tuple(Unfinished(name, f"installed twice ({', '.join(found)})")
                  for (name, _arch), found in sorted(versions.items()) if len(found) > 1 and not _install_only(name))
    return Listing(MappingProxyType(packages), twice)


def _journal(files: dict[str, str]) -> tuple[str, ...]:
    # apt's test: a file named by digits only is a pending entry (dpkg writes tmp.i first)
    return tuple(sorted(name for name in (path.rsplit("/", 1)[-1] for path in files) if name.isdigit()))


def version_locks(state: FileState) -> set[str]:
    """Names locked by dnf's versionlock plugin (`name-[epoch:]version-release.arch` lines;
    `!` lines are exclusions, not locks)."""
    names = set()
    for line in (state.text or "").splitlines() if state.exists else ():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        parts = line.rsplit("-", 2)
        if len(parts) == 3:
            names.add(parts[0])
    return names


DPKG_ALL = command(["dpkg-query", "-W", f"-f={DPKG_FORMAT}"], _dpkg, timeout=30, key="packages:dpkg",
                   if_os=os_ids("apt"))
RPM_ALL = command(["rpm", "-qa", "--qf", RPM_FORMAT], _rpm, timeout=30, key="packages:rpm",
                  if_os=os_ids("dnf", "zypper"))
VERSIONLOCK = file_state(VERSIONLOCK_LIST)
DPKG_JOURNAL = file_glob([f"{DPKG_UPDATES}/*"], _journal, what="name", key="dpkg:updates")
INSTALLED: list[Fact] = [DPKG_ALL, RPM_ALL, VERSIONLOCK, DPKG_JOURNAL]


class FactValues(Protocol):
    """Read facts by their `Fact` (a task's `Facts`)."""

    def __getitem__(self, fact: Fact[Parsed]) -> Parsed: ...


def package_set(values: FactValues, platform: Platform) -> PackageSet:
    """The installed packages, from the facts of `INSTALLED` (`values`: a task's Facts), read
    with the host's package backend."""
    if platform.packages == "zypper":
        raise PlatformUnknown(f"{platform.distribution} {platform.version_id}: gpuconf does not manage zypper "
                              "packages yet (apt and dnf only)")
    if platform.packages == "dnf":
        locks = version_locks(values[VERSIONLOCK])
        rpms = values[RPM_ALL]
        packages = {name: Installed(p.name, p.version, p.status, name in locks)
                    for name, p in rpms.packages.items()}
        return PackageSet("dnf", packages, rpms.unfinished)
    listing = values[DPKG_ALL]
    try:
        journal = values[DPKG_JOURNAL]
    except FactUnavailable:   # a second sign only: the statuses in the listing are the first
        journal = ()
    return PackageSet("apt", listing.packages, listing.unfinished, journal)
