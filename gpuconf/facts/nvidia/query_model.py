"""Typed results of ``nvidia-smi -q`` and ``nvidia-smi -q -x`` (one model for both).

Every field is optional: nvidia-smi prints ``N/A``, ``[Not Supported]`` or ``Unknown Error``
for what a GPU, driver or ``-d`` section selection does not report, and those become
None. Values that are errors rather than absences are also listed in
:attr:`GpuDetails.errors`, so a health check can tell "not supported" from "broken".
Units are in the field names (``_c``, ``_w``, ``_mhz``, ``_mib``, ``_percent``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gpuconf.facts.common import canonical_pci_address
from gpuconf.facts.nvidia.clocks import ClockEventReasons
from gpuconf.facts.nvidia.fabric import Fabric
from gpuconf.facts.nvidia.failure import NvidiaSmiFailure
from gpuconf.facts.xid import RecoveryAction
from gpuconf.files.values import JSONValue


@dataclass(frozen=True)
class PcieLink:
    """PCIe link generation and width; ``gen_current`` drops on idle GPUs by design."""

    gen_current: int | None = None
    gen_max: int | None = None
    gen_device_current: int | None = None
    gen_device_max: int | None = None
    gen_host_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None
    replays_since_reset: int | None = None


@dataclass(frozen=True)
class Temperatures:
    """Degrees Celsius. ``*_tlimit_c`` are relative to the T.Limit (newer drivers)."""

    gpu_c: int | None = None
    memory_c: int | None = None
    shutdown_c: int | None = None
    slowdown_c: int | None = None
    max_operating_c: int | None = None
    target_c: int | None = None
    tlimit_c: int | None = None
    shutdown_tlimit_c: int | None = None
    slowdown_tlimit_c: int | None = None


@dataclass(frozen=True)
class PowerReadings:
    """Watts. ``draw_w`` is the instantaneous draw where the driver splits it from average."""

    draw_w: float | None = None
    average_draw_w: float | None = None
    limit_w: float | None = None
    requested_limit_w: float | None = None
    default_limit_w: float | None = None
    min_limit_w: float | None = None
    max_limit_w: float | None = None


@dataclass(frozen=True)
class Clocks:
    """Current and maximum clocks in MHz."""

    graphics_mhz: int | None = None
    sm_mhz: int | None = None
    memory_mhz: int | None = None
    video_mhz: int | None = None
    max_graphics_mhz: int | None = None
    max_sm_mhz: int | None = None
    max_memory_mhz: int | None = None
    max_video_mhz: int | None = None


@dataclass(frozen=True)
class EccErrors:
    """ECC mode and error counts, summed over memory kinds (SRAM + DRAM, or the
    single/double-bit totals on Volta/Turing). None where the GPU has no ECC."""

    mode_current: bool | None = None
    mode_pending: bool | None = None
    volatile_corrected: int | None = None
    volatile_uncorrected: int | None = None
    aggregate_corrected: int | None = None
    aggregate_uncorrected: int | None = None
    sram_threshold_exceeded: bool | None = None


@dataclass(frozen=True)
class RetiredPages:
    """Page retirement (pre-Ampere); ``pending`` is the "Pending Page Blacklist" flag."""

    single_bit: int | None = None
    double_bit: int | None = None
    pending: bool | None = None


@dataclass(frozen=True)
class RemappedRows:
    """Row remapping (Ampere and later): a pending remap needs a GPU reset."""

    correctable: int | None = None
    uncorrectable: int | None = None
    pending: bool | None = None
    failure: bool | None = None


@dataclass(frozen=True)
class Utilization:
    """Percentages over the last sample period."""

    gpu_percent: int | None = None
    memory_percent: int | None = None
    encoder_percent: int | None = None
    decoder_percent: int | None = None


@dataclass(frozen=True)
class MemoryUsage:
    """Framebuffer and BAR1 memory in MiB."""

    total_mib: int | None = None
    used_mib: int | None = None
    free_mib: int | None = None
    reserved_mib: int | None = None
    bar1_total_mib: int | None = None
    bar1_used_mib: int | None = None


@dataclass(frozen=True)
class GpuProcess:
    """A process holding the GPU (``Processes`` section)."""

    pid: int | None
    type: str | None = None
    name: str | None = None
    used_memory_mib: int | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True)
class MigDevice:
    """A MIG device of a GPU in MIG mode."""

    index: int | None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    multiprocessor_count: int | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None


@dataclass(frozen=True)
class GpuDetails:
    """One GPU block of ``nvidia-smi -q``. ``bus_id`` is as printed; ``pci_address`` is
    the canonical sysfs spelling (``0000:19:00.0``) for joining with other facts."""

    bus_id: str
    pci_address: str | None = None
    product_name: str | None = None
    product_brand: str | None = None
    architecture: str | None = None
    uuid: str | None = None
    serial: str | None = None
    vbios_version: str | None = None
    minor_number: int | None = None
    module_id: int | None = None
    persistence_mode: bool | None = None
    addressing_mode: str | None = None
    mig_mode_current: bool | None = None
    mig_mode_pending: bool | None = None
    gsp_firmware_version: str | None = None
    reset_required: bool | None = None
    drain_and_reset_recommended: bool | None = None
    # "GPU Recovery Action" (R565 and later): what the driver says the GPU needs now, as printed and as
    # gpuconf's action (gpuconf.facts.xid.ACTIONS); None when this driver does not print it
    recovery_action: RecoveryAction | None = None
    performance_state: str | None = None
    fan_speed_percent: int | None = None
    compute_mode: str | None = None
    pcie: PcieLink = PcieLink()
    temperature: Temperatures = Temperatures()
    power: PowerReadings = PowerReadings()
    clocks: Clocks = Clocks()
    clock_event_reasons: ClockEventReasons | None = None
    ecc: EccErrors = EccErrors()
    retired_pages: RetiredPages | None = None
    remapped_rows: RemappedRows | None = None
    fabric: Fabric | None = None
    utilization: Utilization = Utilization()
    memory: MemoryUsage = MemoryUsage()
    processes: tuple[GpuProcess, ...] = ()
    mig_devices: tuple[MigDevice, ...] = ()
    errors: tuple[str, ...] = ()
    raw: dict[str, JSONValue] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class NvidiaSmiQuery:
    """The whole ``nvidia-smi -q`` (or ``-q -x``) output.

    ``complete`` is False when fewer GPU blocks were found than ``Attached GPUs`` says
    (output cut short) or when nvidia-smi failed; ``problems`` says why.
    """

    gpus: tuple[GpuDetails, ...]
    timestamp: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    complete: bool = True
    failure: NvidiaSmiFailure | None = None
    problems: tuple[str, ...] = ()

    def gpu(self, pci_address: str) -> GpuDetails | None:
        """The GPU at a PCI address in any spelling (``00000000:19:00.0``, ``0000:19:00``)."""
        wanted = canonical_pci_address(pci_address)
        return next((g for g in self.gpus if g.pci_address == wanted), None)
