"""The secure-boot fault, end to end: a firmware setting that the next boot runs with."""
from __future__ import annotations

import pytest

from tests.lab_fixtures import wait_until

NODE = "t4-01"


def reboot(lab) -> None:
    """Reboot and wait until the new boot is up (not merely the old sshd still answering)."""
    boots = lab.node_state(NODE)["boots"]
    lab.reboot(NODE)
    assert wait_until(lambda: lab.node_state(NODE).get("boots") == boots + 1
                      and lab.node_state(NODE).get("state") == "up", timeout=30)
    lab.wait_ssh(NODE, timeout=30)


@pytest.fixture
def secure_boot_off(lab):
    """Secure Boot off again (in the firmware, and for the running boot) after the test."""
    yield
    lab.exec(NODE, ["/usr/lib/gpuconf-lab/sim/fault", "clear", "secure-boot"])   # no firmware.json left
    reboot(lab)


def test_secure_boot_reaches_mokutil_and_the_module_loader_after_a_reboot(lab, ssh, secure_boot_off):
    assert ssh(NODE, "mokutil --sb-state") == (0, "SecureBoot disabled\n", "")
    rc, out, _ = lab.fault(NODE, "secure-boot", "on")
    assert rc == 0 and "next boot" in out
    assert ssh(NODE, "mokutil --sb-state")[1] == "SecureBoot disabled\n"
    reboot(lab)
    assert ssh(NODE, "mokutil --sb-state")[1] == "SecureBoot enabled\n"
    assert "secureboot: Secure boot enabled" in ssh(NODE, "sudo -n dmesg")[1]
