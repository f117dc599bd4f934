"""dkms status parser on every real capture (v2 comma, v3 slash, added, WARNING suffix)."""
from __future__ import annotations

import pytest

from gpuconf.facts.dkms import DkmsEntry, parse_dkms_status
from tests.real import read_real as read

# file -> (entry count, first entry, last entry)
DKMS = {
    "dkms/dkms-status-m-installed-with-WARNING-diff-i915-sriov-274.txt": (
        1,
        DkmsEntry("i915-sriov-dkms", "2025.03.26", "6.11.11-2-pve", "x86_64", "installed",
                  "WARNING! Diff between built and installed module!"),
        None,
    ),
    "dkms/dkms-status-v2-comma-format-bbswitch-nvidia-410.78-multi-kernel.txt": (
        4,
        DkmsEntry("bbswitch", "0.8", "4.15.0-72-generic", "x86_64", "installed"),
        DkmsEntry("nvidia", "410.78", "4.15.0-74-generic", "x86_64", "installed"),
    ),
    "dkms/dkms-status-v2-comma-format-nvidia-331-uvm-3-kernels.txt": (
        7,
        DkmsEntry("bbswitch", "0.7", "3.16.0-29-generic", "x86_64", "installed"),
        DkmsEntry("nvidia-331-uvm", "331.113", "3.16.0-29-generic", "x86_64", "installed"),
    ),
    "dkms/dkms-status-v3-added-and-installed-states.txt": (
        2,
        DkmsEntry("8812au", "4.2.3", None, None, "added"),
        DkmsEntry("8812au", "5.6.4.2_35491.20191025", "5.15.0-18-generic", "x86_64", "installed"),
    ),
}
CASES = sorted(DKMS)


@pytest.mark.parametrize("rel", sorted(DKMS))
def test_dkms_status(rel: str) -> None:
    count, first, last = DKMS[rel]
    status = parse_dkms_status(read(rel))
    assert status.problems == ()
    assert len(status.entries) == count
    assert status.entries[0] == first
    if last is not None:
        assert status.entries[-1] == last


def test_installed_for_running_kernel() -> None:
    status = parse_dkms_status(read("dkms/dkms-status-v2-comma-format-bbswitch-nvidia-410.78-multi-kernel.txt"))
    assert len(status.installed_for("nvidia", "4.15.0-74-generic")) == 1
    assert status.installed_for("nvidia", "4.15.0-72-generic") == ()  # the kernel-upgrade drift
    multi = parse_dkms_status(read("dkms/dkms-status-v2-comma-format-nvidia-331-uvm-3-kernels.txt"))
    assert [e.kernel for e in multi.for_module("nvidia-331")] == [
        "3.16.0-29-generic", "3.16.0-30-generic", "3.16.0-31-generic"]


def test_v3_nvidia_and_error_lines() -> None:
    status = parse_dkms_status(
        "nvidia/535.104.05, 6.1.0-18-amd64, x86_64: installed\n"
        "nvidia/535.104.05: added\n"
        "Error! Could not locate dkms.conf file.\n"
        "nvidia, 535.54.03, 6.1.0-17-amd64, x86_64: built\n")
    assert [(e.module, e.version, e.kernel, e.state) for e in status.entries] == [
        ("nvidia", "535.104.05", "6.1.0-18-amd64", "installed"),
        ("nvidia", "535.104.05", None, "added"),
        ("nvidia", "535.54.03", "6.1.0-17-amd64", "built"),
    ]
    assert status.problems == ("Error! Could not locate dkms.conf file.",)
