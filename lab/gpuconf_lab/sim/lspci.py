"""``lspci`` for the profile's PCI devices (pciutils 3.9 formats: default, ``-nn``, ``-n``, ``-D``,
``-k``, ``-vv`` link status, ``-m``, filters ``-d`` and ``-s``).

``-k`` reads the driver binding from sysfs, and ``-vv``'s ``LnkSta`` reports the current link
speed, so a ``pcie-downgrade`` fault shows as ``Speed 8GT/s (downgraded)``.
"""
from __future__ import annotations

import os
import sys

import entry
import modules
import state
import sysfs

CLASSES = {0x0600: "Host bridge", 0x0604: "PCI bridge", 0x0302: "3D controller", 0x0680: "Bridge",
           0x0207: "Infiniband controller"}
VENDORS = {0x8086: "Intel Corporation", 0x10DE: "NVIDIA Corporation", 0x15B3: "Mellanox Technologies"}
SPEED = {1: "2.5GT/s", 2: "5GT/s", 3: "8GT/s", 4: "16GT/s", 5: "32GT/s"}


def devices() -> list[dict]:
    profile = state.profile()
    found = [{"bus": 0, "slot": 0, "cls": 0x0600, "vendor": 0x8086, "device": 0x09A2, "name": "Ice Lake Memory Map/VT-d",
              "rev": "04", "gen": 0}]
    for bus in profile.gpu_buses:
        found.append({"bus": bus, "slot": 0, "cls": 0x0302, "vendor": 0x10DE, "device": profile.gpu.device_id,
                      "name": profile.gpu.lspci_name, "rev": "a1", "gen": profile.gpu.pcie_gen,
                      "subsystem": profile.gpu.subsystem >> 16, "modules": "nvidiafb, nouveau"})
    for bus in profile.nvswitch_buses:
        found.append({"bus": bus, "slot": 0, "cls": 0x0680, "vendor": 0x10DE, "device": profile.nvswitch_device_id,
                      "name": profile.nvswitch_lspci_name, "rev": "a1", "gen": profile.gpu.pcie_gen})
    if profile.hca:
        vendor_name = profile.hca.lspci_name.split(" ", 2)
        for bus in profile.hca_buses:
            found.append({"bus": bus, "slot": 0, "cls": 0x0207, "vendor": 0x15B3, "device": profile.hca.device_id,
                          "name": vendor_name[2], "rev": "", "gen": 5 if profile.hca.rate_gbps >= 400 else 4,
                          "subsystem": 0x0017, "modules": "mlx5_core"})
    return sorted(found, key=lambda d: (d["bus"], d["slot"]))


def _driver(bdf: str) -> str | None:
    link = state.path(f"/sys/bus/pci/devices/{bdf}/driver")
    return os.path.basename(os.readlink(link)) if os.path.islink(link) else None


def _current_gen(bdf: str, default: int) -> int:
    text = state.read_text(f"/sys/bus/pci/devices/{bdf}/current_link_speed", "") or ""
    for gen, speed in sysfs.LINK_SPEED.items():
        if text.strip() == speed:
            return gen
    return default


def main(argv: list[str]) -> int:
    flags, vendor_filter, slot_filter = set(), None, None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-d", "-s") and i + 1 < len(argv):
            i += 1
            if arg == "-d":
                vendor_filter = argv[i]
            else:
                slot_filter = argv[i]
        elif arg.startswith("-") and not arg.startswith("--"):
            if arg[1:] == "nn":
                flags.add("nn")
            elif arg[1:] == "vv" or arg[1:] == "vvv":
                flags.add("vv")
            else:
                flags.update(arg[1:])
        elif arg == "--version":
            print("lspci version 3.9.0")
            return 0
        i += 1
    out = []
    for dev in devices():
        bdf = f"0000:{dev['bus']:02x}:{dev['slot']:02x}.0"
        short = bdf[5:]
        if vendor_filter:
            vendor, _, device = vendor_filter.partition(":")
            if vendor and int(vendor, 16) != dev["vendor"] or device and int(device.split(":")[0], 16) != dev["device"]:
                continue
        if slot_filter and not bdf.endswith(slot_filter.lower()):
            continue
        address = bdf if "D" in flags else short
        rev = f" (rev {dev['rev']})" if dev["rev"] else ""
        cls, vendor_name = CLASSES[dev["cls"]], VENDORS[dev["vendor"]]
        if "m" in flags:
            out.append(f'{address} "{cls}" "{vendor_name}" "{dev["name"]}" -r{dev["rev"]} "{vendor_name}" '
                       f'"Device {dev.get("subsystem", 0):04x}"')
            continue
        if "nn" in flags:
            line = f"{address} {cls} [{dev['cls']:04x}]: {vendor_name} {dev['name']} [{dev['vendor']:04x}:{dev['device']:04x}]{rev}"
        elif "n" in flags:
            line = f"{address} {dev['cls']:04x}: {dev['vendor']:04x}:{dev['device']:04x}{rev}"
        else:
            line = f"{address} {cls}: {vendor_name} {dev['name']}{rev}"
        out.append(line)
        if "v" in flags or "vv" in flags:
            out.append(f"\tSubsystem: {vendor_name} Device {dev.get('subsystem', 0):04x}")
            if dev["gen"] and "vv" in flags:
                gen = _current_gen(bdf, dev["gen"])
                out.append(f"\t\tLnkCap:\tPort #0, Speed {SPEED[dev['gen']]}, Width x16, ASPM not supported")
                ok = "ok" if gen == dev["gen"] else "downgraded"
                out.append(f"\t\tLnkSta:\tSpeed {SPEED[gen]} ({ok}), Width x16 (ok)")
        if "k" in flags or "v" in flags or "vv" in flags:
            if "v" not in flags and "vv" not in flags and dev.get("subsystem") is not None:
                out.append(f"\tSubsystem: {vendor_name} Device {dev['subsystem']:04x}")
            driver = _driver(bdf)
            if driver:
                out.append(f"\tKernel driver in use: {driver}")
            if dev.get("modules"):
                extra = ", nvidia_drm, nvidia" if dev["vendor"] == 0x10DE and "nvidia" in modules.index() else ""
                out.append(f"\tKernel modules: {dev['modules']}{extra}")
        if "v" in flags or "vv" in flags:
            out.append("")
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0



if __name__ == "__main__":
    entry.run(main)
