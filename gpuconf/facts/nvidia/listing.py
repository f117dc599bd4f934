"""``nvidia-smi -L`` (GPUs and MIG devices) and ``nvidia-smi --version``.

``-L`` is the cheapest GPU census: one line per GPU, MIG devices indented below::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-63d1e50a-...)
      MIG 1g.10gb     Device  0: (UUID: MIG-4d0efb7d-...)

Drivers before R470 printed MIG UUIDs as ``MIG-GPU-<uuid>/<gi>/<ci>``; both parse.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import Unparseable, reads_whole_lines, unparseable
from gpuconf.facts.nvidia.failure import NvidiaSmiFailure, detect_nvidia_smi_failure, is_fatal


@dataclass(frozen=True)
class ListedMigDevice:
    """One MIG device line of ``nvidia-smi -L``: profile (``1g.10gb``), index, UUID."""

    profile: str
    index: int
    uuid: str


@dataclass(frozen=True)
class ListedGpu:
    """One ``GPU n:`` line of ``nvidia-smi -L`` with the MIG devices listed under it."""

    index: int
    name: str
    uuid: str | None
    mig_devices: tuple[ListedMigDevice, ...] = ()


@dataclass(frozen=True)
class GpuList:
    """The result of ``nvidia-smi -L``.

    ``failure`` is set when nvidia-smi reported an error (then ``gpus`` is empty);
    ``problems`` lists lines that matched neither format (a truncated last line, noise).
    """

    gpus: tuple[ListedGpu, ...]
    failure: NvidiaSmiFailure | None = None
    problems: tuple[str, ...] = ()
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common

    @property
    def names(self) -> tuple[str, ...]:
        """Model names in index order, e.g. for "8x NVIDIA H100 80GB HBM3" checks."""
        return tuple(gpu.name for gpu in self.gpus)


_GPU_LINE = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?\s*$")
_MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)\s*$")


@reads_whole_lines
def parse_gpu_list(text: str) -> GpuList:
    """Parse ``nvidia-smi -L``. Never raises; see :class:`GpuList` for partial results."""
    failure = detect_nvidia_smi_failure(text)
    if is_fatal(failure):
        return GpuList(gpus=(), failure=failure)
    gpus: list[ListedGpu] = []
    migs: list[ListedMigDevice] = []
    problems: list[str] = []

    def flush() -> None:
        if gpus and migs:
            last = gpus.pop()
            gpus.append(ListedGpu(last.index, last.name, last.uuid, tuple(migs)))
        migs.clear()

    for line in text.splitlines():
        if not line.strip():
            continue
        gpu = _GPU_LINE.match(line)
        if gpu:
            flush()
            gpus.append(ListedGpu(int(gpu.group(1)), gpu.group(2).strip(), gpu.group(3)))
            continue
        mig = _MIG_LINE.match(line)
        if mig and gpus:
            migs.append(ListedMigDevice(mig.group(1), int(mig.group(2)), mig.group(3)))
            continue
        problems.append(line)
    flush()
    return GpuList(gpus=tuple(gpus), failure=failure, problems=tuple(problems))


@dataclass(frozen=True)
class NvidiaSmiVersion:
    """``nvidia-smi --version``: versions of the tool, NVML, the driver and CUDA."""

    nvidia_smi: str | None
    nvml: str | None
    driver: str | None
    cuda: str | None


@reads_whole_lines
def parse_nvidia_smi_version(text: str) -> NvidiaSmiVersion | NvidiaSmiFailure | Unparseable:
    """Parse ``nvidia-smi --version`` (``NVIDIA-SMI version  : 590.48.01`` lines).

    Returns the failure when nvidia-smi could not talk to the driver, and
    :class:`Unparseable` when no version line is present.
    """
    failure = detect_nvidia_smi_failure(text)
    if failure is not None:
        return failure
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip().lower()] = value.strip()
    result = NvidiaSmiVersion(
        nvidia_smi=values.get("nvidia-smi version"),
        nvml=values.get("nvml version"),
        driver=values.get("driver version"),
        cuda=values.get("cuda version"),
    )
    if result == NvidiaSmiVersion(None, None, None, None):
        return unparseable("expected 'NVIDIA-SMI version : X' lines", text)
    return result
