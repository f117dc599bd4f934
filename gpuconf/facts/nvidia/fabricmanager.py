"""Fabric manager: ``/var/log/fabricmanager.log`` and ``journalctl -u nvidia-fabricmanager``.

What matters on an NVSwitch node:

* the version mismatch that stops FM from starting after a driver upgrade::

      fabric manager NVIDIA GPU driver interface version 460.91.03 don't match with
      driver version 460.73.01. Please update with matching NVIDIA driver package.

  (tolerated: a curly ``don’t``, a journal prefix, a missing final period, a line cut
  off after ``don'`` where the driver version is then unknown);
* which version started last and whether it finished configuring the NVSwitches;
* NVSwitch errors (``detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci
  bus id 00000000:86:00.0 physical id 3 port 36``);
* on NVLink5 (HGX B200/B300) the start script's and its NVLink Subnet Manager's lines: which
  system the precheck detected (``Detected Pre-NVL5 system``, ``... for NVLink5+``), the
  NVSwitch management port GUID given to nvlsm and FM (``-g 0x...``), nvlsm's OpenSM build,
  ``NV_WARN_NOTHING_TO_DO`` (no NVSwitch: FM must not run there), the script's own usage
  error (``Unknown option: ...``), and the GPU probe requests a healthy NVL5 FM logs;
* multicast teams set up and released (IMEX / NVLS memory);
* the start-up refusals, by name (:class:`FabricManagerRefusal`), from real lines: ``ib_umad``
  not loaded (the NVL5 precheck's ``Kernel module "ib_umad" has not been loaded, fabric manager
  cannot be started``, spectrocloud/CanvOS PR 700, or nvlsm's ``is ib_umad module loaded?``,
  siderolabs/docs PR 581), ``NV_WARN_NOTHING_TO_DO`` (on NVL5 the NVLink Subnet Manager is not
  running, fabric manager user guide as quoted in siderolabs/extensions PR 717; before NVL5 there
  is no NVSwitch, data-infra/cube-studio issue 29), and the driver-interface version mismatch.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuconf.facts.common import canonical_pci_address, normalise_quotes, reads_whole_lines

CONFIGURED = "configured"            # the last start routed all NVSwitches
STARTED = "started"                  # the last start is logged but did not finish
VERSION_MISMATCH = "version_mismatch"
UNKNOWN = "unknown"                  # no start banner and no mismatch in the text

# why a start was refused (FabricManagerRefusal.name)
IB_UMAD_NOT_LOADED = "ib_umad_not_loaded"        # NVL5: the precheck, or nvlsm, found no ib_umad
NVLINK_SM_NOT_RUNNING = "nvlink_sm_not_running"  # NVL5: NV_WARN_NOTHING_TO_DO, nvlsm not serving FM
NO_NVSWITCH = "no_nvswitch"                      # before NVL5: NV_WARN_NOTHING_TO_DO, nothing to route
NOTHING_TO_DO = "nothing_to_do"                  # NV_WARN_NOTHING_TO_DO with no precheck line to tell which
REFUSED_VERSION = "version_mismatch"             # FM's driver-interface version is not the driver's


@dataclass(frozen=True)
class FabricManagerVersionMismatch:
    """FM refused to start: its driver-interface version differs from the driver's.
    ``driver_version`` is None when the line was cut off before it."""

    fabric_manager_version: str
    driver_version: str | None
    line: str


@dataclass(frozen=True)
class FabricManagerRefusal:
    """Why the last start of fabric manager was refused: ``name`` (``ib_umad_not_loaded``,
    ``nvlink_sm_not_running``, ``no_nvswitch``, ``nothing_to_do``, ``version_mismatch``) and
    the line that says so, as printed."""

    name: str
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
    system: str | None = None            # "NVL5" or "pre-NVL5", as the start script detected it
    nothing_to_do: bool = False          # NV_WARN_NOTHING_TO_DO: no NVSwitch to manage
    exit_code: int | None = None         # the start script's "... failed! Exit code: N"
    usage_error: str | None = None       # the start script's "Unknown option: ..."
    management_guid: str | None = None   # the NVSwitch port GUID nvlsm and FM were given
    nvlsm_build: str | None = None       # "OpenSM 2025.06.5_..."
    gpu_probes: int = 0                  # "GPU probe request received" (NVL5, healthy)
    multicast_teams: int = 0             # set up minus released
    refusal: FabricManagerRefusal | None = None   # the last start's refusal; a later start clears it
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common


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
_GUID = re.compile(r"(?:management port GUID:|-g|--guid)\s+(0x[0-9a-fA-F]+)")
_OPENSM = re.compile(r"\b(OpenSM \S+)")
_EXIT = re.compile(r"failed! Exit code: (\d+)")
_UNKNOWN_OPTION = re.compile(r"Unknown option: (.+?)\s*$")


@reads_whole_lines
def find_version_mismatch(text: str) -> FabricManagerVersionMismatch | None:
    """The last "driver interface version X don't match with driver version Y" in text."""
    found: FabricManagerVersionMismatch | None = None
    for line in normalise_quotes(text).splitlines():
        match = _MISMATCH.search(line)
        if match:
            found = FabricManagerVersionMismatch(match.group("fm"), match.group("driver"), line.strip())
    return found


@reads_whole_lines
def parse_fabric_manager_log(text: str) -> FabricManagerLog:
    """Summarise a fabric manager log (or journal excerpt). Never raises."""
    state = UNKNOWN
    version: str | None = None
    starts = 0
    mismatch: FabricManagerVersionMismatch | None = None
    gpus: set[str] = set()
    errors: list[NvswitchError] = []
    extra: dict[str, Any] = {"gpu_probes": 0, "multicast_teams": 0}
    for line in normalise_quotes(text).splitlines():
        _nvl5(line, extra)
        if refusal := _refusal(line, extra.get("system")):
            extra["refusal"] = refusal
        if match := _START.search(line):
            starts += 1
            version, state, mismatch, gpus = match.group(1), STARTED, None, set()
            extra["refusal"] = None
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
    return FabricManagerLog(state, version, starts, mismatch, len(gpus), tuple(errors), **extra)


def _refusal(line: str, system: str | None) -> FabricManagerRefusal | None:
    """The refusal one line names, if any (``system``: what the precheck detected so far)."""
    if 'Kernel module "ib_umad" has not been loaded' in line or "is ib_umad module loaded?" in line:
        return FabricManagerRefusal(IB_UMAD_NOT_LOADED, line.strip())
    if "NV_WARN_NOTHING_TO_DO" in line:
        name = {"NVL5": NVLINK_SM_NOT_RUNNING, "pre-NVL5": NO_NVSWITCH}.get(system or "", NOTHING_TO_DO)
        return FabricManagerRefusal(name, line.strip())
    if _MISMATCH.search(line):
        return FabricManagerRefusal(REFUSED_VERSION, line.strip())
    return None


def _nvl5(line: str, found: dict[str, Any]) -> None:
    """The NVLink5 start script's, nvlsm's and the multicast lines of one log line."""
    if "Detected Pre-NVL5 system" in line:
        found["system"] = "pre-NVL5"
    elif "for NVLink5+" in line or "Detected NVL5" in line:
        found["system"] = "NVL5"
    if "NV_WARN_NOTHING_TO_DO" in line:
        found["nothing_to_do"] = True
    if match := _EXIT.search(line):
        found["exit_code"] = int(match.group(1))
    if match := _UNKNOWN_OPTION.search(line):
        found["usage_error"] = match.group(1)
    if (match := _GUID.search(line)) and "management_guid" not in found:
        found["management_guid"] = match.group(1).lower()
    if match := _OPENSM.search(line):
        found["nvlsm_build"] = match.group(1)
    if "GPU probe request received" in line:
        found["gpu_probes"] += 1
    if "successfully setup multicast team" in line:
        found["multicast_teams"] += 1
    elif "successfully released multicast team" in line:
        found["multicast_teams"] -= 1
