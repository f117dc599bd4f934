"""Test doubles for the health probes: a read-only host served from canned replies,
and builders of the replies a real host sends (nvidia-smi CSV, sysfs, /proc)."""
from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from gpuconf.facts.base import file_state
from gpuconf.facts.nvidia import NvidiaSmiQuery
from gpuconf.tasks.base import Unknown
from gpuconf.tasks.health.readings import HEALTH_FIELDS, GpuReading
from gpuconf.tasks.registry import TASK_TYPES, build_params

REAL = Path(os.environ.get("GPUCONF_REAL_FIXTURES")
            or Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "real")
SMI = "health:nvidia-smi"


def real(path: str) -> str:
    """A real capture's text; the test is skipped where the captures are not present."""
    if not (REAL / path).is_file():
        pytest.skip(f"real capture {path} not present under {REAL}")
    return (REAL / path).read_text()


class FakeHost:
    """The check context a probe sees: facts answered from `replies` (keyed like the
    engine's cache), parsed by each fact's own parser. It cannot write."""

    def __init__(self, replies: dict, check_mode: bool = True, after_apply: bool = False):
        self.host, self.facts, self.vars = "node1", {}, {}
        self.check_mode, self.after_apply, self.reboot_required = check_mode, after_apply, False
        self.replies, self.asked = replies, []

    def get(self, fact):
        self.asked.append(fact.key)
        assert fact.key in self.replies, f"the probe read a fact the test does not serve: {fact.key}"
        return fact.parse(self.replies[fact.key])

    def get_all(self, facts):
        return [self.get(f) for f in facts]


def run_probe(type_name: str, params: dict, replies: dict, check_mode: bool = True, after_apply: bool = False):
    """check() of a probe; returns (check, None) or (None, the Unknown it raised). Every
    fact it read must be declared by facts(), so the engine batches it."""
    task, model = TASK_TYPES[type_name], build_params(type_name, params)
    host = FakeHost(replies, check_mode, after_apply)
    declared = {f.key for f in task.facts(model)}
    try:
        result = task.check(host, model), None
    except Unknown as exc:
        result = None, exc
    assert set(host.asked) <= declared, f"read but not declared in facts(): {set(host.asked) - declared}"
    return result


def shell(out: str = "", rc: int = 0, timed_out: bool = False, err: str = "") -> dict:
    return {"out": out, "err": err, "rc": rc, "timed_out": timed_out}


def hang() -> dict:
    return shell("", rc=-9, timed_out=True, err="")


def stat(path: str, content: str | None) -> dict:
    if content is None:
        return {file_state(path).key: {"exists": False}}
    return {file_state(path).key: {"exists": True, "kind": "file", "mode": 0o444, "owner": "root", "group": "root",
                                   "content_b64": base64.b64encode(content.encode()).decode()}}


def modules(text: str | None) -> dict:
    """The reply to `cat /proc/modules || lsmod` (None: neither printed anything)."""
    return {"loaded_modules": shell(text) if text is not None else shell("", rc=127, err="lsmod: not found")}


HEALTHY = {
    "name": "NVIDIA A100-SXM4-80GB", "persistence_mode": "Enabled", "pstate": "P0", "temperature.gpu": "34",
    "clocks_event_reasons.active": "0x0000000000000001", "utilization.gpu": "0", "memory.used": "0",
    "memory.total": "81920", "power.draw": "62.50", "power.limit": "500.00",
    "ecc.errors.uncorrected.volatile.total": "0", "remapped_rows.pending": "No", "remapped_rows.failure": "No",
    "retired_pages.pending": "[N/A]", "pcie.link.gen.current": "4", "pcie.link.gen.max": "4",
    "pcie.link.width.current": "16", "pcie.link.width.max": "16", "fabric.state": "[N/A]", "fabric.status": "[N/A]",
}
BUSES = ("07", "0f", "47", "4e", "87", "90", "b7", "bd")


def bus(index: int) -> str:
    return f"0000:{BUSES[index]}:00.0"


def smi_csv(count: int = 8, fields: tuple[str, ...] = HEALTH_FIELDS, **per_gpu: dict) -> str:
    """`--query-gpu=FIELDS --format=csv,nounits` of `count` healthy A100s; `gpu3={...}`
    overrides fields of GPU 3."""
    lines = [", ".join(fields)]
    for index in range(count):
        row = dict(HEALTHY, index=str(index), **{"pci.bus_id": f"0000{bus(index)}"})
        row.update(per_gpu.get(f"gpu{index}", {}))
        lines.append(", ".join(row[f] for f in fields))
    return "\n".join(lines) + "\n"


def smi(count: int = 8, nvlink: str | None = None, **per_gpu: dict) -> dict:
    """The shared fact's reply; with `nvlink`, as on an NVSwitch host (`nvlink -s` after the query)."""
    out = smi_csv(count, **per_gpu)
    if nvlink is not None:
        out += f"#nvlink\n{nvlink}#nvlink-rc 0\n"
    return {SMI: shell(out)}


def pci(count: int = 8, missing: tuple[int, ...] = ()) -> dict:
    """The gathered `pci:10de` fact: GPUs (and 6 NVSwitches) in sysfs."""
    lines = [f"{bus(i)} 0x030200 0x20b2" for i in range(count) if i not in missing]
    lines += [f"0000:{0x11 + i:02x}:00.0 0x068000 0x1af1" for i in range(6)]
    return {"pci:10de": shell("\n".join(lines) + "\n")}


def links(count: int = 8, **per_gpu: tuple) -> dict:
    """sysfs links: `gpu2=("8.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16")`."""
    rows = []
    for i in range(count):
        cells = per_gpu.get(f"gpu{i}", ("16.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16"))
        rows.append("\t".join((bus(i), *cells)))
    return {"health:pcie-links": shell("\n".join(rows) + "\n")}


def readings_from_query(query: NvidiaSmiQuery) -> tuple[GpuReading, ...]:
    """The same readings from `nvidia-smi -q` (more real captures than CSV has): GPU index
    is the block's position, as nvidia-smi numbers them."""
    gpus = []
    for index, g in enumerate(query.gpus):
        reasons = g.clock_event_reasons
        remap = g.remapped_rows
        gpus.append(GpuReading(
            index=index, bus_id=g.pci_address, name=g.product_name, persistence=g.persistence_mode,
            pstate=g.performance_state, temperature_c=g.temperature.gpu_c, clock_reasons=reasons,
            utilization_percent=g.utilization.gpu_percent, memory_used_mib=g.memory.used_mib,
            memory_total_mib=g.memory.total_mib, power_draw_w=g.power.draw_w, power_limit_w=g.power.limit_w,
            ecc_uncorrected_volatile=g.ecc.volatile_uncorrected,
            remapped_rows_pending=remap.pending if remap else None,
            remapped_rows_failure=remap.failure if remap else None,
            retired_pages_pending=g.retired_pages.pending if g.retired_pages else None,
            pcie_gen_current=g.pcie.gen_current, pcie_gen_max=g.pcie.gen_max,
            pcie_width_current=g.pcie.width_current, pcie_width_max=g.pcie.width_max,
            fabric_state=g.fabric.state if g.fabric else None, fabric_status=g.fabric.status if g.fabric else None))
    return tuple(gpus)
