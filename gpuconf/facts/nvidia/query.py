"""Parse ``nvidia-smi -q`` (text) and ``nvidia-smi -q -x`` (XML) into :class:`NvidiaSmiQuery`.

Format notes, from the real captures (drivers 375 to 595):

* Keys are indented 4 spaces per level; the key column width changed (42 columns up to
  575, 55 from 580), so parsing is by indentation and the ``" : "`` separator only.
* Drivers rename things: "Clocks Throttle Reasons" became "Clocks Event Reasons" (535),
  "Power Readings" became "GPU Power Readings", "Power Draw" split into "Average" and
  "Instantaneous" (550+ on some GPUs), "GPU Shutdown Temp" became a T.Limit-relative
  "GPU Shutdown T.Limit Temp", "Pending Page Blacklist" is still printed by 535-590.
* ``-q -d SECTION`` prints only some sections: the missing ones are None, not errors.
* Output cut short (a hung driver, ``| head``) leaves fewer GPU blocks than
  "Attached GPUs": the result is then ``complete=False``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from gpuconf.facts.common import (
    Incomplete,
    Unparseable,
    bool_value,
    canonical_pci_address,
    int_value,
    is_error_value,
    reads_whole_lines,
    text_value,
    unparseable,
)
from gpuconf.facts.nvidia import query_sections as sections
from gpuconf.facts.nvidia.fabric import Fabric
from gpuconf.facts.nvidia.failure import detect_nvidia_smi_failure, is_fatal
from gpuconf.facts.nvidia.query_model import (
    GpuDetails,
    MemoryUsage,
    NvidiaSmiQuery,
    PcieLink,
    Utilization,
)
from gpuconf.facts.nvidia.tree import Node, text_tree, xml_tree
from gpuconf.facts.xid import RecoveryAction, recovery_from_text


@reads_whole_lines
def parse_nvidia_smi_query(text: str) -> NvidiaSmiQuery:
    """Parse ``nvidia-smi -q`` (or ``-q -d ...``) text. Never raises.

    A failure message (driver not loaded, library mismatch) gives ``failure`` set and no
    GPUs; text that is not a ``-q`` dump gives ``complete=False`` with a problem.
    """
    failure = detect_nvidia_smi_failure(text)
    if failure is not None and is_fatal(failure):
        return NvidiaSmiQuery(gpus=(), complete=False, failure=failure, problems=(failure.message,))
    result = _from_tree(text_tree(text))
    if failure is not None:  # a lost GPU: the others are still reported
        return replace(result, failure=failure, complete=False, problems=(failure.message, *result.problems))
    return result


def parse_nvidia_smi_query_xml(text: str) -> NvidiaSmiQuery | Incomplete | Unparseable:
    """Parse ``nvidia-smi -q -x`` XML (nvsmi_device_v11/v12 DTDs) into the same model."""
    failure = detect_nvidia_smi_failure(text)
    if failure is not None:
        return NvidiaSmiQuery(gpus=(), complete=False, failure=failure, problems=(failure.message,))
    root = xml_tree(text)
    if root is None and "<nvidia_smi_log>" in text and "</nvidia_smi_log>" not in text:
        # the document's own closing tag is its last line: without it the XML was cut short,
        # even at a line end (not a format we do not know)
        return Incomplete("nvidia-smi -q -x ends before </nvidia_smi_log>: cut short", text.strip()[:200])
    if root is None:
        return unparseable("expected nvidia-smi -q -x XML", text)
    return _from_tree(root)


def _from_tree(root: Node) -> NvidiaSmiQuery:
    gpus = tuple(_gpu(node) for node in root.all("gpu"))
    attached = int_value(root.get("attached_gpus"))
    problems: list[str] = []
    if not gpus and attached is None:
        problems.append("no 'Attached GPUs' line and no GPU block: not nvidia-smi -q output")
    if attached is not None and attached != len(gpus):
        problems.append(f"Attached GPUs is {attached} but {len(gpus)} GPU block(s) were found")
    return NvidiaSmiQuery(
        gpus=gpus,
        timestamp=text_value(root.get("timestamp")),
        driver_version=text_value(root.get("driver_version")),
        cuda_version=text_value(root.get("cuda_version")),
        attached_gpus=attached,
        complete=not problems,
        problems=tuple(problems),
    )


def _recovery(text: str | None) -> RecoveryAction | None:
    """nvidia-smi's "GPU Recovery Action" (``None``, ``Reset``, ``Reboot``, ``Drain P2P`` ...), typed."""
    return RecoveryAction(recovery_from_text(text), text) if text else None


def _gpu(gpu: Node) -> GpuDetails:
    bus_id = gpu.value or gpu.get("pci/bus_id", "pci/pci_bus_id") or ""
    link = gpu.find("pci/gpu_link_info") or gpu.find("pci/pci_gpu_link_info") or Node("")
    return GpuDetails(
        bus_id=bus_id,
        pci_address=canonical_pci_address(bus_id),
        product_name=text_value(gpu.get("product_name")),
        product_brand=text_value(gpu.get("product_brand")),
        architecture=text_value(gpu.get("product_architecture")),
        uuid=text_value(gpu.get("gpu_uuid", "uuid")),
        serial=text_value(gpu.get("serial_number", "serial")),
        vbios_version=text_value(gpu.get("vbios_version")),
        minor_number=int_value(gpu.get("minor_number")),
        module_id=int_value(gpu.get("module_id", "gpu_module_id", "platform_info/module_id")),
        persistence_mode=bool_value(gpu.get("persistence_mode")),
        addressing_mode=text_value(gpu.get("addressing_mode")),
        mig_mode_current=bool_value(gpu.get("mig_mode/current", "mig_mode/current_mig")),
        mig_mode_pending=bool_value(gpu.get("mig_mode/pending", "mig_mode/pending_mig")),
        gsp_firmware_version=text_value(gpu.get("gsp_firmware_version")),
        reset_required=bool_value(gpu.get("gpu_reset_status/reset_required")),
        drain_and_reset_recommended=bool_value(
            gpu.get("gpu_reset_status/drain_and_reset_recommended")
        ),
        recovery_action=_recovery(text_value(gpu.get("gpu_recovery_action"))),
        performance_state=text_value(gpu.get("performance_state")),
        fan_speed_percent=int_value(gpu.get("fan_speed")),
        compute_mode=text_value(gpu.get("compute_mode")),
        pcie=PcieLink(
            gen_current=int_value(link.get("pcie_generation/current", "pcie_gen/current_link_gen")),
            gen_max=int_value(link.get("pcie_generation/max", "pcie_gen/max_link_gen")),
            gen_device_current=int_value(
                link.get("pcie_generation/device_current", "pcie_gen/device_current_link_gen")
            ),
            gen_device_max=int_value(
                link.get("pcie_generation/device_max", "pcie_gen/max_device_link_gen")
            ),
            gen_host_max=int_value(link.get("pcie_generation/host_max", "pcie_gen/max_host_link_gen")),
            width_current=int_value(link.get("link_width/current", "link_widths/current_link_width")),
            width_max=int_value(link.get("link_width/max", "link_widths/max_link_width")),
            replays_since_reset=int_value(gpu.get("pci/replays_since_reset", "pci/replay_counter")),
        ),
        temperature=sections.temperatures(gpu.find("temperature") or Node("")),
        power=sections.power(gpu.find("gpu_power_readings") or gpu.find("power_readings") or Node("")),
        clocks=sections.clocks(gpu),
        clock_event_reasons=sections.reasons(
            gpu.find("clocks_event_reasons") or gpu.find("clocks_throttle_reasons")
        ),
        ecc=sections.ecc(gpu),
        retired_pages=sections.retired_pages(gpu.find("retired_pages")),
        remapped_rows=sections.remapped_rows(gpu.find("remapped_rows")),
        fabric=sections.fabric(gpu.find("fabric")),
        utilization=Utilization(
            gpu_percent=int_value(gpu.get("utilization/gpu", "utilization/gpu_util")),
            memory_percent=int_value(gpu.get("utilization/memory", "utilization/memory_util")),
            encoder_percent=int_value(gpu.get("utilization/encoder", "utilization/encoder_util")),
            decoder_percent=int_value(gpu.get("utilization/decoder", "utilization/decoder_util")),
        ),
        memory=MemoryUsage(
            total_mib=int_value(gpu.get("fb_memory_usage/total")),
            used_mib=int_value(gpu.get("fb_memory_usage/used")),
            free_mib=int_value(gpu.get("fb_memory_usage/free")),
            reserved_mib=int_value(gpu.get("fb_memory_usage/reserved")),
            bar1_total_mib=int_value(gpu.get("bar1_memory_usage/total")),
            bar1_used_mib=int_value(gpu.get("bar1_memory_usage/used")),
        ),
        processes=sections.processes(gpu.find("processes")),
        mig_devices=sections.mig_devices(gpu),
        errors=tuple(
            f"{path}: {node.value}" for path, node in gpu.walk() if is_error_value(node.value)
        ),
        raw=gpu.to_dict(),
    )


@dataclass(frozen=True)
class QueryExcerpt:
    """Sections found in part of an ``nvidia-smi -q`` dump (``nvidia-smi -q | grep ...``, a
    one-GPU section): the values it shows, None for what it does not."""

    fabric: Fabric | None
    gsp_firmware_version: str | None  # as printed: "N/A" when GSP is off (proprietary, EnableGpuFirmware=0)
    incomplete: str = ""  # why the excerpt was cut short ("" when whole): gpuconf.facts.common


@reads_whole_lines
def parse_query_excerpt(text: str) -> QueryExcerpt:
    """The Fabric block and the GSP firmware line wherever they sit in an excerpt."""
    fabric_node: Node | None = None
    gsp: str | None = None
    for _, node in text_tree(text).walk():
        if node.key == "fabric" and node.children and fabric_node is None:
            fabric_node = node
        elif node.key == "gsp_firmware_version" and gsp is None:
            gsp = node.value
    return QueryExcerpt(sections.fabric(fabric_node), gsp.strip() if gsp else None)
