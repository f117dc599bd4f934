"""Stable per-node hardware identities: GPU UUIDs and serials, HCA GUIDs, LIDs, PCI addresses.

Each is derived from the lab and node names, so every tool on a node (``nvidia-smi``, sysfs,
``ibstat``, ``ibv_devinfo``) reports the same value, two nodes never share one, and a reset
node keeps the identities of the hardware it "runs on".
"""
from __future__ import annotations

import hashlib

import state


def _digest(*parts) -> str:
    node = state.node()
    key = "/".join([str(node["lab"]), str(node["name"])] + [str(p) for p in parts])
    return hashlib.sha256(key.encode()).hexdigest()


def gpu_uuid(index: int) -> str:
    h = _digest("gpu", index)
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def rack_cluster_uuid() -> str:
    """The NVLink domain's ClusterUUID: one per lab, so every GB200 tray of a lab shares it."""
    h = hashlib.sha256(f"{state.node()['lab']}/nvl72".encode()).hexdigest()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gpu_serial(index: int) -> str:
    prefix = state.profile().gpu.serial_prefix
    return prefix + str(int(_digest("serial", index)[:8], 16) % 1000000).zfill(6)


def gpu_bdf(bus: int) -> str:
    """``00000000:07:00.0``: the form nvidia-smi prints."""
    return f"00000000:{bus:02X}:00.0"


def sysfs_bdf(bus: int) -> str:
    """``0000:07:00.0``: the form sysfs and lspci -D use."""
    return f"0000:{bus:02x}:00.0"


def hca_guid(hca: int) -> str:
    """16 hex digits of an HCA's node GUID (port GUID is the same on single-port HCAs)."""
    prefix = state.profile().hca.guid_prefix
    return f"{prefix}03{_digest('hca', hca)[:8]}"


def guid_colons(guid: str) -> str:
    """``b83f:d203:00aa:bbcc``: the form sysfs and ibv_devinfo use."""
    return ":".join(guid[i:i + 4] for i in range(0, 16, 4))


def port_lid(hca: int) -> int:
    """The LID the subnet manager hands this port (LID 1 is the SM's own)."""
    return 2 + int(state.node().get("index", 0)) * 16 + hca
