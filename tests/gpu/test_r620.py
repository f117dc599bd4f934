"""R620 end to end and point releases on the converged lab (issue 30, items 1 and 2): a node
left on 580.95.05 is warned that its point release is behind; 620 with the proprietary modules
is refused in check; a 580 -> 620 switch is one package transaction; the node converges to 620,
open; and the fleet's playbook takes it back to its 580 pin for whatever runs next."""
from __future__ import annotations

from tests.gpu.test_drift import sh
from tests.gpu.test_stack2026 import installed, listing, stack_task

HOST = "a100-02"
R620 = ("-e", "nvidia_driver_branch=620", "-e", "nvidia_driver_version=620.70.10")


def apt_transactions(converged) -> list[str]:
    """The node's apt history, one entry per transaction (blank-line separated), oldest first."""
    return [entry for entry in sh(converged, HOST, "cat /var/log/apt/history.log").split("\n\n") if entry.strip()]


def test_a_node_left_on_an_old_point_release_is_warned(converged):
    old = ("-e", "nvidia_driver_version=580.95.05")
    apply = converged.run("apply", "a100", "--limit", HOST, *old)
    assert apply.rc == 0, apply.stdout[-3000:] + apply.stderr
    check = converged.checked("a100", "--limit", HOST, *old)
    assert check.rc == 0, check.stdout[-3000:]                   # in sync with its pin: a warning, no failure
    [warning] = stack_task(check, HOST)["findings"]
    assert (warning["probe"], warning["severity"]) == ("driver_point_release_behind", "warning")
    assert "580.95.05 is behind the newest point release of branch 580, 580.178.04" in warning["message"]
    assert "bulletin 5861" in warning["message"]
    strict = converged.checked("a100", "--limit", HOST, *old, "--strict")
    assert strict.rc == 4, strict.stdout[-3000:]
    back = converged.run("apply", "a100", "--limit", HOST)
    assert back.rc == 0, back.stdout[-3000:]
    assert stack_task(converged.checked("a100", "--limit", HOST), HOST)["findings"] == []


def test_620_with_the_proprietary_modules_is_refused_in_check_naming_the_source(converged):
    before = listing(converged, HOST)
    check = converged.checked("a100", "--limit", HOST, *R620, "-e", "nvidia_driver_flavour=proprietary")
    assert check.rc & 4, check.stdout[-3000:]
    refusal = stack_task(check, HOST)["error"]
    assert "branch 620 ships no proprietary kernel modules" in refusal
    assert "Proprietary Kernel Modules Removed" in refusal and "driver-installation-guide/620" in refusal
    assert listing(converged, HOST) == before


def test_a_switch_from_580_to_620_is_one_transaction_and_converges_open(converged):
    check = converged.checked("a100", "--limit", HOST, *R620)
    assert check.rc == 2, check.stdout[-3000:]
    before = len(apt_transactions(converged))
    apply = converged.run("apply", "a100", "--limit", HOST, *R620)
    assert apply.rc == 0, apply.stdout[-3000:] + apply.stderr
    # the old stack left in the same apt transaction that brought the new one: no moment without a
    # driver (the companions' own transactions follow it)
    ran = apt_transactions(converged)[before:]
    switch = [entry for entry in ran if "nvidia-dkms-open:amd64 (620.70.10-1)" in entry]
    assert len(switch) == 1, ran
    assert "nvidia-dkms-580-open:amd64 (580.178.04-1)" in switch[0], switch[0]
    packages = installed(converged, HOST)
    assert packages["nvidia-dkms-open"] == "620.70.10-1" and "nvidia-driver-pinning-620" in packages, packages
    assert not [name for name in packages if "-580" in name], packages
    assert "Open Kernel Module for x86_64  620.70.10" in sh(converged, HOST, "cat /proc/driver/nvidia/version")
    final = converged.checked("a100", "--limit", HOST, *R620)
    assert final.rc == 0, final.stdout[-3000:]
    assert stack_task(final, HOST)["findings"] == []
    back = converged.run("apply", "a100", "--limit", HOST)          # the fleet's pin, for whatever runs next
    assert back.rc == 0, back.stdout[-3000:]
    assert converged.checked("a100", "--limit", HOST).rc == 0
