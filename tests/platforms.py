"""Platforms for task tests that build Facts by hand: what the engine resolves from a host's
os-release and tools (gpuconf/platform.py), from the os-release files the distributions ship."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuconf.platform import Platform, resolve

DEBIAN_12 = resolve('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n',
                    {"dpkg-query", "apt-get", "update-initramfs"})
ROCKY_9 = resolve('NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n',
                  {"rpm", "dnf", "dracut", "grubby"})


def platform_for(host: Mapping[str, Any] | None) -> Platform:
    """The platform a test's host dict stands for: Rocky 9 where its `os` says the RHEL family."""
    os = (host or {}).get("os") or {}
    return ROCKY_9 if os.get("family") == "RedHat" else DEBIAN_12
