"""Firmware versions a node reports about itself (in band): each GPU's VBIOS, InfoROM image and
GSP firmware (`nvidia-smi -q`), each HCA's firmware (`ibstat`, or sysfs `fw_ver`), the BIOS
(`dmidecode -t bios`). The BMC's own view (out of band, over Redfish) is `facts/redfish.py`; both
become `FirmwareComponent`s, so one table and one drift rule serve them.

Component names: in band `GPU<index>.VBIOS` (the index nvidia-smi prints, by bus order),
`GPU<index>.InfoROM`, `GPU<index>.GSP`, `<hca>.FW` (`mlx5_0.FW`), `BIOS`; out of band the
Redfish inventory's own ids (`HGX_FW_GPU_SXM_1`, `HGX_FW_BMC_0`).
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from gpuconf.facts.evidence import DmiRecord
from gpuconf.facts.infiniband import Ibstat
from gpuconf.facts.infiniband_sysfs import SysfsIbDevice
from gpuconf.facts.nvidia.query_model import NvidiaSmiQuery

NOT_A_VERSION = {"", "n/a", "not available", "not specified", "unknown", "[n/a]"}


@dataclass(frozen=True)
class FirmwareComponent:
    """One firmware image and the version it runs. `source` says who reported it: `nvidia-smi`,
    `ibstat`, `sysfs`, `dmidecode` or `redfish`. `updateable`, `state` and `health` are the
    BMC's (Redfish `Updateable`, `Status.State`, `Status.Health`), None in band."""

    name: str
    version: str | None
    source: str
    updateable: bool | None = None
    state: str | None = None
    health: str | None = None

    @property
    def family(self) -> str:
        """The component with its instance number taken out (`HGX_FW_GPU_SXM_1` ->
        `HGX_FW_GPU_SXM_#`, `GPU3.VBIOS` -> `GPU#.VBIOS`): the members of one family on one node
        should all run one version."""
        return re.sub(r"\d+", "#", self.name)


def _version(value: str | None) -> str | None:
    if value is None or value.strip().lower() in NOT_A_VERSION:
        return None
    return value.strip()


def gpu_firmware(query: NvidiaSmiQuery) -> list[FirmwareComponent]:
    """VBIOS, InfoROM image and GSP firmware of each GPU, in nvidia-smi's order (its index). A
    GSP version of N/A (GSP off, the proprietary module) is no component."""
    found = []
    for index, gpu in enumerate(query.gpus):
        inforom = gpu.raw.get("inforom_version")
        image = inforom.get("image_version") if isinstance(inforom, dict) else None
        for kind, value in (("VBIOS", gpu.vbios_version), ("InfoROM", image), ("GSP", gpu.gsp_firmware_version)):
            if _version(value) is not None:
                found.append(FirmwareComponent(f"GPU{index}.{kind}", _version(value), "nvidia-smi"))
    return found


def hca_firmware(ibstat: Ibstat | None, sysfs: tuple[SysfsIbDevice, ...] = ()) -> list[FirmwareComponent]:
    """Each HCA's firmware: sysfs `fw_ver` (read without a process) where there is one, else ibstat's."""
    versions: dict[str, tuple[str, str]] = {}
    if ibstat is not None:
        for ca in ibstat.cas:
            if _version(ca.firmware_version):
                versions[ca.name] = (str(_version(ca.firmware_version)), "ibstat")
    for device in sysfs:
        if _version(device.fw_ver):
            versions[device.name] = (str(_version(device.fw_ver)), "sysfs")
    return [FirmwareComponent(f"{name}.FW", version, source) for name, (version, source) in sorted(versions.items())]


def bios_firmware(records: tuple[DmiRecord, ...]) -> list[FirmwareComponent]:
    """The BIOS version of dmidecode's type 0 record (`BIOS Information`)."""
    for record in records:
        if record.type == 0:
            version = _version(record.fields.get("Version"))
            return [FirmwareComponent("BIOS", version, "dmidecode")] if version else []
    return []


def mixed_families(components: list[FirmwareComponent]) -> dict[str, dict[str, list[str]]]:
    """Families whose members on one node run different versions: family -> version -> the
    components at that version (`HGX_FW_GPU_SXM_#` -> {'96.00.89.00.01': [...7], '96.00.74.00.0D': [...1]})."""
    families: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for component in components:
        if component.version is not None and component.family != component.name:
            families[component.family][component.version].append(component.name)
    return {family: {v: sorted(names) for v, names in versions.items()}
            for family, versions in sorted(families.items()) if len(versions) > 1}


def describe_mixed(family: str, versions: dict[str, list[str]]) -> str:
    """One line naming the odd ones out: the version most members run, and the others by name."""
    common = max(versions, key=lambda v: (len(versions[v]), v))
    others = "; ".join(f"{', '.join(names)} at {version}" for version, names in sorted(versions.items())
                       if version != common)
    return f"mixed {family} versions on this node: {others} (the other {len(versions[common])} at {common})"


def _version_key(version: str) -> tuple[tuple[int, int, str], ...]:
    """Parts in order: decimal numbers as numbers, hexadecimal ones (`0D` of a VBIOS version) as
    numbers too, words as words (`rc57`); a number sorts before a word at the same place."""
    parts = []
    for part in re.split(r"[.\-_+ ]+", version.strip()):
        if not part:
            continue
        if part.isdigit():
            parts.append((0, int(part), ""))
        elif re.fullmatch(r"[0-9A-Fa-f]+", part) and any(c.isdigit() for c in part):
            parts.append((0, int(part, 16), ""))
        else:
            parts.append((1, 0, part.lower()))
    return tuple(parts)


def compare_versions(installed: str, wanted: str) -> int:
    """-1 when `installed` is behind `wanted`, 0 the same, 1 ahead. Exact text first (the BMC's
    spelling is the bundle's), then part by part."""
    if installed.strip() == wanted.strip():
        return 0
    a, b = _version_key(installed), _version_key(wanted)
    return (a > b) - (a < b) or (installed > wanted) - (installed < wanted)


def compress_names(names: list[str]) -> str:
    """`HGX_FW_GPU_SXM_1` ... `_8` as `HGX_FW_GPU_SXM_[1-8]`; other names as they are."""
    groups: dict[str, list[int]] = defaultdict(list)
    plain = []
    for name in names:
        match = re.fullmatch(r"(.*?)(\d+)", name)
        if match:
            groups[match.group(1)].append(int(match.group(2)))
        else:
            plain.append(name)
    out = list(plain)
    for prefix, numbers in groups.items():
        numbers = sorted(numbers)
        if len(numbers) == 1:
            out.append(f"{prefix}{numbers[0]}")
            continue
        runs, start = [], numbers[0]
        for previous, current in zip(numbers, numbers[1:] + [None]):
            if current != previous + 1 if current is not None else True:
                runs.append(f"{start}-{previous}" if previous != start else str(start))
                start = current if current is not None else start
        out.append(f"{prefix}[{','.join(runs)}]")
    return ", ".join(out)
