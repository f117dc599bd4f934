"""A host's platform: what its operating system means for every task, resolved once per host.

The one place where an OS family is known. It is resolved before any task, from two facts that
every run gathers (fact gathering on or off): `/etc/os-release` (`ID`, `ID_LIKE`, `VERSION_ID`)
and the tools present on the host. Tasks ask the platform which package backend, initramfs
tool, boot-entry tool and driver package naming to use; they never compare family strings.

A host whose platform cannot be known (no os-release, an ID this table does not know, or the
tools its family needs missing) fails alone with a clear error: never a guess. Compare
testinfra, which picks `DebianPackage` or `RpmPackage` once per host (`testinfra/modules/
package.py`), and Ansible's `OS_FAMILY_MAP` (ansible-core 2.19, `module_utils/facts/system/
distribution.py`), from which the families and distribution names below are taken.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gpuconf.errors import GpuconfError
from gpuconf.facts.base import Fact, FileState, file_glob, file_state

if TYPE_CHECKING:
    from gpuconf.driver.names import Naming

Family = Literal["Debian", "RedHat", "Suse"]
PackageBackend = Literal["apt", "dnf", "zypper"]


@dataclass(frozen=True)
class Distribution:
    name: str       # Ansible's ansible_distribution
    family: Family  # Ansible's ansible_os_family


# os-release ID -> the distribution. The one table: facts, Ansible's fact names and the
# platform all read it. An ID not here is looked up by its ID_LIKE entries, in order.
OS_RELEASE: dict[str, Distribution] = {
    "debian": Distribution("Debian", "Debian"),
    "ubuntu": Distribution("Ubuntu", "Debian"),
    "rhel": Distribution("RedHat", "RedHat"),
    "rocky": Distribution("Rocky", "RedHat"),
    "almalinux": Distribution("AlmaLinux", "RedHat"),
    "centos": Distribution("CentOS", "RedHat"),
    "fedora": Distribution("Fedora", "RedHat"),
    "ol": Distribution("OracleLinux", "RedHat"),
    "amzn": Distribution("Amazon", "RedHat"),
    "sles": Distribution("SLES", "Suse"),
    "opensuse-leap": Distribution("openSUSE Leap", "Suse"),
}
# Enterprise Linux rebuilds whose NVIDIA driver comes as dnf module streams up to EL 9; EL 10
# has no driver module streams (NVIDIA's RHEL 10 instructions install packages and lock them).
ENTERPRISE_LINUX = {"rhel", "rocky", "almalinux", "centos", "ol"}
LAST_EL_WITH_DRIVER_STREAMS = 9

# The tools whose presence the platform needs, and where a host keeps them.
TOOLS = ("dpkg-query", "apt-get", "rpm", "dnf", "zypper", "update-initramfs", "dracut", "grubby", "update-grub")
TOOL_DIRECTORIES = ("/usr/bin", "/usr/sbin", "/bin", "/sbin")
BACKENDS: dict[Family, PackageBackend] = {"Debian": "apt", "RedHat": "dnf", "Suse": "zypper"}
NEEDS: dict[PackageBackend, tuple[str, ...]] = {"apt": ("dpkg-query", "apt-get"), "dnf": ("rpm", "dnf"),
                                                "zypper": ("rpm", "zypper")}


def os_ids(*backends: PackageBackend) -> tuple[str, ...]:
    """The os-release IDs whose platform uses one of `backends`: the runner's guard on a listing
    (`if_os`), so that a host runs only its own package manager's listing. Taken from the same
    table as the platform; an ID known only by ID_LIKE matches by its ID_LIKE words."""
    return tuple(sorted(os_id for os_id, known in OS_RELEASE.items() if BACKENDS[known.family] in backends))


class PlatformUnknown(GpuconfError):
    """The host's platform cannot be known: the host fails, with this message."""


@dataclass(frozen=True)
class Platform:
    """What the host's operating system means for the tasks."""

    os_id: str
    version_id: str
    distribution: str
    family: Family
    packages: PackageBackend
    driver_streams: bool          # the NVIDIA driver comes as dnf module streams (EL 8 and 9)
    initramfs: Literal["update-initramfs", "dracut"]
    boot_entries: Literal["grubby", "update-grub"] | None  # None: neither tool is on the host

    @property
    def major(self) -> str:
        return self.version_id.split(".")[0]

    @property
    def driver_names(self) -> Naming:
        """How NVIDIA's repositories for this host name the driver's packages (gpuconf.driver.names)."""
        from gpuconf.driver.names import DebianNames, RedHatNames  # the catalog loads only for driver tasks

        if self.family == "Debian":
            return DebianNames()
        if self.family == "RedHat":
            return RedHatNames(el=self.major, streams=self.driver_streams)
        raise PlatformUnknown(f"{self.distribution} {self.version_id}: gpuconf knows no NVIDIA driver package "
                              "naming for this family (Debian/Ubuntu and the RHEL family only)")

    def initramfs_image(self, kernel: str) -> str:
        return f"/boot/initramfs-{kernel}.img" if self.initramfs == "dracut" else f"/boot/initrd.img-{kernel}"

    def initramfs_rebuild(self, kernel: str) -> list[str]:
        """The command that rebuilds `kernel`'s initramfs."""
        if self.initramfs == "dracut":
            return ["dracut", "-f", "--kver", kernel]
        return ["update-initramfs", "-u", "-k", kernel]


def parse_os_release(text: str) -> dict[str, str]:
    """os-release's `KEY=value` lines (values unquoted), keys lower-cased."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key.strip()):
            values[key.strip().lower()] = value.strip().strip("\"'")
    return values


def distribution(os_release: Mapping[str, str]) -> Distribution | None:
    """The distribution of an os-release (by ID, else by its ID_LIKE entries), or None."""
    for os_id in (os_release.get("id", ""), *os_release.get("id_like", "").split()):
        if os_id in OS_RELEASE:
            return OS_RELEASE[os_id]
    return None


def os_facts(text: str) -> dict[str, str]:
    """The `facts.os` mapping: id, version_id, pretty_name, family, major and distribution."""
    values = parse_os_release(text)
    known = distribution(values)
    return {"id": values.get("id", ""), "version_id": values.get("version_id", ""),
            "pretty_name": values.get("pretty_name", ""), "family": known.family if known else "",
            "major": values.get("version_id", "").split(".")[0], "distribution": known.name if known else ""}


def resolve(os_release: str | None, tools: Iterable[str]) -> Platform:
    """The platform of a host with this os-release text (None: the file is missing) and these tools.
    Raises PlatformUnknown, naming what is missing."""
    if os_release is None:
        raise PlatformUnknown("/etc/os-release is missing: the host's platform cannot be known")
    values = parse_os_release(os_release)
    os_id = values.get("id", "")
    known = distribution(values)
    if known is None:
        like = f" (ID_LIKE {values['id_like']!r})" if values.get("id_like") else ""
        raise PlatformUnknown(f"os-release ID {os_id!r}{like} is not a platform gpuconf knows; known: "
                              f"{', '.join(sorted(OS_RELEASE))}")
    present = set(tools)
    backend = BACKENDS[known.family]
    missing = [tool for tool in NEEDS[backend] if tool not in present]
    if missing:
        raise PlatformUnknown(f"{known.name} {values.get('version_id', '')} without {' and '.join(missing)}: "
                              f"gpuconf manages its packages with {backend}")
    version_id = values.get("version_id", "")
    major = version_id.split(".")[0]
    enterprise = {os_id, *values.get("id_like", "").split()} & ENTERPRISE_LINUX
    streams = backend == "dnf" and bool(enterprise) and major.isdigit() and int(major) <= LAST_EL_WITH_DRIVER_STREAMS
    # Debian's own tool unless only dracut is there (Debian 13 can use either); dracut elsewhere
    initramfs: Literal["update-initramfs", "dracut"] = "dracut"
    if known.family == "Debian" and ("update-initramfs" in present or "dracut" not in present):
        initramfs = "update-initramfs"
    boot: Literal["grubby", "update-grub"] | None = None
    if "grubby" in present:
        boot = "grubby"
    elif "update-grub" in present:
        boot = "update-grub"
    return Platform(os_id, version_id, known.name, known.family, backend, streams, initramfs, boot)


def _tools(files: Mapping[str, str]) -> frozenset[str]:
    return frozenset(path.rsplit("/", 1)[-1] for path in files)


OS_RELEASE_FACT = file_state("/etc/os-release", follow=True)
TOOLS_FACT = file_glob([f"{d}/{tool}" for tool in TOOLS for d in TOOL_DIRECTORIES], _tools, what="name",
                       key="platform:tools")
# Gathered on every run, fact gathering on or off, in the first round trip of each host.
PLATFORM_FACTS: list[Fact] = [OS_RELEASE_FACT, TOOLS_FACT]


def from_facts(values: Mapping[str, object]) -> Platform:
    """The platform from the parsed values of PLATFORM_FACTS (by fact key)."""
    release, tools = values.get(OS_RELEASE_FACT.key), values.get(TOOLS_FACT.key)
    for value, what in ((release, "/etc/os-release"), (tools, "the host's tools")):
        if value is None or isinstance(value, Exception):
            raise PlatformUnknown(f"cannot read {what}: {value or 'no reply'}")
    assert isinstance(release, FileState) and isinstance(tools, frozenset)
    return resolve(release.text if release.exists else None, tools)
