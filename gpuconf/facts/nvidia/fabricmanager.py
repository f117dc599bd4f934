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
* both formats, read by one state machine: the log file's start banner (``Fabric Manager version X
  is running``) and the journal's, which never prints the banner: systemd's ``Starting NVIDIA
  fabric manager service...`` and ``Stopping ...``, the start script's ``Detected ... system`` and
  ``... failed! Exit code: N`` (nvidia/nvtrust issue 128's journal: configured with no banner);
* the start-up refusals, by name (:class:`FabricManagerRefusal`), from real lines: ``ib_umad``
  not loaded (the NVL5 precheck's ``Kernel module "ib_umad" has not been loaded, fabric manager
  cannot be started``, spectrocloud/CanvOS PR 700, or nvlsm's ``is ib_umad module loaded?``,
  siderolabs/docs PR 581), ``NV_WARN_NOTHING_TO_DO`` (on NVL5 the NVLink Subnet Manager is not
  running, fabric manager user guide as quoted in siderolabs/extensions PR 717; before NVL5 there
  is no NVSwitch, data-infra/cube-studio issue 29), the driver-interface version mismatch, and a
  config item with an invalid value (``fabric manager config file item: FABRIC_NODE_CONFIG_FILE has
  an invalid value``, siderolabs/extensions issue 511; the item is the refusal's ``detail``). The
  list is open: a start that failed for a reason none of these names is ``refused``, with the
  error line that came before the failure (or the failure line itself).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypedDict

from gpuconf.facts.common import canonical_pci_address, normalise_quotes, reads_whole_lines

CONFIGURED = "configured"            # the last start routed all NVSwitches
STARTED = "started"                  # the last start is logged but did not finish
VERSION_MISMATCH = "version_mismatch"
FAILED = "failed"                    # the last start was refused or exited with an error (see `refusal`)
STOPPED = "stopped"                  # the service was stopped after its last start
UNKNOWN = "unknown"                  # no start, stop, failure or mismatch in the text

# why a start was refused (FabricManagerRefusal.name)
IB_UMAD_NOT_LOADED = "ib_umad_not_loaded"        # NVL5: the precheck, or nvlsm, found no ib_umad
NVLINK_SM_NOT_RUNNING = "nvlink_sm_not_running"  # NVL5: NV_WARN_NOTHING_TO_DO, nvlsm not serving FM
NO_NVSWITCH = "no_nvswitch"                      # before NVL5: NV_WARN_NOTHING_TO_DO, nothing to route
NOTHING_TO_DO = "nothing_to_do"                  # NV_WARN_NOTHING_TO_DO with no precheck line to tell which
REFUSED_VERSION = "version_mismatch"             # FM's driver-interface version is not the driver's
CONFIG_INVALID = "config_invalid"                # a config file item has an invalid value (detail: the item)
REFUSED = "refused"                              # any other failed start: the line names why


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
    ``nvlink_sm_not_running``, ``no_nvswitch``, ``nothing_to_do``, ``version_mismatch``,
    ``config_invalid``, or ``refused`` for any other reason) and the line that says so, as
    printed; ``detail`` is what the line names (the config item)."""

    name: str
    line: str
    detail: str | None = None


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

    ``state`` is one of ``configured``, ``started``, ``version_mismatch``, ``failed``,
    ``stopped``, ``unknown`` and describes the *last* start in the text (a later successful
    start clears an older mismatch or refusal). ``version`` is the version named by the last
    start banner (the log file's; the journal has none). ``starts`` counts banners and
    systemd's starts.
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


_SYSTEMD_START = re.compile(r"Starting (?:NVIDIA fabric manager service|nvidia-fabricmanager)", re.I)
_SYSTEMD_STOP = re.compile(r"Stopping (?:NVIDIA fabric manager service|nvidia-fabricmanager)|"
                           r'Stopped "Nvidia Fabric Manager"', re.I)
_FAILURE = re.compile(r"failed! Exit code: \d+|Control process exited, code=exited, status=\d+/FAILURE|"
                      r"Failed to start (?:NVIDIA fabric manager|nvidia-fabricmanager)", re.I)
_CONFIG_ITEM = re.compile(r"config file item: (\S+) has an invalid value", re.I)
_ERROR_LINE = re.compile(r"\[ERROR\]|\berror\b|\binvalid\b|failed to|cannot|could not", re.I)


@dataclass
class _Machine:
    """The state of the last start as the lines come, in either format."""

    state: str = UNKNOWN
    version: str | None = None
    starts: int = 0
    mismatch: FabricManagerVersionMismatch | None = None
    gpus: set[str] = field(default_factory=set)
    refusal: FabricManagerRefusal | None = None
    error_line: str = ""   # the last error-looking line of this start: an unnamed refusal names it

    def start(self, version: str | None) -> None:
        self.starts += 1
        self.state, self.mismatch, self.refusal, self.error_line, self.gpus = STARTED, None, None, "", set()
        self.version = version or self.version

    def line(self, line: str, system: str | None) -> None:
        if match := _START.search(line):
            if not (self.state == STARTED and self.version is None and not self.gpus):
                self.start(match.group(1))   # (the journal's systemd start came first: the same start)
            else:
                self.version = match.group(1)
        elif _SYSTEMD_START.search(line):
            self.start(None)
        elif match := _MISMATCH.search(line):
            self.state = VERSION_MISMATCH
            self.mismatch = FabricManagerVersionMismatch(match.group("fm"), match.group("driver"), line.strip())
            self.refusal = FabricManagerRefusal(REFUSED_VERSION, line.strip())
        elif _CONFIGURED.search(line) and self.state in (STARTED, UNKNOWN):
            self.state = CONFIGURED
        elif match := _GPU_ADDED.search(line):
            self.gpus.add(match.group(1))
        elif _SYSTEMD_STOP.search(line) and self.state != FAILED:
            self.state = STOPPED
        elif refusal := _refusal(line, system):
            self.refusal, self.state = refusal, FAILED if self.state != VERSION_MISMATCH else self.state
        elif _FAILURE.search(line):
            if self.state != VERSION_MISMATCH:
                self.state = FAILED
            if self.refusal is None:
                self.refusal = FabricManagerRefusal(REFUSED, self.error_line or line.strip())
        elif _ERROR_LINE.search(line) and not _SWITCH_ERROR.search(line):
            self.error_line = line.strip()


class _Nvl5Lines(TypedDict, total=False):
    """What the NVLink5 lines of a log said so far (`FabricManagerLog`'s fields of the same names)."""

    system: str
    nothing_to_do: bool
    exit_code: int
    usage_error: str
    management_guid: str
    nvlsm_build: str
    gpu_probes: int
    multicast_teams: int


@reads_whole_lines
def parse_fabric_manager_log(text: str) -> FabricManagerLog:
    """Summarise a fabric manager log file or its journal (one state machine knows both). Never raises."""
    machine = _Machine()
    errors: list[NvswitchError] = []
    extra = _Nvl5Lines(gpu_probes=0, multicast_teams=0)
    for line in normalise_quotes(text).splitlines():
        _nvl5(line, extra)
        machine.line(line, extra.get("system"))
        if match := _SWITCH_ERROR.search(line):
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
    return FabricManagerLog(machine.state, machine.version, machine.starts, machine.mismatch, len(machine.gpus),
                            tuple(errors), refusal=machine.refusal, **extra)


def _refusal(line: str, system: str | None) -> FabricManagerRefusal | None:
    """The named refusal one line says, if any (``system``: what the precheck detected so far)."""
    if 'Kernel module "ib_umad" has not been loaded' in line or "is ib_umad module loaded?" in line:
        return FabricManagerRefusal(IB_UMAD_NOT_LOADED, line.strip())
    if "NV_WARN_NOTHING_TO_DO" in line:
        name = {"NVL5": NVLINK_SM_NOT_RUNNING, "pre-NVL5": NO_NVSWITCH}.get(system or "", NOTHING_TO_DO)
        return FabricManagerRefusal(name, line.strip())
    if match := _CONFIG_ITEM.search(line):
        return FabricManagerRefusal(CONFIG_INVALID, line.strip(), match.group(1))
    return None


def _nvl5(line: str, found: _Nvl5Lines) -> None:
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
        found["gpu_probes"] = found.get("gpu_probes", 0) + 1
    if "successfully setup multicast team" in line:
        found["multicast_teams"] = found.get("multicast_teams", 0) + 1
    elif "successfully released multicast team" in line:
        found["multicast_teams"] = found.get("multicast_teams", 0) - 1
