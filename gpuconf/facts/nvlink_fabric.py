"""Which NVLink fabric a node is part of, from its PCI devices: the fact `nvlink_fabric`.

* ``nvswitch``: an HGX board with NVSwitches (A100/H100/H200, NVLink 3 and 4): the node's own
  fabric manager routes them.
* ``nvswitch_nvlink5``: an HGX Blackwell board (B200/B300): fabric manager plus the NVLink
  subnet manager (``nvlsm``), its library and ``ib_umad``.
* ``rack``: a GB200/GB300 NVL72 compute tray: its NVLinks go to the rack's switch trays, run by
  the rack, so no fabric manager runs on the node; IMEX does the node's part.
* ``none``: no NVSwitch and no rack NVLink: nothing to route.

Source: ../shared/reference/nvidia-stack-2026.md section 5.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuconf.driver import catalog

NVSWITCH = "nvswitch"
NVSWITCH_NVLINK5 = "nvswitch_nvlink5"
RACK = "rack"
NONE = "none"

# GPUs that only come in rack-scale NVLink domains (PCI device ids, vendor 0x10de): GB200.
RACK_GPUS = frozenset({"0x2941"})


def nvlink_fabric(gpus: Sequence[Mapping[str, object]], nvswitches: Sequence[Mapping[str, object]]) -> str:
    """The fabric kind of a node with these GPUs and NVSwitch bridges (the `pci` fact's lists)."""
    if any(str(gpu.get("device_id", "")).lower() in RACK_GPUS for gpu in gpus) and not nvswitches:
        return RACK
    if not nvswitches:
        return NONE
    generations = {gpu.architecture for gpu in catalog.gpus(gpus)}
    return NVSWITCH_NVLINK5 if "blackwell" in generations else NVSWITCH


def why(kind: str) -> str:
    """One line that says what the node needs, for a role that has nothing to do."""
    return {
        NVSWITCH: "NVSwitch board (NVLink 3/4): fabric manager at the driver's version",
        NVSWITCH_NVLINK5: "NVLink5 NVSwitch board: fabric manager, nvlsm, libnvsdm and ib_umad",
        RACK: "rack NVLink (GB200 NVL72 tray): no NVSwitch in the node, the rack routes the fabric; "
              "no fabric manager here, IMEX instead",
        NONE: "no NVSwitch and no rack NVLink on this node: no fabric manager needed",
    }[kind]
