"""``ibstatus`` and ``ibv_devinfo [-v]`` / ``ibv_devinfo -l``; part of
:mod:`gpuconf.facts.infiniband` (import from there).

ibv_devinfo notes: ``hca_id:`` starts a device, ``port:`` a port; some builds print a
``Device ports:`` header; ``-v`` adds many attributes and flag lists (indented lines
without a colon) which are kept in ``attributes``/ignored; soft-RoCE (``rxe``) prints no
``board_id`` and no ``link_layer``. Lines before the first ``hca_id:`` (a pasted
excerpt) are reported in ``problems``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import int_value, reads_whole_lines
from gpuconf.facts.infiniband_sysfs import IbRate, NumberedState, parse_numbered_state, parse_rate


@dataclass(frozen=True)
class IbstatusPort:
    """One ``Infiniband device 'mlx5_0' port 1 status:`` block of ``ibstatus``."""

    device: str
    port: int
    default_gid: str | None
    base_lid: int | None
    sm_lid: int | None
    state: NumberedState | None
    physical_state: NumberedState | None
    rate: IbRate | None
    link_layer: str | None


_IBSTATUS_HEADER = re.compile(r"^Infiniband device '([^']+)' port (\d+) status:")


@reads_whole_lines
def parse_ibstatus(text: str) -> tuple[IbstatusPort, ...]:
    """Parse ``ibstatus``; lids are hex in this format (``0x33bf``)."""
    blocks: list[tuple[str, int, dict[str, str]]] = []
    for line in text.splitlines():
        header = _IBSTATUS_HEADER.match(line.strip())
        if header:
            blocks.append((header.group(1), int(header.group(2)), {}))
            continue
        key, sep, value = line.strip().partition(":")
        if sep and blocks:
            blocks[-1][2][key.strip().lower()] = value.strip()
    return tuple(
        IbstatusPort(
            device=device,
            port=port,
            default_gid=values.get("default gid"),
            base_lid=int_value(values.get("base lid")),
            sm_lid=int_value(values.get("sm lid")),
            state=parse_numbered_state(values.get("state", "")),
            physical_state=parse_numbered_state(values.get("phys state", "")),
            rate=parse_rate(values.get("rate", "")),
            link_layer=values.get("link_layer"),
        )
        for device, port, values in blocks
    )


@dataclass(frozen=True)
class IbvPort:
    """An ibv_devinfo port: ``state`` is ``PORT_ACTIVE``, ``state_code`` its number."""

    number: int
    state: str | None
    state_code: int | None
    max_mtu: int | None
    active_mtu: int | None
    sm_lid: int | None
    port_lid: int | None
    link_layer: str | None

    @property
    def active(self) -> bool:
        """True when the port state is PORT_ACTIVE."""
        return self.state == "PORT_ACTIVE"


@dataclass(frozen=True)
class IbvDevice:
    """An ``hca_id:`` block; ``attributes`` holds every other ``key: value`` of the device."""

    hca_id: str
    transport: str | None
    fw_ver: str | None
    node_guid: str | None
    vendor_part_id: str | None
    board_id: str | None
    phys_port_cnt: int | None
    ports: tuple[IbvPort, ...]
    attributes: dict[str, str]


@dataclass(frozen=True)
class IbvDevinfo:
    """All devices of ``ibv_devinfo``; ``problems`` lists lines outside any device."""

    devices: tuple[IbvDevice, ...]
    problems: tuple[str, ...] = ()
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common

    @property
    def all_ports_active(self) -> bool:
        """Every port of every device is PORT_ACTIVE, and there is at least one: no device,
        or a device with no port, is not "all active"."""
        return bool(self.devices) and all(d.ports and all(p.active for p in d.ports) for d in self.devices)


def _port(number: int, values: dict[str, str]) -> IbvPort:
    state = re.match(r"^(\S+)\s*(?:\((\d+)\))?", values.get("state", ""))
    return IbvPort(
        number=number,
        state=state.group(1) if state else None,
        state_code=int(state.group(2)) if state and state.group(2) else None,
        max_mtu=int_value((values.get("max_mtu") or "").split(" ")[0] or None),
        active_mtu=int_value((values.get("active_mtu") or "").split(" ")[0] or None),
        sm_lid=int_value(values.get("sm_lid")),
        port_lid=int_value(values.get("port_lid")),
        link_layer=values.get("link_layer"),
    )


@reads_whole_lines
def parse_ibv_devinfo(text: str) -> IbvDevinfo:
    """Parse ``ibv_devinfo`` or ``ibv_devinfo -v``. Never raises."""
    devices: list[tuple[str, dict[str, str], list[tuple[int, dict[str, str]]]]] = []
    problems: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped == "Device ports:":
            continue
        key, sep, value = stripped.partition(":")
        key, value = key.strip(), value.strip()
        if sep and key == "hca_id":
            devices.append((value, {}, []))
        elif not devices:
            problems.append(stripped)
        elif sep and key == "port" and value.isdigit():
            devices[-1][2].append((int(value), {}))
        elif sep and devices[-1][2]:
            devices[-1][2][-1][1][key] = value
        elif sep:
            devices[-1][1][key] = value
        # lines without a colon are -v flag lists (BAD_PKEY_CNTR, ...): not facts
    return IbvDevinfo(
        devices=tuple(
            IbvDevice(
                hca_id=hca,
                transport=attrs.get("transport"),
                fw_ver=attrs.get("fw_ver"),
                node_guid=attrs.get("node_guid"),
                vendor_part_id=attrs.get("vendor_part_id"),
                board_id=attrs.get("board_id"),
                phys_port_cnt=int_value(attrs.get("phys_port_cnt")),
                ports=tuple(_port(number, values) for number, values in ports),
                attributes=attrs,
            )
            for hca, attrs, ports in devices
        ),
        problems=tuple(problems),
        incomplete=_cut_devices(devices),
    )


def _cut_devices(devices: list[tuple[str, dict[str, str], list[tuple[int, dict[str, str]]]]]) -> str:
    """Why a listing is not whole: a device with fewer ports than phys_port_cnt, or a port
    without its state line."""
    for hca, attrs, ports in devices:
        expected = int_value(attrs.get("phys_port_cnt"))
        if expected is not None and len(ports) < expected:
            return f"{hca}: {len(ports)} of its {expected} ports listed"
        if any("state" not in values for _, values in ports):
            return f"{hca}: a port without its state line"
    return ""


@reads_whole_lines
def parse_ibv_devinfo_list(text: str) -> tuple[str, ...]:
    """Parse ``ibv_devinfo -l``: the device names under ``N HCAs found:``."""
    names: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not re.match(r"^\d+ HCAs? found:?$", stripped):
            names.append(stripped)
    return tuple(names)
