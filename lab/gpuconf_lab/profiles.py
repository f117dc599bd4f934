"""Hardware profiles of simulated lab nodes: which GPUs, NVSwitches and HCAs a node has.

This module is pure data and stdlib only, because it is used in two places: on the machine
(``gpuconf lab up --profile`` validates names against :data:`PROFILES`) and inside every node,
where :func:`gpuconf_lab.sim.install.install_image` copies it next to the simulators so that
``nvidia-smi``, ``lspci``, ``ibstat`` and sysfs all describe the same hardware.

Values come from real captures in ``tests/fixtures/real/`` (``nvidia-smi -q`` of an
8x H100 HGX at 535.161.08, ``nvidia-smi -q -x`` of an A100-SXM4-80GB at 535.54.03 and of a
Tesla T4, ``ibstat`` of CX-6/CX-7 HCAs), so that simulated output parses like the real thing.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuModel:
    """One GPU product, as ``nvidia-smi -q`` and ``lspci`` describe it."""

    name: str                 # "Product Name" and ``-L``
    lspci_name: str           # pci.ids name, as ``lspci`` prints it
    architecture: str
    brand: str
    device_id: int            # PCI device id (vendor 0x10de)
    subsystem: int            # "Sub System Id" (0xSSSSVVVV)
    vbios: str
    board_part: str
    gpu_part: str
    inforom: tuple[str, str, str]   # image, OEM object, ECC object
    memory_mib: int
    memory_reserved_mib: int
    bar1_mib: int
    pcie_gen: int
    pcie_width: int
    power_default_w: float
    power_min_w: float
    power_max_w: float
    power_idle_w: float
    temp_idle_c: int
    temp_memory_c: int | None
    temp_max_operating_c: int
    temp_slowdown_c: int
    temp_shutdown_c: int
    temp_limit_style: bool    # Hopper reports T.Limit temperatures instead of absolute thresholds
    clocks_idle: tuple[int, int, int, int]   # graphics, SM, memory, video (MHz)
    clocks_max: tuple[int, int, int, int]
    clocks_applications: tuple[int, int]     # graphics, memory
    compute_cap: str
    nvlinks: int
    nvlink_speed: str         # as ``nvidia-smi nvlink -s`` prints it, without " GB/s"
    fabric_probe: bool        # Hopper reports ``Fabric State`` (needs fabric manager)
    serial_prefix: str


@dataclass(frozen=True)
class HcaModel:
    """One Mellanox/NVIDIA ConnectX adapter port, as ``ibstat`` and sysfs describe it."""

    ca_type: str              # "CA type" / hca_type
    lspci_name: str
    device_id: int            # PCI device id (vendor 0x15b3)
    vendor_part_id: int       # ibv_devinfo vendor_part_id
    firmware: str
    board_id: str
    rate_gbps: int
    rate_name: str            # "4X HDR" / "4X NDR"
    guid_prefix: str          # first 3 bytes of node GUIDs


@dataclass(frozen=True)
class Profile:
    """A node type: GPUs at fixed PCI addresses, NVSwitches, HCAs."""

    name: str
    gpu: GpuModel
    gpu_buses: tuple[int, ...]
    nvswitch_device_id: int | None = None
    nvswitch_lspci_name: str = ""
    nvswitch_buses: tuple[int, ...] = ()
    hca: HcaModel | None = None
    hca_buses: tuple[int, ...] = ()
    cpus: int = 128
    memory_gib: int = 2048
    description: str = ""
    nvlink_domain: str = ""   # "rack": multi-node NVLink (GB200 NVL72), the switches sit in the rack
    extra: dict = field(default_factory=dict)

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_buses)

    @property
    def has_nvswitch(self) -> bool:
        return bool(self.nvswitch_buses)

    @property
    def hca_count(self) -> int:
        return len(self.hca_buses)


A100_SXM4_80GB = GpuModel(
    name="NVIDIA A100-SXM4-80GB", lspci_name="GA100 [A100 SXM4 80GB]",
    architecture="Ampere", brand="NVIDIA", device_id=0x20B2, subsystem=0x147F10DE,
    vbios="92.00.36.00.02", board_part="692-2G506-0212-002", gpu_part="20B2-895-A1",
    inforom=("G506.0212.00.01", "2.0", "6.16"),
    memory_mib=81920, memory_reserved_mib=566, bar1_mib=131072, pcie_gen=4, pcie_width=16,
    power_default_w=500.0, power_min_w=100.0, power_max_w=500.0, power_idle_w=62.5,
    temp_idle_c=33, temp_memory_c=44, temp_max_operating_c=85, temp_slowdown_c=89,
    temp_shutdown_c=92, temp_limit_style=False,
    clocks_idle=(210, 210, 1593, 585), clocks_max=(1410, 1410, 1593, 1290),
    clocks_applications=(1275, 1593), compute_cap="8.0",
    nvlinks=12, nvlink_speed="25", fabric_probe=False, serial_prefix="1650522",
)

H100_SXM5_80GB = GpuModel(
    name="NVIDIA H100 80GB HBM3", lspci_name="GH100 [H100 SXM5 80GB]",
    architecture="Hopper", brand="NVIDIA", device_id=0x2330, subsystem=0x16C110DE,
    vbios="96.00.74.00.0D", board_part="692-2G520-0200-000", gpu_part="2330-885-A1",
    inforom=("G520.0200.00.05", "2.1", "7.16"),
    memory_mib=81559, memory_reserved_mib=551, bar1_mib=131072, pcie_gen=5, pcie_width=16,
    power_default_w=700.0, power_min_w=200.0, power_max_w=700.0, power_idle_w=69.7,
    temp_idle_c=29, temp_memory_c=39, temp_max_operating_c=85, temp_slowdown_c=87,
    temp_shutdown_c=93, temp_limit_style=True,
    clocks_idle=(345, 345, 2619, 765), clocks_max=(1980, 1980, 2619, 1545),
    clocks_applications=(1980, 2619), compute_cap="9.0",
    nvlinks=18, nvlink_speed="26.562", fabric_probe=True, serial_prefix="1650124",
)

TESLA_T4 = GpuModel(
    name="Tesla T4", lspci_name="TU104GL [Tesla T4]",
    architecture="Turing", brand="NVIDIA", device_id=0x1EB8, subsystem=0x12A210DE,
    vbios="90.04.84.00.06", board_part="900-2G183-0000-001", gpu_part="1EB8-895-A1",
    inforom=("G183.0200.00.02", "1.1", "5.0"),
    memory_mib=15360, memory_reserved_mib=257, bar1_mib=256, pcie_gen=3, pcie_width=16,
    power_default_w=70.0, power_min_w=60.0, power_max_w=70.0, power_idle_w=9.82,
    temp_idle_c=37, temp_memory_c=None, temp_max_operating_c=85, temp_slowdown_c=93,
    temp_shutdown_c=96, temp_limit_style=False,
    clocks_idle=(300, 300, 405, 540), clocks_max=(1590, 1590, 5001, 1470),
    clocks_applications=(585, 5001), compute_cap="7.5",
    nvlinks=0, nvlink_speed="", fabric_probe=False, serial_prefix="1322020",
)

H200_SXM_141GB = GpuModel(
    name="NVIDIA H200", lspci_name="GH100 [H200 SXM 141GB]",
    architecture="Hopper", brand="NVIDIA", device_id=0x2335, subsystem=0x18BE10DE,
    vbios="96.00.A5.00.03", board_part="695-2G520-0280-001", gpu_part="2335-895-A1",
    inforom=("G520.0280.02.02", "2.1", "7.16"),
    memory_mib=143771, memory_reserved_mib=614, bar1_mib=262144, pcie_gen=5, pcie_width=16,
    power_default_w=700.0, power_min_w=200.0, power_max_w=700.0, power_idle_w=77.88,
    temp_idle_c=28, temp_memory_c=32, temp_max_operating_c=87, temp_slowdown_c=89,
    temp_shutdown_c=95, temp_limit_style=True,
    clocks_idle=(345, 345, 3201, 765), clocks_max=(1980, 1980, 3201, 1545),
    clocks_applications=(1980, 3201), compute_cap="9.0",
    nvlinks=18, nvlink_speed="26.562", fabric_probe=True, serial_prefix="1654224",
)

# No real capture of a Blackwell ``nvidia-smi -q`` is in tests/fixtures/real/: the B200 and
# GB200 values below are the products' published figures (memory, power, NVLink5 at 50 GB/s per
# link); the layout of every section is the 590 H200 capture's.
B200_SXM_180GB = GpuModel(
    name="NVIDIA B200", lspci_name="GB100 [B200]",
    architecture="Blackwell", brand="NVIDIA", device_id=0x2901, subsystem=0x199910DE,
    vbios="97.00.71.00.0E", board_part="699-2G525-0200-000", gpu_part="2901-886-A1",
    inforom=("G525.0200.00.03", "2.1", "7.17"),
    memory_mib=183359, memory_reserved_mib=648, bar1_mib=262144, pcie_gen=5, pcie_width=16,
    power_default_w=1000.0, power_min_w=200.0, power_max_w=1000.0, power_idle_w=139.5,
    temp_idle_c=30, temp_memory_c=34, temp_max_operating_c=87, temp_slowdown_c=90,
    temp_shutdown_c=95, temp_limit_style=True,
    clocks_idle=(120, 120, 3996, 600), clocks_max=(1965, 1965, 3996, 1650),
    clocks_applications=(1965, 3996), compute_cap="10.0",
    nvlinks=18, nvlink_speed="50", fabric_probe=True, serial_prefix="1655325",
)

GB200_186GB = GpuModel(
    name="NVIDIA GB200", lspci_name="GB100 [GB200]",
    architecture="Blackwell", brand="NVIDIA", device_id=0x2941, subsystem=0x20CA10DE,
    vbios="97.00.82.00.0C", board_part="699-2G548-0200-000", gpu_part="2941-886-A1",
    inforom=("G548.0201.00.06", "2.1", "7.17"),
    memory_mib=189471, memory_reserved_mib=690, bar1_mib=262144, pcie_gen=5, pcie_width=16,
    power_default_w=1200.0, power_min_w=200.0, power_max_w=1200.0, power_idle_w=152.3,
    temp_idle_c=31, temp_memory_c=35, temp_max_operating_c=87, temp_slowdown_c=90,
    temp_shutdown_c=95, temp_limit_style=True,
    clocks_idle=(120, 120, 3996, 600), clocks_max=(2062, 2062, 3996, 1650),
    clocks_applications=(2062, 3996), compute_cap="10.0",
    nvlinks=18, nvlink_speed="50", fabric_probe=True, serial_prefix="1656425",
)

CONNECTX6_HDR = HcaModel(
    ca_type="MT4123", lspci_name="Mellanox Technologies MT28908 Family [ConnectX-6]",
    device_id=0x101B, vendor_part_id=4123, firmware="20.35.1012", board_id="MT_0000000223",
    rate_gbps=200, rate_name="4X HDR", guid_prefix="b83fd2",
)

CONNECTX7_NDR = HcaModel(
    ca_type="MT4129", lspci_name="Mellanox Technologies MT2910 Family [ConnectX-7]",
    device_id=0x1021, vendor_part_id=4129, firmware="28.41.1000", board_id="MT_0000000838",
    rate_gbps=400, rate_name="4X NDR", guid_prefix="a088c2",
)

PROFILES: dict[str, Profile] = {
    "a100": Profile(
        name="a100", gpu=A100_SXM4_80GB,
        gpu_buses=(0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD),
        nvswitch_device_id=0x1AF1, nvswitch_lspci_name="GA100 [A100 NVSwitch]",
        nvswitch_buses=(0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9),
        hca=CONNECTX6_HDR, hca_buses=(0x0C, 0x12, 0x8D, 0xBA),
        cpus=128, memory_gib=1024,
        description="HGX A100 8-GPU: 8x A100-SXM4-80GB, 6 NVSwitches, 4x ConnectX-6 HDR 200",
    ),
    "h100": Profile(
        name="h100", gpu=H100_SXM5_80GB,
        gpu_buses=(0x19, 0x3B, 0x4C, 0x5D, 0x9B, 0xBB, 0xCB, 0xDB),
        nvswitch_device_id=0x22A3, nvswitch_lspci_name="GH100 [H100 NVSwitch]",
        nvswitch_buses=(0x05, 0x06, 0x07, 0x08),
        hca=CONNECTX7_NDR, hca_buses=(0x18, 0x2A, 0x3A, 0x5C, 0x9A, 0xAB, 0xBA, 0xDA),
        cpus=224, memory_gib=2048,
        description="HGX H100 8-GPU: 8x H100 80GB HBM3, 4 NVSwitches, 8x ConnectX-7 NDR 400",
    ),
    "h200": Profile(
        name="h200", gpu=H200_SXM_141GB,
        gpu_buses=(0x19, 0x3B, 0x4C, 0x5D, 0x9B, 0xBB, 0xCB, 0xDB),
        nvswitch_device_id=0x22A3, nvswitch_lspci_name="GH100 [H100 NVSwitch]",
        nvswitch_buses=(0x05, 0x06, 0x07, 0x08),
        hca=CONNECTX7_NDR, hca_buses=(0x18, 0x2A, 0x3A, 0x5C, 0x9A, 0xAB, 0xBA, 0xDA),
        cpus=224, memory_gib=2048,
        description="HGX H200 8-GPU: 8x H200 141GB HBM3e, 4 NVSwitches (NVLink4), 8x ConnectX-7 NDR 400",
    ),
    # HGX B200: two NVLink5 switch chips on the baseboard, PCI bridges like earlier HGX boards.
    # Their PCI device id is the lab's own (no pci.ids name was at hand); gpuconf tells the
    # generation from the GPUs, and from the bridges only that NVSwitches are present.
    "b200": Profile(
        name="b200", gpu=B200_SXM_180GB,
        gpu_buses=(0x1B, 0x43, 0x52, 0x61, 0x9D, 0xC3, 0xD1, 0xDF),
        nvswitch_device_id=0x22A5, nvswitch_lspci_name="GB100 [B200 NVSwitch]",
        nvswitch_buses=(0x05, 0x06),
        hca=CONNECTX7_NDR, hca_buses=(0x1A, 0x3C, 0x4D, 0x5E, 0x9C, 0xBC, 0xCC, 0xDC),
        cpus=224, memory_gib=2048,
        description="HGX B200 8-GPU: 8x B200 180GB, 2 NVLink5 switches, 8x ConnectX-7 NDR 400",
    ),
    # GB200 NVL72 compute tray: 4 GPUs whose NVLinks leave the tray for the rack's switch trays,
    # so the node itself has no NVSwitch device; the rack assigns the clique and cluster ids.
    "gb200": Profile(
        name="gb200", gpu=GB200_186GB,
        gpu_buses=(0x01, 0x02, 0x03, 0x04),
        hca=CONNECTX7_NDR, hca_buses=(0x11, 0x12, 0x13, 0x14),
        cpus=144, memory_gib=960, nvlink_domain="rack",
        description="GB200 NVL72 compute tray: 4x GB200 (NVLink5 to the rack's switch trays), 4x ConnectX-7",
    ),
    "t4": Profile(
        name="t4", gpu=TESLA_T4, gpu_buses=(0x3B,),
        cpus=16, memory_gib=64,
        description="Inference node: 1x Tesla T4, no NVSwitch, no InfiniBand",
    ),
}

DEFAULT_PROFILE = "a100"

# GPU architectures (GpuModel.architecture) each kernel-module flavour cannot drive: the open
# modules need the GSP that only Turing and newer have; Grace Hopper and Blackwell were never
# supported by the proprietary modules (NVIDIA's kernel-modules page; reference section 4).
NO_GSP_ARCHITECTURES = ("Kepler", "Maxwell", "Pascal", "Volta")
OPEN_ONLY_ARCHITECTURES = ("Grace Hopper", "Blackwell", "Grace Blackwell")


def profile_names() -> list[str]:
    """The profile names ``gpuconf lab up --profile`` accepts."""
    return sorted(PROFILES)


def get_profile(name: str) -> Profile:
    """The profile called ``name``; ``KeyError`` names the valid ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown lab profile {name!r}; choose one of {', '.join(profile_names())}") from None
