"""Faults for health probes: each shows up in every tool that would report it on a real host."""
from __future__ import annotations

import fcntl
import os
import struct

import pytest

from gpuconf.facts.nvidia import decode_clock_event_reasons
from gpuconf.facts.nvidia.csv import parse_query_csv
from gpuconf.facts.nvidia.query import parse_nvidia_smi_query
from gpuconf.facts.xid import parse_xid_events


@pytest.fixture
def gpu_node(make_node):
    return make_node("a100", driver="535.104.05")


def query(node, fields: str, gpu: str = "0") -> dict:
    return parse_query_csv(node.smi(f"--query-gpu={fields}", "--format=csv", "-i", gpu).stdout).rows[0]


def test_healthy_gpus_are_idle_and_cool(gpu_node):
    row = query(gpu_node, "temperature.gpu,clocks_event_reasons.active,pcie.link.gen.current,pcie.link.gen.max")
    assert row["temperature.gpu"] < 80 and row["pcie.link.gen.current"] == row["pcie.link.gen.max"] == 4
    assert decode_clock_event_reasons(row["clocks_event_reasons.active"]).active == ("gpu_idle",)


def test_temperature_above_slowdown_throttles(gpu_node):
    gpu_node.run("fault", "temp", "91", "--gpu", "2", check=True)
    hot = query(gpu_node, "temperature.gpu,clocks_event_reasons.active,clocks_event_reasons.hw_thermal_slowdown", "2")
    assert hot["temperature.gpu"] == 91 and hot["clocks_event_reasons.hw_thermal_slowdown"] == "Active"
    assert "hw_thermal_slowdown" in decode_clock_event_reasons(hot["clocks_event_reasons.active"]).active
    gpu = parse_nvidia_smi_query(gpu_node.smi("-q", "-i", "2").stdout).gpus[0]
    assert gpu.temperature.gpu_c == 91 and "hw_thermal_slowdown" in gpu.clock_event_reasons.active
    assert query(gpu_node, "temperature.gpu", "1")["temperature.gpu"] < 80
    gpu_node.boot()                                          # a hot GPU stays hot across a reboot
    assert query(gpu_node, "temperature.gpu", "2")["temperature.gpu"] == 91
    gpu_node.run("fault", "clear", "temp", check=True)
    assert query(gpu_node, "temperature.gpu", "2")["temperature.gpu"] < 80


def test_pcie_downgrade_shows_in_sysfs_nvidia_smi_and_lspci(gpu_node):
    gpu_node.run("fault", "util", "90", "--gpu", "0", check=True)
    gpu_node.run("fault", "pcie-downgrade", "--gpu", "0", check=True)
    device = "/sys/bus/pci/devices/0000:07:00.0"
    assert gpu_node.read(f"{device}/current_link_speed") == "8.0 GT/s PCIe\n"
    assert gpu_node.read(f"{device}/max_link_speed") == "16.0 GT/s PCIe\n"
    assert gpu_node.read(f"{device}/current_link_width") == "16\n"
    row = query(gpu_node, "pcie.link.gen.current,pcie.link.gen.max,utilization.gpu")
    assert (row["pcie.link.gen.current"], row["pcie.link.gen.max"], row["utilization.gpu"]) == (3, 4, 90)
    lspci = gpu_node.run("lspci", "-vv", "-s", "07:00.0").stdout
    assert "LnkSta:\tSpeed 8GT/s (downgraded), Width x16 (ok)" in lspci
    gpu_node.run("fault", "clear", "pcie-downgrade", check=True)
    assert gpu_node.read(f"{device}/current_link_speed") == "16.0 GT/s PCIe\n"


def test_xid_lines_are_real_format_and_end_with_the_boot(gpu_node):
    gpu_node.run("fault", "xid", "79", "--gpu", "3", check=True)
    gpu_node.run("fault", "xid", "13", check=True)
    dmesg = gpu_node.run("journalctl", "dmesg").stdout
    assert "NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." in dmesg
    events = parse_xid_events(dmesg)
    assert [(e.code, e.pci_address) for e in events] == [(79, "0000:4e:00.0"), (13, "0000:07:00.0")]
    assert parse_xid_events(gpu_node.run("journalctl", "dmesg", "-T").stdout)
    assert parse_xid_events(gpu_node.run("journalctl", "dmesg", "--time-format=iso").stdout)
    assert parse_xid_events(gpu_node.run("journalctl", "journalctl", "-k").stdout)
    gpu_node.boot()
    assert parse_xid_events(gpu_node.run("journalctl", "dmesg").stdout) == ()


def test_ecc_errors_volatile_and_aggregate(gpu_node):
    gpu_node.run("fault", "ecc", "3", "--gpu", "1", check=True)
    fields = "ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,remapped_rows.pending"
    row = query(gpu_node, fields, "1")
    assert (row["ecc.errors.uncorrected.volatile.total"], row["ecc.errors.uncorrected.aggregate.total"]) == (3, 3)
    assert row["remapped_rows.pending"] == "Yes"
    ecc = parse_nvidia_smi_query(gpu_node.smi("-q", "-d", "ECC", "-i", "1").stdout).gpus[0].ecc
    assert ecc.volatile_uncorrected == 3
    gpu_node.boot()                                       # volatile counts reset, the aggregate stays
    row = query(gpu_node, fields, "1")
    assert (row["ecc.errors.uncorrected.volatile.total"], row["ecc.errors.uncorrected.aggregate.total"]) == (0, 3)


def test_dpkg_lock_is_held_with_fcntl_like_apt(gpu_node):
    gpu_node.run("fault", "dpkg-lock", check=True)
    for lock in ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock"):
        fd = os.open(gpu_node.path(lock), os.O_RDWR)
        try:
            probe = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)
            kind, _whence, _start, _len, pid = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, probe))
        finally:
            os.close(fd)
        assert kind == fcntl.F_WRLCK and pid > 0
        with open(f"/proc/{pid}/comm") as handle:
            assert handle.read().strip() == "unattended-upgr"
    gpu_node.run("fault", "clear", "dpkg-lock", check=True)


def test_lspci_lists_the_profile(gpu_node):
    text = gpu_node.run("lspci", "-nn", "-d", "10de:").stdout.splitlines()
    assert text[0] == "07:00.0 3D controller [0302]: NVIDIA Corporation GA100 [A100 SXM4 80GB] [10de:20b2] (rev a1)"
    assert sum("[10de:20b2]" in line for line in text) == 8 and sum("[10de:1af1]" in line for line in text) == 6
    assert "\tKernel driver in use: nvidia" in gpu_node.run("lspci", "-k", "-s", "0f:00.0").stdout
    assert gpu_node.run("lspci", "-D", "-n", "-s", "0c:00.0").stdout == "0000:0c:00.0 0207: 15b3:101b\n"


def test_lockup_and_kmsg_faults(gpu_node):
    from gpuconf.facts.kernel_log import find_lockups

    gpu_node.run("fault", "lockup", check=True)
    gpu_node.run("fault", "kmsg", "NVRM: GPU 0000:07:00.0: RmInitAdapter failed! (0x25:0x65:1457)", check=True)
    dmesg = gpu_node.run("journalctl", "dmesg").stdout
    assert {lockup.kind for lockup in find_lockups(dmesg)} >= {"soft_lockup", "nvidia_ioctl"}
    assert "RmInitAdapter failed!" in dmesg
    assert int(gpu_node.read("/run/gpuconf-lab/proc/tainted")) & 16384


def test_sxid_lines_follow_the_nvswitch_drivers_format_and_fail_the_xid_probe(gpu_node):
    from gpuconf.facts.sxid import parse_sxid_events
    from gpuconf.tasks.health.kernel_log import XidParams, judge_xids

    gpu_node.run("fault", "sxid", "20034", "--switch", "1", "--link", "48", check=True)
    gpu_node.run("fault", "sxid", "12028", "--switch", "3", "--link", "32", "--non-fatal", check=True)
    dmesg = gpu_node.run("journalctl", "dmesg").stdout
    assert "nvidia-nvswitch1: SXid (PCI:0000:c5:00.0): 20034, Fatal, Link 48 LTSSM Fault Up\n" in dmesg
    events = parse_sxid_events(dmesg)
    assert [(e.switch, e.code, e.fatal) for e in events] == [(1, 20034, True), (1, 20034, None),
                                                              (3, 12028, False), (3, 12028, None)]
    findings = {f.bus_id: f for f in judge_xids(dmesg, XidParams(), {}, []) if f.probe == "sxid"}
    assert (findings["0000:c5:00.0"].severity, findings["0000:c5:00.0"].action) == ("failure", "reboot_node")
    assert findings["0000:c7:00.0"].severity == "warning"
    assert gpu_node.run("fault", "sxid", "20034", "--switch", "6").returncode != 0   # the A100 board has 6


def test_unknown_fault_is_refused(node):
    assert node.run("fault", "melt").returncode == 2
    assert "no GPU 9" in node.run("fault", "temp", "90", "--gpu", "9").stderr


def test_nvlink5_xid_lines_carry_the_fields_nvidia_decodes_per_line(make_node):
    from gpuconf.tasks.health.kernel_log import XidParams, judge_xids

    node = make_node("gb200")
    node.run("fault", "xid", "145", "--nonfatal", check=True)
    node.run("fault", "xid", "149", "--nonfatal", "--gpu", "1", check=True)
    node.run("fault", "xid", "149", "--gpu", "2", check=True)
    node.run("fault", "xid", "149", "--gpu", "3", "--intrinfo", "0x026001c6", "--link", "2", check=True)
    dmesg = node.run("journalctl", "dmesg").stdout
    assert "): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000000 0x00000000 " \
           "0x00000000 0x00000000)\n" in dmesg
    decided = {(f.code.number, f.bus_id): (f.severity, f.action, f.rule.split(":")[0])
               for f in judge_xids(dmesg, XidParams(), {}, []) if f.code}
    buses = sorted({bus for _code, bus in decided})
    assert decided == {  # rows of the catalog's "XID 144-150 Decode" sheet (gpuconf/facts/xid_nvlink5_decode.csv)
        (145, buses[0]): ("ok", None, "xid_nvlink5_decode.csv row 25"),  # RLW_RXPIPE 0x8 Non-fatal: IGNORE
        (149, buses[1]): ("ok", None, "xid_nvlink5_decode.csv row 65"),  # NETIR_BER_EVENT 0x1 Non-fatal: IGNORE
        (149, buses[2]): ("failure", "reset_gpu", "xid_nvlink5_decode.csv row 71"),  # NETIR_LINK_DOWN: RESET_GPU
        (149, buses[3]): ("ok", None, "xid_nvlink5_decode.csv row 85"),  # LINK_DOWN subcode 100110: IGNORE
    }
    assert node.run("fault", "xid", "149", "--intrinfo", "0xZZ").returncode != 0
