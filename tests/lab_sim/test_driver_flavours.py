"""Open and proprietary kernel modules, Secure Boot, and the signed precompiled modules.

What a user of the driver tasks notices: which flavour ``/proc/driver/nvidia/version`` and
``modinfo`` name, which GPUs a flavour refuses, and that under Secure Boot only signed
modules load. Parsed with gpuconf's own fact parsers where it has them.
"""
from __future__ import annotations

from gpuconf.facts.nvidia.driver import parse_modinfo, parse_proc_driver_version

GCC = "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n"
PRECOMPILED = "linux-modules-nvidia-580-open-6.1.0-18-amd64"


def with_architecture(node, architecture: str) -> None:
    """Give this node's T4 another architecture (as the h200/b200/v100 profiles will have)."""
    profiles = node.path("/usr/lib/gpuconf-lab/sim/profiles.py")
    profiles.write_text(profiles.read_text() + (
        "\nimport dataclasses as _dc\n"
        f"PROFILES['t4'] = _dc.replace(PROFILES['t4'], gpu=_dc.replace(TESLA_T4, architecture={architecture!r}))\n"))


def install_precompiled(node, package: str = PRECOMPILED, version: str = "580.95.05",
                        kernel: str = "6.1.0-18-amd64") -> None:
    """What ``apt-get install <package>`` unpacks, and its postinst's depmod."""
    node.install("nvidia-kernel-common-580", version)
    node.install("nvidia-utils-580", version)
    node.install(package, version)
    node.run("kmod", "depmod", "-a", kernel, check=True)


def test_proprietary_modules_name_themselves_like_the_real_driver(make_node):
    node = make_node("a100", driver="535.104.05")
    assert node.read("/proc/driver/nvidia/version") == (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n" + GCC)
    info = parse_modinfo(node.run("kmod", "modinfo", "nvidia").stdout)
    assert (info.license, info.flavour) == ("NVIDIA", "proprietary")
    assert node.run("kmod", "modinfo", "-F", "signer", "nvidia").stdout == ""


def test_an_open_dkms_build_loads_with_the_open_banner(make_node):
    node = make_node("a100")
    node.install_driver("580.95.05", open_modules=True)
    node.blacklist_nouveau()
    node.boot()
    assert node.read("/proc/driver/nvidia/version") == (
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
        "(dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:41:26 UTC 2025\n" + GCC)
    loaded = parse_proc_driver_version(node.read("/proc/driver/nvidia/version"))
    assert (loaded.version, loaded.flavour, loaded.builder) == ("580.95.05", "open", "dvs-builder@U16-I3-B03-4-3")
    assert node.run("kmod", "modinfo", "-F", "license", "nvidia").stdout == "Dual MIT/GPL\n"
    assert "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05" in node.run("journalctl", "dmesg").stdout
    assert node.read("/run/gpuconf-lab/proc/tainted") == "12288\n"      # O and E: no P for a GPL-compatible module


def test_open_modules_refuse_a_gpu_without_gsp(make_node):
    node = make_node("t4")
    with_architecture(node, "Volta")
    node.install_driver("580.95.05", open_modules=True)
    node.blacklist_nouveau()
    node.boot()
    assert "nvidia" not in node.lsmod()
    done = node.run("kmod", "modprobe", "nvidia")
    assert (done.returncode, done.stderr) == (1, "modprobe: ERROR: could not insert 'nvidia': No such device\n")
    kernel = node.run("journalctl", "dmesg").stdout
    assert ("NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:1eb8)\nNVRM: installed in this system is not "
            "supported by open\nNVRM: nvidia.ko because it does not include the required GPU\n"
            "NVRM: System Processor (GSP).") in kernel
    assert "NVRM: None of the NVIDIA devices were initialized." in kernel


def test_proprietary_modules_refuse_blackwell_and_the_open_ones_drive_it(make_node):
    node = make_node("t4")
    with_architecture(node, "Blackwell")
    node.install_driver("580.95.05")
    node.blacklist_nouveau()
    node.boot()
    assert "nvidia" not in node.lsmod()
    assert "requires use of the NVIDIA open kernel" in node.run("journalctl", "dmesg").stdout
    node.run("dkms", "remove", "-m", "nvidia", "-v", "580.95.05", "--all", check=True)
    node.install_driver("580.95.05", open_modules=True)
    assert node.run("kmod", "modprobe", "nvidia").returncode == 0
    assert parse_proc_driver_version(node.read("/proc/driver/nvidia/version")).flavour == "open"


def test_secure_boot_refuses_the_unsigned_dkms_build_from_the_next_boot(make_node):
    node = make_node("a100", driver="535.104.05")
    assert node.tool("/usr/bin/mokutil", "--sb-state").stdout == "SecureBoot disabled\n"
    node.run("fault", "secure-boot", "on", check=True)
    assert node.tool("/usr/bin/mokutil", "--sb-state").stdout == "SecureBoot disabled\n"   # firmware: at boot
    assert "nvidia" in node.lsmod()
    node.boot()
    assert node.tool("/usr/bin/mokutil", "--sb-state").stdout == "SecureBoot enabled\n"
    assert "nvidia" not in node.lsmod() and not node.path("/proc/driver/nvidia/version").exists()
    done = node.tool("/usr/sbin/modprobe", "nvidia")
    assert (done.returncode, done.stderr) == (1, "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n")
    assert "Loading of unsigned module is rejected" in node.run("journalctl", "dmesg").stdout
    node.run("fault", "clear", "secure-boot", check=True)
    node.boot()
    assert node.tool("/usr/bin/mokutil", "--sb-state").stdout == "SecureBoot disabled\n" and "nvidia" in node.lsmod()


def test_secure_boot_loads_the_signed_precompiled_modules(make_node):
    node = make_node("a100")
    node.run("fault", "secure-boot", "on", check=True)
    install_precompiled(node)
    node.blacklist_nouveau()
    node.boot()
    assert node.tool("/usr/bin/mokutil", "--sb-state").stdout == "SecureBoot enabled\n"
    assert "nvidia" in node.lsmod()
    modinfo = node.run("kmod", "modinfo", "nvidia").stdout
    assert "filename:       /lib/modules/6.1.0-18-amd64/kernel/nvidia-580/nvidia.ko\n" in modinfo
    assert "signer:         Canonical Ltd. Kernel Module Signing\n" in modinfo and "\nsig_key:        " in modinfo
    assert parse_modinfo(modinfo).flavour == "open"
    assert parse_proc_driver_version(node.read("/proc/driver/nvidia/version")).version == "580.95.05"
    assert node.read("/run/gpuconf-lab/proc/tainted") == "4096\n"       # O only: signed and GPL-compatible


def test_a_kernel_upgrade_keeps_the_driver_when_its_precompiled_modules_are_installed(make_node):
    node = make_node("a100")
    install_precompiled(node)
    install_precompiled(node, PRECOMPILED.replace("6.1.0-18-amd64", "6.1.0-21-amd64"), kernel="6.1.0-21-amd64")
    node.blacklist_nouveau()
    node.run("fault", "kernel-upgrade", "6.1.0-21-amd64", check=True)
    node.boot()
    assert node.run("uname", "-r").stdout == "6.1.0-21-amd64\n"
    assert "nvidia" in node.lsmod() and node.run("dkms", "status").stdout == ""
    assert "kernel/nvidia-580/nvidia.ko:" in node.read("/lib/modules/6.1.0-21-amd64/modules.dep")
