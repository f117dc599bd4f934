"""IMEX, the multi-node NVLink daemon of GB200/GB300 racks: ``nvidia-imex-ctl -N``, its log,
and the IMEX channel devices' major number in ``/proc/devices``.

``nvidia-imex-ctl -N`` (the domain status)::

    Nodes:
    Node #0   - 10.136.206.47   - READY
    Node #1   - 10.136.206.48   - READY                 (newer: "- Version: 580.65.06")

     Nodes From\\To  0  1
           0        C  C
           1        C  C
    Domain State: UP

Connectivity letters: C connected, N never, R recovering, D disconnected, A
authenticating, I invalid; ``!V!`` a version mismatch, ``!M!`` a node-map mismatch. The
``Domain State`` line comes last: output without it was cut short (``complete=False``).

The daemon's log says whether its library matched the driver
(``NvGpu Library version matched with GPU Driver version``) and which node it is.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import reads_whole_lines

_NODE = re.compile(r"^Node #(\d+)\s+-\s+(\S+)\s+-\s+(\S+)(?:\s+-\s+Version:\s*(\S+))?\s*$")
_MATRIX_HEAD = re.compile(r"^\s*Nodes From\\To((?:\s+\d+)+)\s*$")
_MATRIX_ROW = re.compile(r"^\s*(\d+)\s+((?:\S+\s*)+)$")
_DOMAIN = re.compile(r"^Domain State:\s*(\S+)")


@dataclass(frozen=True)
class ImexNode:
    index: int
    address: str
    state: str  # READY, ...
    version: str | None = None


@dataclass(frozen=True)
class ImexDomain:
    nodes: tuple[ImexNode, ...]
    connectivity: dict[tuple[int, int], str]  # (from, to) -> C, N, R, D, A, I, !V!, !M!
    state: str | None  # UP, DOWN, DEGRADED; None when the output was cut before it
    complete: bool

    def unconnected(self) -> list[tuple[int, int, str]]:
        return [(a, b, s) for (a, b), s in sorted(self.connectivity.items()) if s != "C"]


@reads_whole_lines
def parse_imex_ctl_nodes(text: str) -> ImexDomain:
    nodes, connectivity, columns, state = [], {}, [], None
    for line in text.splitlines():
        if match := _NODE.match(line.strip()):
            nodes.append(ImexNode(int(match[1]), match[2], match[3], match[4]))
        elif match := _MATRIX_HEAD.match(line):
            columns = [int(c) for c in match[1].split()]
        elif columns and (match := _MATRIX_ROW.match(line)):
            cells = match[2].split()
            if len(cells) == len(columns):
                for column, cell in zip(columns, cells, strict=True):
                    connectivity[(int(match[1]), column)] = cell
        elif match := _DOMAIN.match(line.strip()):
            state = match[1]
    complete = state is not None and len(connectivity) == len(nodes) ** 2
    return ImexDomain(tuple(nodes), connectivity, state, complete)


@dataclass(frozen=True)
class ImexLog:
    version: str | None
    node_id: int | None
    bind_ip: str | None
    driver_matched: bool  # "NvGpu Library version matched with GPU Driver version"
    peers: int | None
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common


@reads_whole_lines
def parse_imex_log(text: str) -> ImexLog:
    version = re.search(r"IMEX version (\S+) is running", text)
    node = re.search(r"Identified this node as ID (\d+), using bind IP of '([^']*)'", text)
    peers = re.search(r"nPeers = (\d+)", text)
    return ImexLog(version[1] if version else None, int(node[1]) if node else None, node[2] if node else None,
                   "NvGpu Library version matched with GPU Driver version" in text, int(peers[1]) if peers else None)


@reads_whole_lines
def parse_proc_devices(text: str) -> dict[str, int]:
    """Character and block device majors by name (``234 nvidia-caps-imex-channels``)."""
    majors = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            majors[parts[1]] = int(parts[0])
    return majors
