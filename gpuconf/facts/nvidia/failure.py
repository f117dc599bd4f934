"""Recognise the ways ``nvidia-smi`` fails instead of printing data.

Every nvidia-smi parser checks this first, so that a dead driver becomes a typed
result (``driver_not_loaded``, ``driver_library_mismatch``, ...) rather than an empty
GPU list that a health check would misread as "0 GPUs".

Known messages (real captures in ``fixtures/real/nvidia-smi/failure-*``)::

    NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure ...
    Failed to initialize NVML: Driver/library version mismatch
    NVML library version: 580.178
    No devices were found
    Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system ...
    Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error

The last two are *partial* failures (:data:`PARTIAL_FAILURE_KINDS`): nvidia-smi goes on
to report the other GPUs, so the parsers keep parsing and attach the failure.

Copy/paste artefacts (curly apostrophes, the message wrapped over two lines) are
tolerated: the text is normalised before matching.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import normalise_quotes, reads_whole_lines

DRIVER_NOT_LOADED = "driver_not_loaded"
DRIVER_UNRESPONSIVE = "driver_unresponsive"  # nvidia-smi hung and was killed at its timeout
DRIVER_LIBRARY_MISMATCH = "driver_library_mismatch"
NO_DEVICES = "no_devices"
GPU_LOST = "gpu_lost"
INSUFFICIENT_PERMISSIONS = "insufficient_permissions"
NVML_INIT_FAILED = "nvml_init_failed"

# Failures after which nvidia-smi still prints data for the GPUs it can reach.
PARTIAL_FAILURE_KINDS = (GPU_LOST,)

FAILURE_KINDS = (
    DRIVER_NOT_LOADED,
    DRIVER_LIBRARY_MISMATCH,
    NO_DEVICES,
    GPU_LOST,
    INSUFFICIENT_PERMISSIONS,
    NVML_INIT_FAILED,
)


@dataclass(frozen=True)
class NvidiaSmiFailure:
    """nvidia-smi ran but reported an error instead of data.

    ``kind`` is one of :data:`FAILURE_KINDS`; ``message`` is the first error line as
    printed; ``nvml_library_version`` is set for a driver/library mismatch (the version
    of the user-space library, the kernel module being the other side); ``bus_id`` is
    set for a lost GPU (``gpu_lost``: "GPU is lost" or no device handle).
    """

    kind: str
    message: str
    nvml_library_version: str | None = None
    bus_id: str | None = None


_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (DRIVER_LIBRARY_MISMATCH, re.compile(r"driver/library version mismatch", re.I)),
    (DRIVER_NOT_LOADED, re.compile(r"couldn'?t communicate with the nvidia driver", re.I)),
    (GPU_LOST, re.compile(r"gpu is lost|unable to determine the device handle for gpu", re.I)),
    (NO_DEVICES, re.compile(r"^no devices were found", re.I | re.M)),
    (INSUFFICIENT_PERMISSIONS, re.compile(r"insufficient permissions", re.I)),
    (NVML_INIT_FAILED, re.compile(r"failed to initialize nvml", re.I)),
)


@reads_whole_lines
def detect_nvidia_smi_failure(text: str) -> NvidiaSmiFailure | None:
    """Return the failure nvidia-smi reported in ``text``, or None if it printed data.

    Only the start of the output is inspected (failures are short): a long ``-q`` dump
    that happens to mention "GPU is lost" in a process name is not a failure.
    """
    head = normalise_quotes(text.strip()[:2000])
    if not head:
        return None
    # A data dump starts with its banner, a table border, "GPU n:" or a CSV header.
    if re.match(r"(=+NVSMI LOG=+|<\?xml|\+-|GPU \d+:|Timestamp\b)", head):
        return None
    if re.match(r"unable to determine the device handle", head, re.I):
        head = head.splitlines()[0]  # a lost GPU, then the others' data: judge that line only
    flat = re.sub(r"\s+", " ", head)
    for kind, pattern in _PATTERNS:
        if pattern.search(flat if kind != NO_DEVICES else head):
            first_line = head.splitlines()[0].strip()
            library = re.search(r"NVML library version:\s*(\S+)", head)
            bus = re.search(r"device handle for GPU\s*([0-9A-Fa-f]+:[0-9A-Fa-f:.]+)", head)
            return NvidiaSmiFailure(
                kind=kind,
                message=first_line,
                nvml_library_version=library.group(1) if library else None,
                bus_id=bus.group(1).rstrip(":.") if bus else None,
            )
    return None


def is_fatal(failure: NvidiaSmiFailure | None) -> bool:
    """True when nvidia-smi printed no usable data (every kind but the partial ones)."""
    return failure is not None and failure.kind not in PARTIAL_FAILURE_KINDS
