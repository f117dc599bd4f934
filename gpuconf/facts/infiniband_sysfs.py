"""``/sys/class/infiniband`` values and netdev carrier flaps; part of
:mod:`gpuconf.facts.infiniband` (import from there).

sysfs is the probe of choice: reading it cannot hang. Values are one line, and the
stored captures may lack the trailing newline; both are accepted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class IbRate:
    """A sysfs/ibstatus rate: ``200 Gb/sec (4X HDR)`` -> 200.0, ``4X``, ``HDR``."""

    gbps: float
    width: str | None
    speed: str | None


def parse_rate(text: str) -> IbRate | None:
    """Parse ``/sys/class/infiniband/*/ports/*/rate`` or an ibstatus ``rate:`` value."""
    match = re.match(r"^\s*([\d.]+)\s*Gb/sec(?:\s*\((\S+)\s*(\S+)?\))?", text)
    if not match:
        return None
    return IbRate(float(match.group(1)), match.group(2), match.group(3))


@dataclass(frozen=True)
class NumberedState:
    """A sysfs ``state``/``phys_state`` value: ``4: ACTIVE`` -> code 4, name ``ACTIVE``."""

    code: int | None
    name: str


def parse_numbered_state(text: str) -> NumberedState | None:
    """Parse ``4: ACTIVE`` / ``5: LinkUp`` (also a bare ``ACTIVE``); None for empty text."""
    stripped = text.strip()
    if not stripped:
        return None
    code, sep, name = stripped.partition(":")
    if sep and code.strip().isdigit():
        return NumberedState(int(code), name.strip())
    return NumberedState(None, stripped)


def parse_sysfs_value(text: str) -> str | None:
    """A one-line sysfs attribute (``fw_ver``, ``board_id``, ``hca_type``, ``link_layer``)
    stripped of its newline; None when empty (files may lack the final newline)."""
    stripped = text.strip()
    return stripped or None


@dataclass(frozen=True)
class SysfsPort:
    """A port assembled from ``/sys/class/infiniband/DEV/ports/N/{state,phys_state,rate,link_layer}``."""

    device: str
    port: int
    state: NumberedState | None
    physical_state: NumberedState | None
    rate: IbRate | None
    link_layer: str | None

    @property
    def active(self) -> bool:
        """Port state ACTIVE and physical state LinkUp."""
        return (self.state is not None and self.state.name.upper() == "ACTIVE"
                and self.physical_state is not None and self.physical_state.name == "LinkUp")


def sysfs_port(device: str, port: int, state: str = "", phys_state: str = "", rate: str = "",
               link_layer: str = "") -> SysfsPort:
    """Build a :class:`SysfsPort` from the contents of the four sysfs files."""
    return SysfsPort(device, port, parse_numbered_state(state), parse_numbered_state(phys_state),
                     parse_rate(rate), parse_sysfs_value(link_layer))


@dataclass(frozen=True)
class CarrierEvent:
    """A link going down or up, from syslog/journal (``ib6: lost carrier``)."""

    timestamp: str | None
    interface: str
    up: bool
    line: str


_CARRIER = re.compile(r"\b(?P<iface>[\w.@-]+): (?P<event>lost carrier|gained carrier)\b", re.I)
_SYSLOG_STAMP = re.compile(r"^(\w{3} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\S+)")


def parse_carrier_events(text: str) -> tuple[CarrierEvent, ...]:
    """Carrier changes in syslog / ``journalctl`` text, in order (for link-flap counts)."""
    events: list[CarrierEvent] = []
    for line in text.splitlines():
        match = _CARRIER.search(line)
        if match:
            stamp = _SYSLOG_STAMP.match(line)
            events.append(
                CarrierEvent(
                    timestamp=stamp.group(1) if stamp else None,
                    interface=match.group("iface"),
                    up=match.group("event").lower() == "gained carrier",
                    line=line.strip(),
                )
            )
    return tuple(events)


@dataclass(frozen=True)
class SysfsIbDevice:
    """One ``/sys/class/infiniband/DEV`` directory, read in one batch."""

    name: str
    fw_ver: str | None
    board_id: str | None
    hca_type: str | None
    ports: tuple[SysfsPort, ...]


_PORT_FILE = re.compile(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/(\w+)$")
_DEVICE_FILE = re.compile(r"^/sys/class/infiniband/([^/]+)/(\w+)$")


def parse_sysfs_infiniband_files(files: dict[str, str]) -> tuple[SysfsIbDevice, ...]:
    """Devices and ports from the files of /sys/class/infiniband/*/{fw_ver,board_id,hca_type}
    and /sys/class/infiniband/*/ports/*/{state,phys_state,rate,link_layer}, path -> text (a
    `file_glob` read: every file in one round trip). Devices and ports come out sorted by name."""
    devices: dict[str, dict[str, str]] = {}
    ports: dict[tuple[str, int], dict[str, str]] = {}
    for path, value in files.items():
        value = value.strip()
        if match := _PORT_FILE.match(path):
            device, number, name = match.groups()
            devices.setdefault(device, {})
            ports.setdefault((device, int(number)), {})[name] = value
        elif match := _DEVICE_FILE.match(path):
            device, name = match.groups()
            devices.setdefault(device, {})[name] = value
    return tuple(
        SysfsIbDevice(
            name=device,
            fw_ver=parse_sysfs_value(values.get("fw_ver", "")),
            board_id=parse_sysfs_value(values.get("board_id", "")),
            hca_type=parse_sysfs_value(values.get("hca_type", "")),
            ports=tuple(
                sysfs_port(device, number, cells.get("state", ""), cells.get("phys_state", ""),
                           cells.get("rate", ""), cells.get("link_layer", ""))
                for (dev, number), cells in sorted(ports.items()) if dev == device
            ),
        )
        for device, values in sorted(devices.items())
    )
