"""``nvidia-smi -q`` and the default ``nvidia-smi`` table, laid out like the real driver's.

The ``-q`` layout follows the 535.161.08 capture of an 8x H100 (``fixtures/real/nvidia-smi/
q-535.161.08-8x-h100-80gb-hbm3-gpud.txt``) and, for the 550 branch, the 550.127.05 captures,
which add a few keys (``GPU C2C Mode``, ``Base Classcode``, ``GPU Memory Power Readings``,
fabric health). Keys are padded to column 42, as the real tool does. Each top-level block has
the ``-d`` section name that selects it.
"""
from __future__ import annotations

import time

import gpu as gpu_state

WIDTH = 42
# the driver's names for nvmlDeviceGpuRecoveryAction_t, as -q and --query-gpu print them
RECOVERY_ACTIONS = {0: "None", 1: "Reset", 2: "Reboot", 3: "Drain P2P", 4: "Drain and Reset"}


def _kv(indent: int, key: str, value=None) -> str:
    pad = " " * (4 * indent)
    if value is None:
        return pad + key
    return f"{pad}{key:<{WIDTH - 4 * indent}}: {value}"


def _active(flag: bool) -> str:
    return "Active" if flag else "Not Active"


def gpu_blocks(g: gpu_state.Gpu, driver: str) -> list[tuple[str, list[str]]]:
    """(section, lines) of one GPU's ``-q`` report."""
    m = g.model
    new = not driver.startswith("535")
    hopper = m.temp_limit_style
    turing = m.architecture == "Turing"
    reasons = g.reasons()
    graphics, sm, memory, video = g.clocks()
    k = _kv
    ident = [
        k(1, "Product Name", m.name), k(1, "Product Brand", m.brand), k(1, "Product Architecture", m.architecture),
        k(1, "Display Mode", "Enabled"), k(1, "Display Active", "Disabled"),
        k(1, "Persistence Mode", "Enabled" if g.persistence else "Disabled"),
        k(1, "Addressing Mode", "None" if not turing else "N/A"),
        k(1, "MIG Mode"), k(2, "Current", "N/A" if turing else "Disabled"), k(2, "Pending", "N/A" if turing else "Disabled"),
        k(1, "Accounting Mode", "Disabled"), k(1, "Accounting Mode Buffer Size", "4000"),
        k(1, "Driver Model"), k(2, "Current", "N/A"), k(2, "Pending", "N/A"),
        k(1, "Serial Number", g.serial), k(1, "GPU UUID", g.uuid), k(1, "Minor Number", str(g.index)),
        k(1, "VBIOS Version", m.vbios), k(1, "MultiGPU Board", "No"), k(1, "Board ID", f"0x{g.bus:x}00"),
        k(1, "Board Part Number", m.board_part), k(1, "GPU Part Number", m.gpu_part),
        k(1, "FRU Part Number", "N/A"), k(1, "Module ID", str(g.index + 1)),
        k(1, "Inforom Version"), k(2, "Image Version", m.inforom[0]), k(2, "OEM Object", m.inforom[1]),
        k(2, "ECC Object", m.inforom[2]), k(2, "Power Management Object", "N/A"),
        k(1, "Inforom BBX Object Flush"), k(2, "Latest Timestamp", "N/A"), k(2, "Latest Duration", "N/A"),
        k(1, "GPU Operation Mode"), k(2, "Current", "N/A"), k(2, "Pending", "N/A"),
    ]
    if new:
        ident.append(k(1, "GPU C2C Mode", "N/A"))
    else:
        ident.append(k(1, "GSP Firmware Version", driver if m.architecture == "Hopper" else "N/A"))
    ident += [k(1, "GPU Virtualization Mode"), k(2, "Virtualization Mode", "None"), k(2, "Host VGPU Mode", "N/A")]
    if new:
        ident.append(k(2, "vGPU Heterogeneous Mode", "N/A"))
    ident += [k(1, "GPU Reset Status"), k(2, "Reset Required", "No"), k(2, "Drain and Reset Recommended", "No")]
    if int(driver.split(".")[0]) >= 565:  # fixtures/real/nvidia-smi/q-565.57.01-h100sxmx8-thamada-gls.txt
        ident.append(k(1, "GPU Recovery Action", RECOVERY_ACTIONS.get(g.recovery_action, "Unknown")))
    if new:
        ident.append(k(1, "GSP Firmware Version", driver if m.architecture == "Hopper" else "N/A"))
    ident += [k(1, "IBMNPU"), k(2, "Relaxed Ordering Mode", "N/A"), k(1, "PCI"), k(2, "Bus", f"0x{g.bus:02X}"),
              k(2, "Device", "0x00"), k(2, "Domain", "0x0000")]
    if new:
        ident += [k(2, "Base Classcode", "0x3"), k(2, "Sub Classcode", "0x2")]
    ident += [
        k(2, "Device Id", f"0x{m.device_id:04X}10DE"), k(2, "Bus Id", g.bdf), k(2, "Sub System Id", f"0x{m.subsystem:08X}"),
        k(2, "GPU Link Info"), k(3, "PCIe Generation"), k(4, "Max", str(m.pcie_gen)), k(4, "Current", str(g.pcie_gen)),
        k(4, "Device Current", str(g.pcie_gen)), k(4, "Device Max", str(m.pcie_gen)), k(4, "Host Max", str(m.pcie_gen)),
        k(3, "Link Width"), k(4, "Max", f"{m.pcie_width}x"), k(4, "Current", f"{m.pcie_width}x"),
        k(2, "Bridge Chip"), k(3, "Type", "N/A"), k(3, "Firmware", "N/A"),
        k(2, "Replays Since Reset", "0"), k(2, "Replay Number Rollovers", "0"),
        k(2, "Tx Throughput", "0 KB/s"), k(2, "Rx Throughput", "0 KB/s"),
        k(2, "Atomic Caps Inbound", "N/A"), k(2, "Atomic Caps Outbound", "N/A"),
        k(1, "Fan Speed", "N/A"),
    ]
    performance = [
        k(1, "Performance State", "P0"), k(1, "Clocks Event Reasons"),
        k(2, "Idle", _active(reasons["gpu_idle"])), k(2, "Applications Clocks Setting", _active(False)),
        k(2, "SW Power Cap", _active(reasons["sw_power_cap"])), k(2, "HW Slowdown", _active(reasons["hw_slowdown"])),
        k(3, "HW Thermal Slowdown", _active(reasons["hw_thermal_slowdown"])),
        k(3, "HW Power Brake Slowdown", _active(False)), k(2, "Sync Boost", _active(False)),
        k(2, "SW Thermal Slowdown", _active(reasons["sw_thermal_slowdown"])),
        k(2, "Display Clock Setting", _active(False)),
    ]
    mem = [
        k(1, "FB Memory Usage"), k(2, "Total", f"{m.memory_mib} MiB"), k(2, "Reserved", f"{m.memory_reserved_mib} MiB"),
        k(2, "Used", f"{g.memory_used} MiB"), k(2, "Free", f"{g.memory_free} MiB"),
        k(1, "BAR1 Memory Usage"), k(2, "Total", f"{m.bar1_mib} MiB"), k(2, "Used", "1 MiB"), k(2, "Free", f"{m.bar1_mib - 1} MiB"),
        k(1, "Conf Compute Protected Memory Usage"), k(2, "Total", "0 MiB"), k(2, "Used", "0 MiB"), k(2, "Free", "0 MiB"),
    ]
    util = [k(1, "Utilization"), k(2, "Gpu", f"{g.utilization} %"), k(2, "Memory", f"{g.utilization // 3} %"),
            k(2, "Encoder", "0 %"), k(2, "Decoder", "0 %"), k(2, "JPEG", "0 %"), k(2, "OFA", "0 %")]
    stats = lambda title: [k(1, title), k(2, "Active Sessions", "0"), k(2, "Average FPS", "0"),  # noqa: E731
                           k(2, "Average Latency", "0")]
    ecc = [k(1, "ECC Mode"), k(2, "Current", "Enabled"), k(2, "Pending", "Enabled"), k(1, "ECC Errors")]
    for scope, count in (("Volatile", g.ecc_volatile), ("Aggregate", g.ecc_aggregate)):
        ecc.append(k(2, scope))
        if hopper:
            ecc += [k(3, "SRAM Correctable", "0"), k(3, "SRAM Uncorrectable Parity", "0"),
                    k(3, "SRAM Uncorrectable SEC-DED", "0"), k(3, "DRAM Correctable", "0"),
                    k(3, "DRAM Uncorrectable", str(count))]
            if scope == "Aggregate":
                ecc.append(k(3, "SRAM Threshold Exceeded", "No"))
        else:
            ecc += [k(3, "SRAM Correctable", "0"), k(3, "SRAM Uncorrectable", "0"),
                    k(3, "DRAM Correctable", "0"), k(3, "DRAM Uncorrectable", str(count))]
    if hopper:
        ecc += [k(2, "Aggregate Uncorrectable SRAM Sources")] + [
            k(3, f"SRAM {where}", "0") for where in ("L2", "SM", "Microcontroller", "PCIE", "Other")]
    if turing:
        retired = [k(1, "Retired Pages"), k(2, "Single Bit ECC", "0"), k(2, "Double Bit ECC", str(g.ecc_aggregate)),
                   k(2, "Pending Page Blacklist", "Yes" if g.remap_pending else "No")]
        remap = [k(1, "Remapped Rows", "N/A")]
    else:
        retired = [k(1, "Retired Pages"), k(2, "Single Bit ECC", "N/A"), k(2, "Double Bit ECC", "N/A"),
                   k(2, "Pending Page Blacklist", "N/A")]
        remap = [k(1, "Remapped Rows"), k(2, "Correctable Error", "0"), k(2, "Uncorrectable Error", str(g.ecc_aggregate)),
                 k(2, "Pending", "Yes" if g.remap_pending else "No"), k(2, "Remapping Failure Occurred", "No"),
                 k(2, "Bank Remap Availability Histogram"), k(3, "Max", f"{2560 if hopper else 640} bank(s)"),
                 k(3, "High", "0 bank(s)"), k(3, "Partial", "0 bank(s)"), k(3, "Low", "0 bank(s)"), k(3, "None", "0 bank(s)")]
    mem_temp = "N/A" if g.memory_temperature is None else f"{g.memory_temperature} C"
    if hopper:
        limit = m.temp_max_operating_c
        temperature = [k(1, "Temperature"), k(2, "GPU Current Temp", f"{g.temperature} C"),
                       k(2, "GPU T.Limit Temp", f"{g.tlimit()} C"),
                       k(2, "GPU Shutdown T.Limit Temp", f"{limit - m.temp_shutdown_c} C"),
                       k(2, "GPU Slowdown T.Limit Temp", f"{limit - m.temp_slowdown_c} C"),
                       k(2, "GPU Max Operating T.Limit Temp", "0 C"), k(2, "GPU Target Temperature", "N/A"),
                       k(2, "Memory Current Temp", mem_temp), k(2, "Memory Max Operating T.Limit Temp", "0 C")]
    else:
        temperature = [k(1, "Temperature"), k(2, "GPU Current Temp", f"{g.temperature} C"),
                       k(2, "GPU T.Limit Temp", "N/A"), k(2, "GPU Shutdown Temp", f"{m.temp_shutdown_c} C"),
                       k(2, "GPU Slowdown Temp", f"{m.temp_slowdown_c} C"),
                       k(2, "GPU Max Operating Temp", f"{m.temp_max_operating_c} C"), k(2, "GPU Target Temperature", "N/A"),
                       k(2, "Memory Current Temp", mem_temp),
                       k(2, "Memory Max Operating Temp", "N/A" if g.memory_temperature is None else "95 C")]
    power = [k(1, "GPU Power Readings"), k(2, "Power Draw", f"{g.power_draw:.2f} W"),
             k(2, "Current Power Limit", f"{g.power_limit:.2f} W"), k(2, "Requested Power Limit", f"{g.power_limit:.2f} W"),
             k(2, "Default Power Limit", f"{m.power_default_w:.2f} W"), k(2, "Min Power Limit", f"{m.power_min_w:.2f} W"),
             k(2, "Max Power Limit", f"{m.power_max_w:.2f} W")]
    if new:
        power += [k(1, "GPU Memory Power Readings "), k(2, "Power Draw", "N/A")]
    power += [k(1, "Module Power Readings")] + [k(2, key, "N/A") for key in (
        "Power Draw", "Current Power Limit", "Requested Power Limit", "Default Power Limit", "Min Power Limit",
        "Max Power Limit")]
    app_g, app_m = m.clocks_applications
    clocks = [k(1, "Clocks"), k(2, "Graphics", f"{graphics} MHz"), k(2, "SM", f"{sm} MHz"), k(2, "Memory", f"{memory} MHz"),
              k(2, "Video", f"{video} MHz"), k(1, "Applications Clocks"), k(2, "Graphics", f"{app_g} MHz"),
              k(2, "Memory", f"{app_m} MHz"), k(1, "Default Applications Clocks"), k(2, "Graphics", f"{app_g} MHz"),
              k(2, "Memory", f"{app_m} MHz"), k(1, "Deferred Clocks"), k(2, "Memory", "N/A"), k(1, "Max Clocks"),
              k(2, "Graphics", f"{m.clocks_max[0]} MHz"), k(2, "SM", f"{m.clocks_max[1]} MHz"),
              k(2, "Memory", f"{m.clocks_max[2]} MHz"), k(2, "Video", f"{m.clocks_max[3]} MHz"),
              k(1, "Max Customer Boost Clocks"), k(2, "Graphics", f"{m.clocks_max[0]} MHz"),
              k(1, "Clock Policy"), k(2, "Auto Boost", "N/A"), k(2, "Auto Boost Default", "N/A")]
    voltage = [k(1, "Voltage"), k(2, "Graphics", "N/A" if turing else "718.750 mV")]
    fabric = fabric_block(g, driver, k)
    return [("", ident), ("PERFORMANCE", performance), ("", [k(1, "Sparse Operation Mode", "Disabled")]),
            ("MEMORY", mem), ("COMPUTE", [k(1, "Compute Mode", "Default")]), ("UTILIZATION", util),
            ("ENCODER_STATS", stats("Encoder Stats")), ("FBC_STATS", stats("FBC Stats")), ("ECC", ecc),
            ("PAGE_RETIREMENT", retired), ("ROW_REMAPPER", remap), ("TEMPERATURE", temperature),
            ("POWER", power), ("CLOCK", clocks), ("VOLTAGE", voltage), ("", fabric),
            ("PIDS", [k(1, "Processes", "None")])]


def fabric_block(g: gpu_state.Gpu, driver: str, k) -> list[str]:
    """The Fabric section: 535 prints State and Status only; 550 and 565 add the ids and a
    Health/Bandwidth line, 570 the route lines, 590 a Summary first and Incorrect Configuration
    last (the 535.161.08, 565.57.01, 570.124.06 and 590.48.01 captures)."""
    lines = [k(1, "Fabric"), k(2, "State", g.fabric_state), k(2, "Status", g.fabric_status)]
    major = int(driver.split(".")[0])
    if major < 550:
        return lines
    lines += [k(2, "CliqueId", g.clique_id), k(2, "ClusterUUID", g.cluster_uuid), k(2, "Health")]
    rack = g.cluster_uuid not in ("N/A", gpu_state.ZERO_UUID)
    flag, summary, bandwidth = ("False", "Healthy", "Full") if rack else ("N/A", "N/A", "N/A")
    if major >= 580:
        lines.append(k(3, "Summary", summary))
    lines.append(k(3, "Bandwidth", bandwidth))
    if major >= 570:
        lines += [k(3, "Route Recovery in progress", flag), k(3, "Route Unhealthy", flag),
                  k(3, "Access Timeout Recovery", flag)]
    if major >= 580:
        lines.append(k(3, "Incorrect Configuration", flag))
    return lines


def query_report(gpus: list, driver: str, sections: set | None, attached: int) -> str:
    lines = ["", "==============NVSMI LOG==============", "",
             _kv(0, "Timestamp", time.strftime("%a %b %e %H:%M:%S %Y")), _kv(0, "Driver Version", driver),
             _kv(0, "CUDA Version", gpu_state.cuda_version(driver)), "", _kv(0, "Attached GPUs", str(attached))]
    for g in gpus:
        lines.append(f"GPU {g.bdf}")
        for section, block in gpu_blocks(g, driver):
            if sections is None or section in sections:
                lines.extend(block)
        lines.append("")
    return "\n".join(lines) + "\n"


def table(gpus: list, driver: str) -> str:
    """The default ``nvidia-smi`` output, in the 535 (89 columns) or 550 (91 columns) layout."""
    old = driver.startswith("535")
    cuda = gpu_state.cuda_version(driver)
    mid, usage_width, cap_width, used_width, total_width = (22, 17, 3, 7, 5) if old else (24, 16, 4, 8, 6)
    inner = 41 + 1 + mid + 1 + 22
    bar = "+" + "-" * inner + "+"
    sep = "+" + "-" * 41 + "+" + "-" * mid + "+" + "-" * 22 + "+"
    out = [time.strftime("%a %b %e %H:%M:%S %Y"), bar,
           f"| NVIDIA-SMI {driver:<23}Driver Version: {driver:<{mid - 9}}CUDA Version: {cuda:<9}|",
           "|" + "-" * 41 + "+" + "-" * mid + "+" + "-" * 22 + "+",
           "| GPU  Name                 Persistence-M | " + "Bus-Id".ljust(mid - 8) + "Disp.A | Volatile Uncorr. ECC |",
           "| Fan  Temp   Perf          Pwr:Usage/Cap | " + "Memory-Usage".rjust(mid - 2) + " | GPU-Util  Compute M. |",
           "|                                         | " + " " * (mid - 2) + " |               MIG M. |",
           "|" + "=" * 41 + "+" + "=" * mid + "+" + "=" * 22 + "|"]
    for g in gpus:
        m = g.model
        name = m.name if len(m.name) <= 26 else m.name[:23] + "..."
        mig = "N/A" if m.architecture == "Turing" else "Disabled"
        memory = f"{g.memory_used:>{used_width}}MiB / {m.memory_mib:>{total_width}}MiB"
        out += [f"| {g.index:>3}  {name:<26}     {'On' if g.persistence else 'Off':<3} |{g.bdf:>{mid - 5}} Off |"
                f"{g.ecc_volatile:>21} |",
                f"| N/A   {g.temperature:>2}C    P0{f'{int(g.power_draw)}W':>{usage_width}} / "
                f"{int(g.power_limit):>{cap_width}}W |{memory} |{g.utilization:>7}%      Default |",
                f"|                                         |{' ' * mid}|{mig:>21} |", sep]
    width = inner
    out += [" " * (width + 2) if old else "", bar, "| Processes:".ljust(width + 1) + "|",
            "|  GPU   GI   CI        PID   Type   Process name".ljust(width - 10) + "GPU Memory |",
            "|        ID   ID".ljust(width - 10) + "Usage      |", "|" + "=" * width + "|",
            "|  No running processes found".ljust(width + 1) + "|", bar]
    return "\n".join(out) + "\n"
