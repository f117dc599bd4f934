"""Fabric manager: ``/var/log/fabricmanager.log`` and ``journalctl -u nvidia-fabricmanager``.

What matters on an NVSwitch node:

* the version mismatch that stops FM from starting after a driver upgrade::

      fabric manager NVIDIA GPU driver interface version 460.91.03 don't match with
      driver version 460.73.01. Please update with matching NVIDIA driver package.

  (tolerated: a curly ``don’t``, a journal prefix, a missing final period, a line cut
  off after ``don'`` where the driver version is then unknown);
* which version started last and whether it finished configuring the NVSwitches;
* NVSwitch errors (``detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci
  bus id 00000000:86:00.0 physical id 3 port 36``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import canonical_pci_address, normalise_quotes

CONFIGURED = "configured"            # the last start routed all NVSwitches
STARTED = "started"                  # the last start is logged but did not finish
VERSION_MISMATCH = "version_mismatch"
UNKNOWN = "unknown"                  # no start banner and no mismatch in the text


@dataclass(frozen=True)
class FabricManagerVersionMismatch:
    """FM refused to start: its driver-interface version differs from the driver's.
    ``driver_version`` is None when the line was cut off before it."""

    fabric_manager_version: str
    driver_version: str | None
    line: str


@dataclass(frozen=True)
class NvswitchError:
    """One ``detected NVSwitch (non-)fatal error`` line."""

    timestamp: str | None
    fatal: bool
    code: int
    pci_address: str | None
    physical_id: int | None
    port: int | None


@dataclass(frozen=True)
class FabricManagerLog:
    """Summary of a fabric manager log or journal.

    ``state`` is one of ``configured``, ``started``, ``version_mismatch``, ``unknown``
    and describes the *last* start in the text (a later successful start clears an
    older mismatch). ``version`` is the version named by the last start banner.
    """

    state: str
    version: str | None
    starts: int
    mismatch: FabricManagerVersionMismatch | None
    gpus_registered: int
    nvswitch_errors: tuple[NvswitchError, ...]


_MISMATCH = re.compile(
    r"driver interface version (?P<fm>\d[\d.]*\d)\s+don'?t?"
    r"(?:\s+match with driver version (?P<driver>\d[\d.]*\d))?",
    re.I,
)
_START = re.compile(r"Fabric Manager version (\S+) is running")
_CONFIGURED = re.compile(r"Successfully configured all the available NVSwitches", re.I)
_GPU_ADDED = re.compile(r"added GPU with UUID (\S+)")
_SWITCH_ERROR = re.compile(
    r"detected NVSwitch (?P<kind>non-fatal|fatal) error (?P<code>\d+)"
    r"(?: on fid \d+)? on NVSwitch pci bus id (?P<bus>\S+)"
    r"(?: physical id (?P<phys>\d+))?(?: port (?P<port>\d+))?",
    re.I,
)
_TIMESTAMP = re.compile(r"^\[(?P<ts>[^\]]+)\]")


def find_version_mismatch(text: str) -> FabricManagerVersionMismatch | None:
    """The last "driver interface version X don't match with driver version Y" in text."""
    found: FabricManagerVersionMismatch | None = None
    for line in normalise_quotes(text).splitlines():
        match = _MISMATCH.search(line)
        if match:
            found = FabricManagerVersionMismatch(match.group("fm"), match.group("driver"), line.strip())
    return found


def parse_fabric_manager_log(text: str) -> FabricManagerLog:
    """Summarise a fabric manager log (or journal excerpt). Never raises."""
    state = UNKNOWN
    version: str | None = None
    starts = 0
    mismatch: FabricManagerVersionMismatch | None = None
    gpus: set[str] = set()
    errors: list[NvswitchError] = []
    for line in normalise_quotes(text).splitlines():
        if match := _START.search(line):
            starts += 1
            version, state, mismatch, gpus = match.group(1), STARTED, None, set()
        elif match := _MISMATCH.search(line):
            state = VERSION_MISMATCH
            mismatch = FabricManagerVersionMismatch(match.group("fm"), match.group("driver"), line.strip())
        elif _CONFIGURED.search(line) and state == STARTED:
            state = CONFIGURED
        elif match := _GPU_ADDED.search(line):
            gpus.add(match.group(1))
        elif match := _SWITCH_ERROR.search(line):
            stamp = _TIMESTAMP.match(line)
            errors.append(
                NvswitchError(
                    timestamp=stamp.group("ts") if stamp else None,
                    fatal=match.group("kind").lower() == "fatal",
                    code=int(match.group("code")),
                    pci_address=canonical_pci_address(match.group("bus")),
                    physical_id=int(match.group("phys")) if match.group("phys") else None,
                    port=int(match.group("port")) if match.group("port") else None,
                )
            )
    return FabricManagerLog(state, version, starts, mismatch, len(gpus), tuple(errors))
