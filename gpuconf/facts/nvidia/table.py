"""The default ``nvidia-smi`` table: versions, one block per GPU, MIG devices, processes.

Prefer ``-q`` or ``--query-gpu`` for facts; this parser exists because the table is
what people paste and what old tooling captures. Format notes:

* Three layouts: 79 columns (up to 525), 89 (530-575), 89 with a ``+---+`` third border
  (580+). Parsing is by regex on each GPU's two data lines, not by column offsets.
* Long names are cut with ``...`` (``NVIDIA GeForce ...``): ``name_truncated`` says so.
* Cells show ``N/A`` or ``ERR!`` (a failed fan sensor) -> None.
* The first line is a timestamp, absent from some captures (Python literals).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import (
    bool_value,
    canonical_pci_address,
    int_value,
    number_value,
    reads_whole_lines,
    text_value,
)
from gpuconf.facts.nvidia.failure import NvidiaSmiFailure, detect_nvidia_smi_failure, is_fatal


@dataclass(frozen=True)
class TableGpu:
    """One GPU block of the table. ``pci_address`` is the canonical sysfs spelling."""

    index: int
    name: str
    name_truncated: bool
    persistence_mode: bool | None
    bus_id: str
    pci_address: str | None
    display_active: str | None
    volatile_uncorrected_ecc: int | None
    ecc_cell: str
    fan_percent: int | None
    temperature_c: int | None
    performance_state: str | None
    power_draw_w: float | None
    power_cap_w: float | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_percent: int | None
    compute_mode: str | None
    mig_mode: str | None


@dataclass(frozen=True)
class TableMigDevice:
    """A row of the "MIG devices" block."""

    gpu_index: int
    gpu_instance_id: int
    compute_instance_id: int
    mig_index: int
    memory_used_mib: int | None
    memory_total_mib: int | None
    multiprocessor_count: int | None


@dataclass(frozen=True)
class TableProcess:
    """A row of the "Processes" block (``GI``/``CI`` are None when printed ``N/A``)."""

    gpu_index: int
    gpu_instance_id: int | None
    compute_instance_id: int | None
    pid: int
    type: str
    name: str
    used_memory_mib: int | None


@dataclass(frozen=True)
class NvidiaSmiTable:
    """The parsed table. ``complete`` is False when the capture is cut short (no
    Processes block) or a GPU block's data line is unreadable; ``problems`` says which."""

    gpus: tuple[TableGpu, ...]
    mig_devices: tuple[TableMigDevice, ...] = ()
    processes: tuple[TableProcess, ...] = ()
    timestamp: str | None = None
    nvidia_smi_version: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    complete: bool = True
    failure: NvidiaSmiFailure | None = None
    problems: tuple[str, ...] = ()


_VERSIONS = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\S+)\s+Driver Version:\s+(?P<driver>\S+)(?:\s+CUDA Version:\s+(?P<cuda>\S+))?"
)
_GPU_LINE1 = re.compile(
    r"^\|\s*(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<persistence>On|Off)\s*\|\s*"
    r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+(?P<disp>\S+)\s*\|\s*(?P<ecc>\S+)\s*\|"
)
_GPU_LINE2 = re.compile(
    r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<draw>\S+)\s*/\s*(?P<cap>\S+)\s*\|\s*"
    r"(?P<used>\S+)\s*/\s*(?P<total>\S+)\s*\|\s*(?P<util>\S+)\s+(?P<compute>.+?)\s*\|"
)
_GPU_LINE3 = re.compile(r"^\|\s*\|\s*\|\s*(?P<mig>\S.*?)\s*\|$")
_MIG_ROW = re.compile(
    r"^\|\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|\s*(\S+)\s*/\s*(\S+)\s*\|\s*(\S+)\s+\S+\s*\|"
)
_PROCESS_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?P<gi>\S+)\s+(?P<ci>\S+)\s+(?P<pid>\d+)\s+(?P<type>[CGM+]+)\s+"
    r"(?P<name>.+?)\s+(?P<mem>\d+MiB|N/A)\s*\|$"
)
_TIMESTAMP = re.compile(r"^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}")


@reads_whole_lines
def parse_nvidia_smi_table(text: str) -> NvidiaSmiTable:
    """Parse the default ``nvidia-smi`` output. Never raises."""
    failure = detect_nvidia_smi_failure(text)
    if is_fatal(failure):
        return NvidiaSmiTable(gpus=(), complete=False, failure=failure,
                              problems=(failure.message,))  # type: ignore[union-attr]
    lines = [line.rstrip() for line in text.splitlines()]
    versions = next((m for m in map(_VERSIONS.search, lines) if m), None)
    timestamp = next((line.strip() for line in lines if _TIMESTAMP.match(line.strip())), None)
    gpus: list[TableGpu] = []
    migs: list[TableMigDevice] = []
    processes: list[TableProcess] = []
    problems: list[str] = [failure.message] if failure else []
    section = "gpus"
    for number, line in enumerate(lines):
        if "MIG devices:" in line:
            section = "mig"
        elif "Processes:" in line:
            section = "processes"
        elif section == "gpus" and (first := _GPU_LINE1.match(line)):
            following = lines[number + 1 : number + 3]
            gpu = _gpu(first, following)
            if gpu is None:
                problems.append(f"GPU {first.group('index')}: data line missing or unreadable")
            else:
                gpus.append(gpu)
        elif section == "mig" and (row := _MIG_ROW.match(line)):
            migs.append(_mig(row))
        elif section == "processes" and (proc := _PROCESS_ROW.match(line)):
            processes.append(_process(proc))
    if versions is None:
        problems.append("no 'NVIDIA-SMI ... Driver Version' header line")
    has_process_block = any("Processes:" in line for line in lines)
    if not has_process_block:
        problems.append("no Processes block: output cut short")
    elif not _closed(lines):
        problems.append("the Processes block has no closing border: output cut short")
    return NvidiaSmiTable(
        gpus=tuple(gpus),
        mig_devices=tuple(migs),
        processes=tuple(processes),
        timestamp=timestamp,
        nvidia_smi_version=versions.group("smi") if versions else None,
        driver_version=versions.group("driver") if versions else None,
        cuda_version=versions.group("cuda") if versions else None,
        complete=not problems,
        failure=failure,
        problems=tuple(problems),
    )


def _closed(lines: list[str]) -> bool:
    """The table's own end: after the Processes block's ``|===|`` line, a ``+---+`` border (every
    driver closes the table with one, after the process rows or "No running processes found")."""
    start = next(n for n, line in enumerate(lines) if "Processes:" in line)
    rule = next((n for n in range(start, len(lines)) if re.fullmatch(r"\|=+\|", lines[n].strip())), None)
    return rule is not None and any(re.fullmatch(r"\+-+\+", line.strip()) for line in lines[rule + 1:])


def _gpu(first: re.Match[str], following: list[str]) -> TableGpu | None:
    second = _GPU_LINE2.match(following[0]) if following else None
    if second is None:
        return None
    third = _GPU_LINE3.match(following[1]) if len(following) > 1 else None
    name = first.group("name").strip()
    ecc = first.group("ecc")
    return TableGpu(
        index=int(first.group("index")),
        name=name.removesuffix("...").rstrip(),
        name_truncated=name.endswith("..."),
        persistence_mode=bool_value(first.group("persistence")),
        bus_id=first.group("bus"),
        pci_address=canonical_pci_address(first.group("bus")),
        display_active=text_value(first.group("disp")),
        volatile_uncorrected_ecc=int_value(ecc) if ecc.isdigit() else None,
        ecc_cell=ecc,
        fan_percent=int_value(second.group("fan")),
        temperature_c=int_value(second.group("temp")),
        performance_state=text_value(second.group("perf")),
        power_draw_w=_watts(second.group("draw")),
        power_cap_w=_watts(second.group("cap")),
        memory_used_mib=int_value(second.group("used")),
        memory_total_mib=int_value(second.group("total")),
        utilization_percent=int_value(second.group("util")),
        compute_mode=text_value(second.group("compute")),
        mig_mode=text_value(third.group("mig")) if third else None,
    )


def _watts(cell: str) -> float | None:
    number = number_value(cell)
    return None if number is None else float(number)


def _mig(row: re.Match[str]) -> TableMigDevice:
    gpu, gi, ci, mig, used, total, sm = row.groups()
    return TableMigDevice(
        gpu_index=int(gpu),
        gpu_instance_id=int(gi),
        compute_instance_id=int(ci),
        mig_index=int(mig),
        memory_used_mib=int_value(used),
        memory_total_mib=int_value(total),
        multiprocessor_count=int_value(sm),
    )


def _process(row: re.Match[str]) -> TableProcess:
    return TableProcess(
        gpu_index=int(row.group("gpu")),
        gpu_instance_id=int_value(row.group("gi")),
        compute_instance_id=int_value(row.group("ci")),
        pid=int(row.group("pid")),
        type=row.group("type"),
        name=row.group("name").strip(),
        used_memory_mib=int_value(row.group("mem")),
    )
