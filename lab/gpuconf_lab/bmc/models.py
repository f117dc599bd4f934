"""The BMC a lab node's profile gets: which captured service it serves, which of its components
are the BMC's own (they activate when the BMC resets itself after its Task), the firmware a fresh
node runs, and the provider's current bundle for it.

Every version string is a real one, with where it was seen:
* the captures: NVIDIA/libredfish's DGX H100 (Viking) mockup (HGX_FW_BMC_0 HGX-22.10-1-rc57,
  HGX_FW_GPU_SXM_* 96.00.89.00.01) and its Supermicro HGX H100 mockup (HGX_FW_BMC_0
  HGX-22.10-1-rc34): mockups/SOURCES.md;
* a fresh lab node's GPUs run the VBIOS its profile reports in band (profiles.py, from the real
  `nvidia-smi -q` of an 8x H100 HGX: 96.00.74.00.0D), so the BMC and nvidia-smi agree.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gpuconf_lab.profiles import get_profile

MOCKUPS = Path(__file__).with_name("mockups")
INVENTORY = "/redfish/v1/UpdateService/FirmwareInventory"


@dataclass(frozen=True)
class Model:
    """One captured BMC service, as a lab node's BMC serves it."""

    name: str
    system: str                      # the system a power cycle resets
    bmc_components: tuple[str, ...]  # the BMC's own images: active once it has reset itself
    gpu_components: str              # the GPUs' firmware, `{n}` their 1-based number
    baseline: dict[str, str]         # a fresh node's versions where they differ from the capture
    current: dict[str, str] = field(default_factory=dict)   # the provider's current bundle
    packages: tuple[tuple[str, tuple[str, ...]], ...] = ()  # its packages: file name, components

    def resources(self) -> dict[str, Any]:
        return _load(self.name)["resources"]

    def source(self) -> dict[str, str]:
        return _load(self.name)["source"]

    def components(self) -> list[str]:
        """The firmware inventory's member ids, in the capture's order."""
        return [m["@odata.id"].rsplit("/", 1)[1] for m in self.resources()[INVENTORY]["Members"]]

    def fresh_versions(self, profile: str) -> dict[str, str]:
        """What a fresh node of `profile` runs: the capture's versions, the model's baseline, and
        its GPUs at the VBIOS nvidia-smi reports on that profile."""
        resources = self.resources()
        versions = {name: str(resources[f"{INVENTORY}/{name}"].get("Version", "")) for name in self.components()}
        versions.update(self.baseline)
        gpus = get_profile(profile).gpu
        for number in range(1, 9):
            name = self.gpu_components.format(n=number)
            if name in versions:
                versions[name] = gpus.vbios
        return versions


HGX_GPUS = tuple(f"HGX_FW_GPU_SXM_{n}" for n in range(1, 9))
DGX_H100 = Model(
    name="dgx-h100", system="/redfish/v1/Systems/DGX", bmc_components=("HGX_FW_BMC_0", "HostBMC_0"),
    gpu_components="HGX_FW_GPU_SXM_{n}",
    baseline={"HGX_FW_BMC_0": "HGX-22.10-1-rc34"},            # libredfish's Supermicro HGX H100 capture
    current={"HGX_FW_BMC_0": "HGX-22.10-1-rc57", **{gpu: "96.00.89.00.01" for gpu in HGX_GPUS}},  # Viking's
    packages=(("nvfw_HGX-H100x8_bmc_lab.fwpkg", ("HGX_FW_BMC_0",)), ("nvfw_HGX-H100x8_gpu_lab.fwpkg", HGX_GPUS)),
)
MODELS = {model.name: model for model in (DGX_H100,)}
# The HGX 8-GPU baseboards share the DGX H100's Redfish layout (HGX_FW_GPU_SXM_1..8, HGX_FW_BMC_0);
# only the H100's bundle versions are known from captures, so only it gets a current bundle.
BY_PROFILE = {"h100": DGX_H100, "h200": DGX_H100, "b200": DGX_H100}
BUNDLE_PROFILES = ("h100",)


def model_for(profile: str) -> Model | None:
    """The BMC a node of this profile gets (None: no capture fits it, so it has no BMC)."""
    return BY_PROFILE.get(profile)


@cache
def _load(name: str) -> dict[str, Any]:
    return json.loads((MOCKUPS / f"{name}.json").read_text())
