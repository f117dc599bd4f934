"""``nvidia-smi -r`` (``--gpu-reset``): which GPUs it reset and which it refused, and why.

Two wordings of the refusal, from real outputs::

    GPU 00000000:C1:00.0 is currently in use by another process.          (older drivers)

    The following GPUs could not be reset:                                 (newer drivers)
      GPU 00000000:1A:00.0: In use by another client

both followed by "1 device is currently being used by one or more other processes (e.g., Fabric
Manager, CUDA application, ...)"; a success is ``GPU 00000000:C1:00.0 was successfully reset.``.
A refusal because a process holds the GPU is ``in_use``, whichever wording says it: the caller
stops the holders or falls back to a reboot (gpuconf/remediate/reset.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import canonical_pci_address, reads_whole_lines

IN_USE = "in use"


@dataclass(frozen=True)
class GpuResetReport:
    """``reset``: the GPUs reset (canonical PCI addresses); ``refused``: (address, the tool's reason)
    of each GPU it would not reset; ``in_use``: a refusal says a process holds a GPU."""

    reset: tuple[str, ...] = ()
    refused: tuple[tuple[str | None, str], ...] = ()
    in_use: bool = False
    incomplete: str = ""


_RESET = re.compile(r"^GPU (\S+) was successfully reset\.?\s*$")
_OLD_IN_USE = re.compile(r"^GPU (\S+) is currently in use by another process\.?\s*$", re.I)
_LISTED = re.compile(r"^\s*GPU (\S+): (.+?)\s*$")
_BUSY = re.compile(r"being used by one or more other processes|in use by another (?:client|process)", re.I)


@reads_whole_lines
def parse_gpu_reset(text: str) -> GpuResetReport:
    """What ``nvidia-smi -r`` printed (either wording of a refusal)."""
    reset: list[str] = []
    refused: list[tuple[str | None, str]] = []
    listing = False
    for line in text.splitlines():
        if match := _RESET.match(line):
            reset.append(canonical_pci_address(match.group(1)) or match.group(1))
        elif match := _OLD_IN_USE.match(line):
            refused.append((canonical_pci_address(match.group(1)), "in use by another process"))
        elif line.startswith("The following GPUs could not be reset"):
            listing = True
        elif listing and (match := _LISTED.match(line)):
            refused.append((canonical_pci_address(match.group(1)), match.group(2)))
        elif not line.strip():
            listing = False
    in_use = any(_BUSY.search(reason) for _, reason in refused) or bool(_BUSY.search(text) and refused)
    return GpuResetReport(tuple(reset), tuple(refused), in_use)
