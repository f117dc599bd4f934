"""Every installed package of a host in one read, whichever its package manager.

Debian family: `dpkg-query -W` over all packages (held = desired state `hold`). RHEL family:
`rpm -qa` with an explicit format, and the dnf versionlock list (held = locked). Both reads
are declared; the remote runner runs only the one that fits the host (`/etc/redhat-release`
tells them apart), so a check costs one package-manager process per host, and every package
question of the play is answered from that one listing.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from gpuconf.facts.base import Fact, FactUnavailable, FileState, Output, command, file_state
from gpuconf.facts.common import incomplete
from gpuconf.facts.packages import parse_dpkg_query

REDHAT_MARK = "/etc/redhat-release"
VERSIONLOCK_LIST = "/etc/dnf/plugins/versionlock.list"
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


@dataclass(frozen=True)
class PackageSet:
    family: str  # "Debian" or "RedHat"
    packages: Mapping[str, Installed]

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


def _dpkg(output: Output) -> Mapping[str, Installed]:
    return _dpkg_listing(_complete(output, "dpkg-query"))


@functools.lru_cache(maxsize=LISTINGS_KEPT)
def _dpkg_listing(text: str) -> Mapping[str, Installed]:
    listing = parse_dpkg_query(text)
    if incomplete(listing):   # a package missing from a cut listing would read as "not installed"
        raise FactUnavailable(f"dpkg-query: {incomplete(listing)}")
    return MappingProxyType({p.name: Installed(p.name, p.version or "", p.status or "unknown", p.held)
                             for p in listing.packages})


def _rpm(output: Output) -> Mapping[str, Installed]:
    return _rpm_listing(_complete(output, "rpm -qa"))


@functools.lru_cache(maxsize=LISTINGS_KEPT)
def _rpm_listing(text: str) -> Mapping[str, Installed]:
    if text and not text.endswith("\n"):
        raise FactUnavailable("rpm -qa: the listing was cut short")
    packages = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 3:
            continue
        name, version, _arch = fields
        packages[name] = Installed(name, version[2:] if version.startswith("0:") else version, "installed")
    return MappingProxyType(packages)


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
                   unless_exists=REDHAT_MARK)
RPM_ALL = command(["rpm", "-qa", "--qf", RPM_FORMAT], _rpm, timeout=30, key="packages:rpm", if_exists=REDHAT_MARK)
VERSIONLOCK = file_state(VERSIONLOCK_LIST)
INSTALLED: list[Fact] = [DPKG_ALL, RPM_ALL, VERSIONLOCK]


def family(host: Mapping[str, Any]) -> str:
    """The host's OS family from its facts ("Debian" unless os-release says RHEL family)."""
    return ((host.get("os") or {}).get("family") or "Debian") if isinstance(host.get("os"), Mapping) else "Debian"


def package_set(values: Any, host: Mapping[str, Any]) -> PackageSet:
    """The installed packages, from the facts of `INSTALLED` (`values`: a task's Facts)."""
    if family(host) == "RedHat":
        locks = version_locks(values[VERSIONLOCK])
        packages = {name: Installed(p.name, p.version, p.status, name in locks)
                    for name, p in values[RPM_ALL].items()}
        return PackageSet("RedHat", packages)
    return PackageSet("Debian", values[DPKG_ALL])
