"""The CDI spec after a driver switch on the converged lab, over SSH (issue 30's CDI acceptance).

With the toolkit's nvidia-cdi-refresh.service off (toolkit before 1.18, or an operator disabled
it), a driver switch made without the container toolkit's role (an operator's driver-only play,
as fleets run them) leaves /etc/cdi/nvidia.yaml (the role's spec, where it points the refresh
unit) naming the old driver's libraries: check finds it stale and names both drivers, and
the unit disabled; apply regenerates the spec with the node's own `nvidia-ctk cdi generate` and
enables the unit, `nvidia-ctk cdi list` then resolves nvidia.com/gpu=all, and a second check is
clean. Going back to the fleet's 580 pin, the unit regenerates the spec at the reboot.
"""
from __future__ import annotations

from tests.gpu.conftest import gpuconf
from tests.gpu.test_drift import drifted, sh

HOST = "t4-01"
CDI = "CDI spec made for the loaded driver"
REFRESH = "CDI refresh at boot enabled (nvidia-cdi-refresh.service)"
R595 = ("-e", "nvidia_driver_branch=595", "-e", "nvidia_driver_version=595.91.07")


def spec_driver(converged) -> str:
    """The driver version the spec's enable-cuda-compat hook was generated for."""
    spec = sh(converged, HOST, "cat /etc/cdi/nvidia.yaml")
    [line] = [line for line in spec.splitlines() if "--host-driver-version=" in line]
    return line.split("=", 1)[1].strip()


def test_a_driver_switch_leaves_the_cdi_spec_stale_until_apply_regenerates_it(converged, tmp_path):
    assert spec_driver(converged) == "580.178.04"
    sh(converged, HOST, "systemctl disable nvidia-cdi-refresh.service")     # else the switch's reboot refreshes it
    driver_only = tmp_path / "driver-only.yml"
    driver_only.write_text("""\
- name: The driver moved to 595 by a play without the container toolkit's role
  hosts: t4
  vars: {nvidia_driver_branch: 595, nvidia_driver_version: "595.91.07"}
  roles: [nouveau, nvidia_driver, reboot, persistence]
""")
    switch = gpuconf("apply", str(driver_only), "--limit", HOST, report=tmp_path / "switch.json", timeout=900)
    assert switch.rc == 0, switch.stdout[-3000:] + switch.stderr
    assert "Open Kernel Module for x86_64  595.91.07" in sh(converged, HOST, "cat /proc/driver/nvidia/version")
    assert spec_driver(converged) == "580.178.04"           # nothing touched the spec

    check = converged.checked("t4", "--limit", HOST, *R595)
    assert check.rc == 2, check.stdout[-3000:] + check.stderr
    found = drifted(check, HOST)
    assert set(found) == {CDI, REFRESH}, found
    assert ("regenerate the CDI spec /etc/cdi/nvidia.yaml: made for driver 580.178.04, 595.91.07 is loaded"
            in found[CDI]), found[CDI]

    apply = converged.run("apply", "t4", "--limit", HOST, *R595)
    assert apply.rc == 0, apply.stdout[-3000:] + apply.stderr
    assert spec_driver(converged) == "595.91.07"
    rc, listed, log = converged.lab.exec(HOST, "nvidia-ctk cdi list")
    assert rc == 0, listed + log
    assert "nvidia.com/gpu=all" in listed.splitlines(), listed
    assert "Found 3 CDI devices" in log, log                # one T4: index 0, its UUID, all
    final = converged.checked("t4", "--limit", HOST, *R595)
    assert final.rc == 0, final.stdout[-3000:]

    back = converged.run("apply", "t4", "--limit", HOST)     # the fleet's pin, for whatever runs next
    assert back.rc == 0, back.stdout[-3000:] + back.stderr
    assert spec_driver(converged) == "580.178.04"           # written at the reboot by the refresh unit
    assert "Finished Refresh NVIDIA CDI specification file." in \
        sh(converged, HOST, "journalctl -b -u nvidia-cdi-refresh.service")
    assert converged.checked("t4", "--limit", HOST).rc == 0
