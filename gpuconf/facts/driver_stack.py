"""What the driver stack task reads besides the installed packages: what the host's own
repositories offer, the enabled dnf module stream, Secure Boot, and the installed kernels."""
from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpuconf.facts.apt_policy import parse_apt_cache_policy
from gpuconf.facts.base import Fact, FactUnavailable, FileState, Output, command, file_glob, file_state
from gpuconf.facts.platform import os_ids

MODULE_STATE = "/etc/dnf/modules.d/nvidia-driver.module"
DNF_LOGDIR = "/run/gpuconf-dnf"


@dataclass(frozen=True)
class Offered:
    """Package versions the host's repositories offer (never the installed-only ones)."""

    versions: Mapping[str, tuple[str, ...]]

    def has(self, name: str, version: str | None) -> bool:
        offered = self.versions.get(name, ())
        if version is None:
            return bool(offered)
        return any(v == version or v.split(":", 1)[-1] == version.split(":", 1)[-1] for v in offered)


def _complete(output: Output, what: str) -> str:
    if output.timed_out:
        raise FactUnavailable(f"{what} did not finish within {output.timeout or 60:g} s")
    if output.rc != 0:
        raise FactUnavailable(f"{what} failed (exit {output.rc}): {(output.stderr or output.stdout).strip()[-300:]}")
    return output.stdout


def _apt_offered(output: Output) -> Offered:
    return _apt_offered_text(_complete(output, "apt-cache policy"))


@functools.lru_cache(maxsize=16)   # hosts of one fleet see the same repositories: parsed once, shared read-only
def _apt_offered_text(text: str) -> Offered:
    versions = {}
    for policy in parse_apt_cache_policy(text):
        if "sources" in policy.missing:
            raise FactUnavailable(f"apt-cache policy output for {policy.package} is cut short")
        versions[policy.package] = tuple(v.version for v in policy.versions
                                         if any(s.origin != "/var/lib/dpkg/status" for s in v.sources))
    return Offered(MappingProxyType(versions))


def _dnf_offered(output: Output) -> Offered:
    versions: dict[str, list[str]] = {}
    for line in _complete(output, "dnf repoquery").splitlines():
        fields = line.split("\t")
        if len(fields) == 2 and fields[0] and fields[1][:1].isdigit():
            name, version = fields
            versions.setdefault(name, []).append(version[2:] if version.startswith("0:") else version)
    return Offered({name: tuple(found) for name, found in versions.items()})


def apt_offered(patterns: list[str]) -> Fact[Offered]:
    # the remote runner tells apt its architectures, which apt would ask dpkg for (three processes)
    return command(["apt-cache", "policy", *patterns], _apt_offered, timeout=60, if_os=os_ids("apt"),
                   apt_architectures=True)


def dnf_offered(names: list[str]) -> Fact[Offered]:
    # cache only (-C): a check never refreshes metadata; dnf's own logs (which every dnf run appends to
    # under /var/log) go to a tmpfs directory instead; modular filtering off, so that the versions of a
    # stream that is not enabled yet are seen too
    return command(["dnf", "-C", "-q", f"--setopt=logdir={DNF_LOGDIR}", "repoquery", "--disable-modular-filtering",
                    "--qf", "%{name}\t%{epoch}:%{version}-%{release}", *names], _dnf_offered, timeout=60,
                   if_os=os_ids("dnf"))


def enabled_stream(state: FileState) -> str | None:
    """The enabled stream of the nvidia-driver module from its dnf state file, or None."""
    if not state.exists:
        return None
    values = dict(line.split("=", 1) for line in (state.text or "").splitlines() if "=" in line)
    return values.get("stream") or None if values.get("state", "").strip() == "enabled" else None


MODULE_STREAM = file_state(MODULE_STATE)


# Secure Boot as the firmware reports it: its EFI variable, which is what `mokutil --sb-state`
# reads, read by the runner itself (no process, and no need for mokutil on the host). efivarfs
# shows a variable as 4 bytes of attributes, then its data: 1 is enabled. No such variable (a
# BIOS boot, or no efivarfs) is no Secure Boot, as mokutil says "EFI variables are not supported".
SECURE_BOOT_VARIABLE = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e398e4b7df8c"


def secure_boot(files: dict[str, str]) -> bool:
    value = files.get(SECURE_BOOT_VARIABLE, "")
    return len(value) >= 5 and value[4] == "\x01"


SECURE_BOOT = file_glob([SECURE_BOOT_VARIABLE], secure_boot, key="efi:SecureBoot")
KERNEL_RELEASE = re.compile(r"^/boot/vmlinuz-(.+)$")
INSTALLED_KERNELS = file_glob(["/boot/vmlinuz-*"], lambda files: sorted(
    m[1] for path in files if (m := KERNEL_RELEASE.match(path)) and "rescue" not in m[1] and not m[1].endswith(".old")),
    what="name", key="kernels:installed")
