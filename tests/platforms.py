"""Platforms for task tests that build Facts by hand: what the engine resolves from a host's
os-release and tools (gpuconf/facts/platform.py), from the os-release files the distributions ship."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuconf.facts.platform import Platform, resolve

DEBIAN_12 = resolve('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n',
                    {"dpkg-query", "apt-get", "update-initramfs"})
ROCKY_9 = resolve('NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n',
                  {"rpm", "dnf", "dracut", "grubby"})
# Rocky Linux 10.0's os-release (the fields the platform reads, verbatim): no driver module streams
ROCKY_10 = resolve('NAME="Rocky Linux"\nVERSION="10.0 (Red Quartz)"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'
                   'VERSION_ID="10.0"\nPLATFORM_ID="platform:el10"\n', {"rpm", "dnf", "dracut", "grubby"})


def platform_for(host: Mapping[str, Any] | None) -> Platform:
    """The platform a test's host dict stands for: Rocky 9 (or 10, by its `major`) where its `os`
    says the RHEL family."""
    os = (host or {}).get("os") or {}
    if os.get("family") == "RedHat":
        return ROCKY_10 if os.get("major") == "10" else ROCKY_9
    return DEBIAN_12
