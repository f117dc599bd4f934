"""``ibstat``, ``ibstatus``, ``ibv_devinfo`` and ``ibv_devices`` over the simulated HCAs.

They read the same state as sysfs: an HCA exists while ``mlx5_ib`` is loaded, ``ibv_*``
also need ``ib_uverbs``, and a port is Active only while a subnet manager runs somewhere in
the lab (``fabric``), else it stays Initializing. Formats are the real tools' (tabs, as in
``fixtures/real/ibstat`` and ``fixtures/real/ibv_devinfo``).
"""
from __future__ import annotations

import os
import sys

import entry
import fabric
import identity
import modules
import state


def cas() -> list[str]:
    """CA names present now (``mlx5_0`` ...), in order."""
    if not modules.is_loaded("mlx5_ib"):
        return []
    return [f"mlx5_{i}" for i in range(state.profile().hca_count)]


def port(ca: str) -> dict:
    index = int(ca.split("_")[1])
    hca = state.profile().hca
    active = fabric.is_active()
    guid = identity.hca_guid(index)
    return {"index": index, "hca": hca, "active": active, "guid": guid,
            "lid": identity.port_lid(index) if active else 0, "sm_lid": 1 if active else 0}


def ibstat(args: list[str]) -> int:
    names = cas()
    flags = {a for a in args if a.startswith("-")}
    wanted = [a for a in args if not a.startswith("-")]
    if "-V" in flags or "--version" in flags:
        print("ibstat BUILD VERSION: 44.0 Build date: Jan 10 2023 00:00:00")
        return 0
    if not names and not wanted:
        sys.stderr.write(f"ibpanic: [{os.getpid()}] main: can't list IB device names: No such file or directory\n")
        return 255
    if "-l" in flags or "--list_of_cas" in flags:
        print("\n".join(names))
        return 0
    if wanted and wanted[0] not in names:
        sys.stderr.write(f"ibpanic: [{os.getpid()}] main: stat of IB device '{wanted[0]}' failed: "
                         "No such file or directory\n")
        return 255
    selected = wanted[:1] or names
    if "-p" in flags or "--port_list" in flags:
        for ca in selected:
            print(f"0x{port(ca)['guid']}")
        return 0
    out = []
    for ca in selected:
        p = port(ca)
        hca = p["hca"]
        out += [f"CA '{ca}'", f"\tCA type: {hca.ca_type}", "\tNumber of ports: 1", f"\tFirmware version: {hca.firmware}",
                "\tHardware version: 0", f"\tNode GUID: 0x{p['guid']}", f"\tSystem image GUID: 0x{p['guid']}",
                "\tPort 1:", f"\t\tState: {'Active' if p['active'] else 'Initializing'}", "\t\tPhysical state: LinkUp",
                f"\t\tRate: {hca.rate_gbps}", f"\t\tBase lid: {p['lid']}", "\t\tLMC: 0", f"\t\tSM lid: {p['sm_lid']}",
                "\t\tCapability mask: 0xa651e848", f"\t\tPort GUID: 0x{p['guid']}", "\t\tLink layer: InfiniBand"]
    print("\n".join(out))
    return 0


def ibstatus(args: list[str]) -> int:
    names = [a for a in args if not a.startswith("-")] or cas()
    blocks = []
    for ca in names:
        if ca not in cas():
            sys.stderr.write(f"Fatal error:  device '{ca}': sys files not found (/sys/class/infiniband/{ca}/ports)\n")
            return 1
        p = port(ca)
        state_text = "4: ACTIVE" if p["active"] else "2: INIT"
        blocks.append(f"Infiniband device '{ca}' port 1 status:\n"
                      f"\tdefault gid:\t fe80:0000:0000:0000:{identity.guid_colons(p['guid'])}\n"
                      f"\tbase lid:\t 0x{p['lid']:x}\n\tsm lid:\t\t 0x{p['sm_lid']:x}\n"
                      f"\tstate:\t\t {state_text}\n\tphys state:\t 5: LinkUp\n"
                      f"\trate:\t\t {p['hca'].rate_gbps} Gb/sec ({p['hca'].rate_name})\n\tlink_layer:\t InfiniBand\n")
    if blocks:
        print("\n".join(blocks))
    return 0


def _verbs_devices() -> list[str] | None:
    """None when libibverbs cannot work at all (no ib_uverbs), else the devices."""
    if not state.exists("/sys/class/infiniband_verbs/abi_version"):
        return None
    return cas()


def ibv_devinfo(args: list[str]) -> int:
    devices = _verbs_devices()
    if devices is None:
        sys.stderr.write("Failed to get IB devices list: Function not implemented\n")
        return 255
    if "-l" in args or "--list" in args:
        print(f"{len(devices)} HCA{'s' if len(devices) != 1 else ''} found:")
        for name in devices:
            print(f"\t{name}")
        return 0
    if not devices:
        print("No IB devices found")
        return 255
    wanted = None
    for i, arg in enumerate(args):
        if arg in ("-d", "--ib-dev") and i + 1 < len(args):
            wanted = args[i + 1]
        elif arg.startswith("--ib-dev="):
            wanted = arg.split("=", 1)[1]
    if wanted and wanted not in devices:
        sys.stderr.write(f"IB device '{wanted}' wasn't found\n")
        return 255
    blocks = []
    for name in [wanted] if wanted else devices:
        p = port(name)
        hca = p["hca"]
        guid = identity.guid_colons(p["guid"])
        blocks.append("\n".join([
            f"hca_id:\t{name}", "\ttransport:\t\t\tInfiniBand (0)", f"\tfw_ver:\t\t\t\t{hca.firmware}",
            f"\tnode_guid:\t\t\t{guid}", f"\tsys_image_guid:\t\t\t{guid}", "\tvendor_id:\t\t\t0x02c9",
            f"\tvendor_part_id:\t\t\t{hca.vendor_part_id}", "\thw_ver:\t\t\t\t0x0", f"\tboard_id:\t\t\t{hca.board_id}",
            "\tphys_port_cnt:\t\t\t1", "\t\tport:\t1",
            f"\t\t\tstate:\t\t\t{'PORT_ACTIVE (4)' if p['active'] else 'PORT_INIT (2)'}",
            "\t\t\tmax_mtu:\t\t4096 (5)", f"\t\t\tactive_mtu:\t\t{'4096 (5)' if p['active'] else '4096 (5)'}",
            f"\t\t\tsm_lid:\t\t\t{p['sm_lid']}", f"\t\t\tport_lid:\t\t{p['lid']}", "\t\t\tport_lmc:\t\t0x00",
            "\t\t\tlink_layer:\t\tInfiniBand", ""]))
    print("\n".join(blocks))
    return 0


def ibv_devices(args: list[str]) -> int:
    devices = _verbs_devices()
    if devices is None:
        sys.stderr.write("Failed to get IB devices list: Function not implemented\n")
        return 1
    print("    device          \t   node GUID\n    ------          \t----------------")
    for name in devices:
        print(f"    {name:<16}\t{port(name)['guid']}")
    return 0


def main(argv: list[str]) -> int:
    tool, args = (argv[0], argv[1:]) if argv else ("ibstat", [])
    handler = {"ibstat": ibstat, "ibstatus": ibstatus, "ibv_devinfo": ibv_devinfo, "ibv_devices": ibv_devices}
    return handler.get(tool, ibstat)(args)


if __name__ == "__main__":
    entry.run(main)
