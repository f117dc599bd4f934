"""InfiniBand / RoCE facts: ``ibstat``, ``ibstatus``, ``ibv_devinfo [-v|-l]``, the
``/sys/class/infiniband`` files, and carrier flaps in syslog.

Why several sources: sysfs cannot hang and is preferred by the health probes; ibstat
is what operators paste; ibv_devinfo is all a container may have. All agree on port
state names once normalised: ``ACTIVE``, ``DOWN``, ``INIT``, ``ARMED``; physical
states ``LinkUp``, ``Disabled``, ``Polling``.

Format notes: indentation is tabs or spaces depending on the build, and copy/paste;
``ibwarn:`` debug lines and the ``ibpanic:`` line that ibstat prints when a device
vanishes mid-listing are reported in ``problems``, with ``complete=False`` on panic.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import float_value, int_value, reads_whole_lines
from gpuconf.facts.infiniband_sysfs import (
    CarrierEvent,
    IbRate,
    NumberedState,
    SysfsIbDevice,
    SysfsPort,
    parse_carrier_events,
    parse_numbered_state,
    parse_rate,
    parse_sysfs_infiniband_files,
    parse_sysfs_value,
    sysfs_port,
)
from gpuconf.facts.infiniband_verbs import (
    IbstatusPort,
    IbvDevice,
    IbvDevinfo,
    IbvPort,
    parse_ibstatus,
    parse_ibv_devinfo,
    parse_ibv_devinfo_list,
)


@dataclass(frozen=True)
class IbPort:
    """A port as ibstat prints it. ``state`` is upper case (``ACTIVE``), ``rate_gbps`` the
    ``Rate:`` number. ``complete`` is False when the block was cut before ``Link layer``."""

    number: int
    state: str | None = None
    physical_state: str | None = None
    rate_gbps: float | None = None
    base_lid: int | None = None
    lmc: int | None = None
    sm_lid: int | None = None
    capability_mask: str | None = None
    port_guid: str | None = None
    link_layer: str | None = None
    complete: bool = True


@dataclass(frozen=True)
class IbCa:
    """A channel adapter (``CA 'mlx5_0'``) and its ports."""

    name: str
    ca_type: str | None = None
    number_of_ports: int | None = None
    firmware_version: str | None = None
    hardware_version: str | None = None
    node_guid: str | None = None
    system_image_guid: str | None = None
    ports: tuple[IbPort, ...] = ()


@dataclass(frozen=True)
class Ibstat:
    """``ibstat`` output; ``complete`` is False after an ``ibpanic:`` line."""

    cas: tuple[IbCa, ...]
    complete: bool = True
    problems: tuple[str, ...] = ()


_CA_KEYS = {
    "ca type": "ca_type", "number of ports": "number_of_ports",
    "firmware version": "firmware_version", "hardware version": "hardware_version",
    "node guid": "node_guid", "system image guid": "system_image_guid",
}
_PORT_KEYS = {
    "state": "state", "physical state": "physical_state", "rate": "rate_gbps",
    "base lid": "base_lid", "lmc": "lmc", "sm lid": "sm_lid",
    "capability mask": "capability_mask", "port guid": "port_guid", "link layer": "link_layer",
}


@reads_whole_lines
def parse_ibstat(text: str) -> Ibstat:
    """Parse ``ibstat`` (all CAs). Never raises."""
    cas: list[IbCa] = []
    problems: list[str] = []
    complete = True
    ca: tuple[str, dict[str, str], list[IbPort]] | None = None   # its name, its lines by field, its ports
    port: tuple[int, dict[str, str]] | None = None                # its number, its lines by field

    def close_port() -> None:
        nonlocal port
        if ca is not None and port is not None:
            ca[2].append(_ib_port(*port))
        port = None

    def close_ca() -> None:
        nonlocal ca
        close_port()
        if ca is not None:
            name, fields, ports = ca
            cas.append(IbCa(name, fields.get("ca_type"), int_value(fields.get("number_of_ports")),
                            fields.get("firmware_version"), fields.get("hardware_version"), fields.get("node_guid"),
                            fields.get("system_image_guid"), tuple(ports)))
        ca = None

    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(("ibwarn:", "ibpanic:", "ibstat:")):
            problems.append(stripped)
            complete = complete and not stripped.startswith("ibpanic:")
            continue
        if match := re.match(r"^CA '([^']+)'", stripped):
            close_ca()
            ca = (match.group(1), {}, [])
            continue
        if match := re.match(r"^Port (\d+):$", stripped):
            close_port()
            port = (int(match.group(1)), {})
            continue
        key, sep, value = stripped.partition(":")
        key = key.strip().lower()
        if sep and ca is not None and port is not None and key in _PORT_KEYS:
            port[1][_PORT_KEYS[key]] = value.strip()
        elif sep and ca is not None and key in _CA_KEYS:
            ca[1][_CA_KEYS[key]] = value.strip()
        else:
            problems.append(stripped)
    close_ca()
    # a port cut before its last line (Link layer) or a CA with fewer ports than it says is not all of it
    cut = any(not p.complete for c in cas for p in c.ports) or any(
        c.number_of_ports is not None and len(c.ports) < c.number_of_ports for c in cas)
    return Ibstat(tuple(cas), complete and not cut, tuple(problems))


def _ib_port(number: int, values: dict[str, str]) -> IbPort:
    state = values.get("state")
    return IbPort(
        number=number,
        state=state.upper() if state else None,
        physical_state=values.get("physical_state"),
        rate_gbps=float_value(values.get("rate_gbps")),
        base_lid=int_value(values.get("base_lid")),
        lmc=int_value(values.get("lmc")),
        sm_lid=int_value(values.get("sm_lid")),
        capability_mask=values.get("capability_mask"),
        port_guid=values.get("port_guid"),
        link_layer=values.get("link_layer"),
        complete="link_layer" in values,
    )


__all__ = [
    "CarrierEvent", "IbCa", "IbPort", "IbRate", "Ibstat", "IbstatusPort", "IbvDevice",
    "IbvDevinfo", "IbvPort", "NumberedState", "SysfsIbDevice", "SysfsPort", "parse_carrier_events",
    "parse_ibstat", "parse_ibstatus", "parse_ibv_devinfo", "parse_ibv_devinfo_list",
    "parse_numbered_state", "parse_rate", "parse_sysfs_infiniband_files", "parse_sysfs_value",
    "sysfs_port",
]
