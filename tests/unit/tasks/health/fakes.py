"""Test doubles for the health probes: the `Facts` a probe's check() sees, built from the
replies a real host's runner sends (nvidia-smi output, sysfs and procfs files), each
parsed by its fact's own parser, as the engine does."""
from __future__ import annotations

import base64

from gpuconf.facts import gather
from gpuconf.facts.base import file_state
from gpuconf.facts.nvidia import NvidiaSmiQuery
from gpuconf.tasks.base import Facts, Unknown
from gpuconf.tasks.health.pci import LINK_ATTRIBUTES, LINK_FACT
from gpuconf.tasks.health.readings import HEALTH_FIELDS, GpuReading
from gpuconf.tasks.registry import TASK_TYPES, build_params
from tests.real import read_real
from tests.replies import parsed_replies

SMI = "health:nvidia-smi"
NVLINK = "health:nvlink"
KERNEL_LOG = "health:kernel-log"
IB = "health:ib-sysfs"


def real(path: str) -> str:
    """A real capture's text as the tool printed it (a missing one fails the test). gpud's testdata files were stored without the newline the tool printed
    last (a last line without one reads as cut short), so it is added back for them."""
    text = read_real(path)
    return text + "\n" if path.endswith("-gpud.txt") and not text.endswith("\n") else text


class ServedFacts(Facts):
    """Facts from canned replies; reading one the test does not serve fails the test (it
    would otherwise read as "unavailable" and hide a wrong key)."""

    def __init__(self, values, declared, host, served):
        super().__init__(values, declared, host)
        self.served, self.asked = served, []

    def __getitem__(self, fact):
        self.asked.append(fact.key)
        assert fact.key in self.served, f"the probe read a fact the test does not serve: {fact.key}"
        return super().__getitem__(fact)


def facts_for(reads, replies: dict, host: dict | None = None) -> ServedFacts:
    """Facts parsed from runner replies, refusing any read the test does not serve."""
    return ServedFacts(parsed_replies(reads, replies), reads, host or {}, set(replies))


def run_probe(type_name: str, params: dict, replies: dict):
    """check() of a probe; returns (verdict, None) or (None, the Unknown it raised). It can
    read only what reads() declared (Facts refuses anything else)."""
    task, model = TASK_TYPES[type_name], build_params(type_name, params)
    facts = facts_for(task.reads(model), replies)
    try:
        return task.check(model, facts), None
    except Unknown as exc:
        return None, exc


def shell(out: str = "", rc: int = 0, timed_out: bool = False, err: str = "", argv: list | None = None) -> dict:
    """A command read's reply (an exec op's result)."""
    reply = {"out": out, "err": err, "rc": rc, "timed_out": timed_out, "timeout": 10}
    if argv is not None:
        reply["argv"] = argv
    return reply


def hang() -> dict:
    return shell("", rc=-9, timed_out=True, err="")


def stat(path: str, content: str | None) -> dict:
    if content is None:
        return {file_state(path).key: {"exists": False}}
    return {file_state(path).key: {"exists": True, "kind": "file", "mode": 0o444, "owner": "root", "group": "root",
                                   "content_b64": base64.b64encode(content.encode()).decode()}}


def modules(text: str | None) -> dict:
    """/proc/modules (lsmod not run), lsmod's output on a kernel without /proc/modules
    (text starting with its `Module` header), or None: neither could be read."""
    if text is None:
        return {**stat("/proc/modules", None), gather.LSMOD.key: shell("", rc=127, err="lsmod: not found")}
    if text.startswith("Module"):
        return {**stat("/proc/modules", None), gather.LSMOD.key: shell(text)}
    return {**stat("/proc/modules", text), gather.LSMOD.key: shell("")}


def files(mapping: dict[str, str]) -> dict:
    """A glob read's reply."""
    return {"files": dict(mapping)}


HEALTHY = {
    "name": "NVIDIA A100-SXM4-80GB", "persistence_mode": "Enabled", "pstate": "P0", "temperature.gpu": "34",
    "clocks_event_reasons.active": "0x0000000000000001", "utilization.gpu": "0", "memory.used": "0",
    "memory.total": "81920", "power.draw": "62.50", "power.limit": "500.00",
    "ecc.errors.uncorrected.volatile.total": "0", "remapped_rows.pending": "No", "remapped_rows.failure": "No",
    "retired_pages.pending": "[N/A]", "pcie.link.gen.current": "4", "pcie.link.gen.max": "4",
    "pcie.link.width.current": "16", "pcie.link.width.max": "16", "fabric.state": "[N/A]", "fabric.status": "[N/A]",
    "gpu_recovery_action": "None",
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
    """The shared fact's reply; with `nvlink`, `nvidia-smi nvlink -s`'s reply too."""
    replies = {SMI: shell(smi_csv(count, **per_gpu))}
    if nvlink is not None:
        replies[NVLINK] = shell(nvlink)
    return replies


def pci(count: int = 8, missing: tuple[int, ...] = (), nvswitches: int = 6) -> dict:
    """The gathered PCI fact (sysfs vendor, class, device): GPUs and NVSwitches."""
    found = {}
    devices = [(bus(i), "0x030200", "0x20b2") for i in range(count) if i not in missing]
    devices += [(f"0000:{0x11 + i:02x}:00.0", "0x068000", "0x1af1") for i in range(nvswitches)]
    devices += [("0000:00:1f.0", "0x060100", "0x8086")]   # an Intel ISA bridge: not NVIDIA
    for address, klass, device in devices:
        vendor = "0x8086" if device == "0x8086" else "0x10de"
        directory = f"/sys/bus/pci/devices/{address}"
        found.update({f"{directory}/vendor": vendor, f"{directory}/class": klass, f"{directory}/device": device})
    return {gather.PCI_FACT.key: files(found)}


def links(count: int = 8, **per_gpu: tuple) -> dict:
    """sysfs links of every GPU (and an NVSwitch's, which is not a GPU), with the PCI fact
    that says which devices are GPUs: `gpu2=("8.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16")`."""
    found = {}
    rows = [(bus(i), per_gpu.get(f"gpu{i}", ("16.0 GT/s PCIe", "16.0 GT/s PCIe", "16", "16"))) for i in range(count)]
    rows.append(("0000:11:00.0", ("2.5 GT/s PCIe", "16.0 GT/s PCIe", "1", "16")))
    for address, cells in rows:
        for name, value in zip(LINK_ATTRIBUTES, cells):
            found[f"/sys/bus/pci/devices/{address}/{name}"] = value
    return {LINK_FACT.key: files(found), **pci(count)}


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
