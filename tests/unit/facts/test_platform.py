"""The platform of a host, from its os-release and its tools: one table, no guess."""
from __future__ import annotations

import ast

import pytest

from gpuconf.facts.base import FileState
from gpuconf.facts.platform import OS_RELEASE, TOOLS_FACT, PlatformUnknown, from_facts, os_facts, resolve
from tests.paths import ROOT

DEB = {"dpkg-query", "apt-get", "update-initramfs", "update-grub", "rpm"}  # rpm too: the lab's Debian nodes have it
EL = {"rpm", "dnf", "dracut", "grubby"}

# os-release files as the distributions ship them (the fields the platform reads, verbatim)
DEBIAN_12 = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n'
UBUNTU_2404 = 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\n'
ROCKY_94 = 'NAME="Rocky Linux"\nVERSION="9.4 (Blue Onyx)"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n'
RHEL_10 = 'NAME="Red Hat Enterprise Linux"\nVERSION="10.0 (Coughlan)"\nID="rhel"\nID_LIKE="centos fedora"\n' \
          'VERSION_ID="10.0"\n'
ALMA_10 = 'NAME="AlmaLinux"\nID="almalinux"\nID_LIKE="rhel centos fedora"\nVERSION_ID="10.0"\n'
NAVY_9 = 'NAME="Navy Linux"\nID="navy"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.2"\n'  # a rebuild by ID_LIKE
SLES_15 = 'NAME="SLES"\nVERSION_ID="15.6"\nID="sles"\nID_LIKE="suse"\n'
ALPINE = 'NAME="Alpine Linux"\nID=alpine\nVERSION_ID=3.20.3\n'


@pytest.mark.parametrize("text, tools, backend, streams, initramfs, boot", [
    (DEBIAN_12, DEB, "apt", False, "update-initramfs", "update-grub"),
    (UBUNTU_2404, DEB, "apt", False, "update-initramfs", "update-grub"),
    (ROCKY_94, EL, "dnf", True, "dracut", "grubby"),
    (RHEL_10, EL, "dnf", False, "dracut", "grubby"),      # EL 10: no driver module streams
    (ALMA_10, EL, "dnf", False, "dracut", "grubby"),
    (NAVY_9, EL, "dnf", True, "dracut", "grubby"),        # unknown ID, known by ID_LIKE
    (SLES_15, {"rpm", "zypper", "dracut"}, "zypper", False, "dracut", None),
    (DEBIAN_12, {"dpkg-query", "apt-get", "dracut"}, "apt", False, "dracut", None),  # Debian with dracut only
])
def test_each_platform_is_resolved_from_os_release_and_tools(text, tools, backend, streams, initramfs, boot):
    platform = resolve(text, tools)
    assert (platform.packages, platform.driver_streams, platform.initramfs, platform.boot_entries) == \
        (backend, streams, initramfs, boot)


def test_the_initramfs_commands_follow_the_tool():
    debian, rocky = resolve(DEBIAN_12, DEB), resolve(ROCKY_94, EL)
    assert debian.initramfs_image("6.1.0-28-amd64") == "/boot/initrd.img-6.1.0-28-amd64"
    assert debian.initramfs_rebuild("6.1.0-28-amd64") == ["update-initramfs", "-u", "-k", "6.1.0-28-amd64"]
    assert rocky.initramfs_image("5.14.0-427.el9") == "/boot/initramfs-5.14.0-427.el9.img"
    assert rocky.initramfs_rebuild("5.14.0-427.el9") == ["dracut", "-f", "--kver", "5.14.0-427.el9"]
    assert rocky.major == "9"
    assert rocky.driver_names.package_version("580.95.05") == "3:580.95.05-1.el9"
    assert debian.driver_names.package_version("580.95.05") == "580.95.05-1"
    assert resolve(RHEL_10, EL).driver_names.package_version("580.95.05") == "3:580.95.05-1.el10"
    with pytest.raises(PlatformUnknown, match="no NVIDIA driver package naming"):
        print(resolve(SLES_15, {"rpm", "zypper"}).driver_names)


@pytest.mark.parametrize("text, tools, message", [
    (None, DEB, "/etc/os-release is missing"),
    (ALPINE, {"apk"}, "os-release ID 'alpine' is not a platform gpuconf knows; known: almalinux, amzn"),
    ('ID=gentoo\nID_LIKE=""\n', set(), "os-release ID 'gentoo' is not a platform"),
    ("", DEB, "os-release ID '' is not a platform"),
    (ROCKY_94, {"rpm"}, "Rocky 9.4 without dnf: gpuconf manages its packages with dnf"),
    (DEBIAN_12, {"rpm", "dnf"}, "Debian 12 without dpkg-query and apt-get"),
])
def test_a_platform_that_cannot_be_known_is_an_error_never_a_guess(text, tools, message):
    with pytest.raises(PlatformUnknown, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        resolve(text, tools)


def test_the_facts_of_a_host_give_its_platform_or_say_what_could_not_be_read():
    release = FileState("/etc/os-release", True, content=ROCKY_94.encode())
    tools = TOOLS_FACT.parse({"files": {"/usr/bin/rpm": "", "/usr/bin/dnf": "", "/usr/sbin/dracut": ""}})
    assert from_facts({"stat:1f:/etc/os-release": release, "platform:tools": tools}).packages == "dnf"
    with pytest.raises(PlatformUnknown, match="cannot read /etc/os-release"):
        from_facts({"platform:tools": tools})


def test_os_facts_name_the_distribution_and_family_from_the_one_table():
    assert os_facts(ROCKY_94) == {"id": "rocky", "version_id": "9.4", "pretty_name": "", "family": "RedHat",
                                  "major": "9", "distribution": "Rocky"}
    assert os_facts(ALPINE)["family"] == "" and os_facts(ALPINE)["distribution"] == ""
    assert {d.family for d in OS_RELEASE.values()} == {"Debian", "RedHat", "Suse"}



def test_no_module_outside_platform_compares_os_family_strings():
    """Tasks ask the platform: 'RedHat'/'Debian'/'Suse' compared with == or in, or a table of
    os-release IDs, appear nowhere in the product but in gpuconf/facts/platform.py."""
    offenders = []
    for path in sorted((ROOT / "gpuconf").rglob("*.py")):
        if path.name == "platform.py" and path.parent.name == "facts":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                names = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
                if {"RedHat", "Debian", "Suse", "rhel", "debian", "ubuntu", "rocky"} & set(names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Constant) and node.value == "/etc/redhat-release":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} (/etc/redhat-release)")
    assert offenders == []
