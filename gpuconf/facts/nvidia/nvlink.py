"""``nvidia-smi nvlink -s`` (``--status``): per GPU, per link speed or ``<inactive>``.

Format notes (real captures: A100, H200, L40S, H100 in MIG mode, an A10)::

    GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5269b708-...)
    <TAB> Link 0: 25 GB/s
    <TAB> Link 1: <inactive>

A GPU line can instead be followed by a one-line reason: ``NVML: Unable to retrieve
NVLink information as all links are inactive``, ``Device does not have or support
Nvlink``, ``Nvlink queries are not supported for Devices in MIG mode``. A PCIe GPU may
print nothing at all (empty output = no GPUs with NVLink reported).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from gpuconf.facts.common import reads_whole_lines
from gpuconf.facts.nvidia.failure import NvidiaSmiFailure, detect_nvidia_smi_failure

LINKS = "links"                   # link lines were printed
ALL_INACTIVE = "all_inactive"     # NVML said every link is inactive
NO_NVLINK = "no_nvlink"           # the GPU has no NVLink
MIG_MODE = "mig_mode"             # NVLink cannot be queried in MIG mode
UNKNOWN = "unknown"               # a GPU line with nothing recognisable under it


@dataclass(frozen=True)
class NvlinkLink:
    """One link: ``speed_gbps`` (GB/s per direction as printed) or inactive."""

    index: int
    active: bool
    speed_gbps: float | None


@dataclass(frozen=True)
class GpuNvlinks:
    """The links of one GPU. ``status`` is one of the module constants (``links``,
    ``all_inactive``, ``no_nvlink``, ``mig_mode``, ``unknown``); ``message`` is the
    reason line when nvidia-smi printed one."""

    index: int
    name: str
    uuid: str | None
    status: str
    links: tuple[NvlinkLink, ...] = ()
    message: str | None = None

    @property
    def inactive_links(self) -> tuple[int, ...]:
        """Indexes of links reported ``<inactive>``."""
        return tuple(link.index for link in self.links if not link.active)

    @property
    def active_link_count(self) -> int:
        """How many links are up (0 when ``status`` is ``all_inactive``)."""
        return sum(1 for link in self.links if link.active)


@dataclass(frozen=True)
class NvlinkStatus:
    """All GPUs of ``nvidia-smi nvlink -s``; ``problems`` lists unrecognised lines."""

    gpus: tuple[GpuNvlinks, ...]
    failure: NvidiaSmiFailure | None = None
    problems: tuple[str, ...] = ()
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common


_GPU = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?\s*$")
_LINK = re.compile(r"^\s*Link (\d+): (?:(<inactive>)|([\d.]+) GB/s|(.*))\s*$")
_REASONS = (
    (re.compile(r"all links are inactive", re.I), ALL_INACTIVE),
    (re.compile(r"does not have or support nvlink", re.I), NO_NVLINK),
    (re.compile(r"not supported for devices in mig mode", re.I), MIG_MODE),
)


@dataclass
class _GpuBlock:
    """One GPU's block of `nvlink -s` while it is read."""

    index: int
    name: str
    uuid: str | None
    status: str | None = None
    links: list[NvlinkLink] = field(default_factory=list)
    message: str | None = None


@reads_whole_lines
def parse_nvlink_status(text: str) -> NvlinkStatus:
    """Parse ``nvidia-smi nvlink -s [-i N]``. Never raises."""
    failure = detect_nvidia_smi_failure(text)
    if failure is not None:
        return NvlinkStatus(gpus=(), failure=failure)
    gpus: list[GpuNvlinks] = []
    problems: list[str] = []
    current: _GpuBlock | None = None

    def flush() -> None:
        if current is None:
            return
        status = current.status or (LINKS if current.links else UNKNOWN)
        gpus.append(GpuNvlinks(current.index, current.name, current.uuid, status, tuple(current.links),
                               current.message))

    for line in text.splitlines():
        if not line.strip():
            continue
        gpu = _GPU.match(line)
        if gpu:
            flush()
            current = _GpuBlock(int(gpu.group(1)), gpu.group(2), gpu.group(3))
            continue
        link = _LINK.match(line)
        if link and current is not None:
            speed = float(link.group(3)) if link.group(3) else None
            current.links.append(NvlinkLink(int(link.group(1)), link.group(2) is None and speed is not None, speed))
            continue
        reason = next((kind for pattern, kind in _REASONS if pattern.search(line)), None)
        if reason and current is not None:
            current.status, current.message = reason, line.strip()
            continue
        problems.append(line)
    flush()
    return NvlinkStatus(gpus=tuple(gpus), problems=tuple(problems))


@dataclass(frozen=True)
class NvlinkInfo:
    """One GPU of ``nvidia-smi nvlink -info`` (NVLink5, GB200): encryption and the NVLink
    firmware versions (MSE, NETIR, ...) that must match across a rack's trays."""

    index: int
    name: str
    uuid: str | None
    nvle: str | None
    firmware: dict[str, str]


@dataclass(frozen=True)
class NvlinkInfoReport:
    gpus: tuple[NvlinkInfo, ...]
    complete: bool  # False when the last GPU's block was cut short


_INFO_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)\s*$")


@reads_whole_lines
def parse_nvlink_info(text: str) -> NvlinkInfoReport:
    gpus: list[NvlinkInfo] = []
    complete = True
    in_firmware = False
    for line in text.splitlines():
        if line.startswith("GPU "):
            match = _INFO_GPU.match(line)
            if not match:  # a GPU line cut short
                complete = False
                continue
            gpus.append(NvlinkInfo(int(match[1]), match[2], match[3], None, {}))
            in_firmware = False
        elif gpus and line.strip().startswith("NVLE:"):
            gpus[-1] = replace(gpus[-1], nvle=line.split(":", 1)[1].strip())
        elif gpus and line.strip() == "Firmware Version:":
            in_firmware = True
        elif gpus and in_firmware and ":" in line:
            key, _, value = line.strip().partition(": ")
            if value:
                gpus[-1].firmware[key] = value.strip()
    complete = complete and bool(gpus) and bool(gpus[-1].firmware)  # a block without its versions was cut
    return NvlinkInfoReport(tuple(gpus), complete)
