"""The 2026 driver stack on converged lab nodes (issue 13's acceptance, the Debian half).

Each scenario puts a node in a state that real fleets reach (a node left on branch 535, an
unpinned companion, a flavour switch, Canonical's transitional package, a version the
repository does not have, Secure Boot, a kernel installed but not booted), then checks that
gpuconf names it, repairs it, and that a second check exits 0. Each leaves its node converged.
"""
from __future__ import annotations

from tests.gpu.conftest import gpuconf
from tests.gpu.test_drift import detect_and_repair, drifted, reboot, sh

STACK = "One driver stack at the pinned version and flavour, held"
DKMS = "DKMS module built for every installed kernel"
LOADED = "Driver loaded at the installed version and flavour, nvidia-smi agreeing"
PERSISTENCED = "nvidia-persistenced at the driver's version, held"


def listing(converged, host: str) -> str:
    # dpkg-query exits 1 when a pattern matches no package at all (no precompiled modules yet)
    return sh(converged, host, "dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\\n' '*nvidia*' "
                               "'linux-modules-nvidia-*' 2>/dev/null; true")


def installed(converged, host: str) -> dict[str, str]:
    """Installed package -> version, from the listing's `ii`/`hi` lines."""
    rows = [line.split() for line in listing(converged, host).splitlines()]
    return {row[1]: row[2] for row in rows if len(row) == 3 and row[0][1] == "i"}


def stack_task(run, host: str) -> dict:
    return next(t for t in run.host_tasks(host) if t["task"] == STACK)


def test_a_node_left_on_535_is_warned_and_moved_to_580(converged, tmp_path):
    host = "a100-02"
    at_535 = tmp_path / "at-535.yml"
    at_535.write_text("""\
- name: An A100 node as fleets ran it until June 2026
  hosts: a100
  vars: {nvidia_driver_branch: 535, nvidia_driver_version: "535.104.05", nvidia_driver_allow_eol: true}
  roles: [nouveau, nvidia_driver, reboot, persistence, fabricmanager]
""")
    old = gpuconf("apply", str(at_535), "--limit", host, report=tmp_path / "old.json", timeout=900)
    assert old.rc == 0, old.stdout[-3000:] + old.stderr
    assert " 535.104.05-1" in listing(converged, host)
    assert "NVIDIA UNIX x86_64 Kernel Module  535.104.05" in sh(converged, host, "cat /proc/driver/nvidia/version")

    check = converged.checked("a100", "--limit", host)
    assert check.rc == 2, check.stdout[-3000:]
    findings = {f["probe"]: f for f in stack_task(check, host)["findings"]}
    assert set(findings) == {"driver_branch_eol", "driver_point_release_behind"}, findings
    warning = findings["driver_branch_eol"]
    assert warning["severity"] == "warning" and findings["driver_point_release_behind"]["severity"] == "warning"
    assert "535 reached its end of life on 2026-06-30: move to 580 (long-term, supported until 2028-06-30)" \
        in warning["message"]
    assert "535 reached its end of life" in check.stdout      # the operator sees it too
    move = drifted(check, host)[STACK]
    assert "switch kernel modules proprietary -> open; a reboot follows" in move
    assert "purge nvidia-dkms-535 535.104.05-1" in move and "install nvidia-dkms-580-open 580.178.04-1" in move

    apply = converged.run("apply", "a100", "--limit", host)
    assert apply.rc == 0, apply.stdout[-3000:] + apply.stderr
    final = converged.checked("a100", "--limit", host)
    assert final.rc == 0, final.stdout[-3000:]
    assert stack_task(final, host)["findings"] == []
    assert not [name for name in installed(converged, host) if "535" in name], installed(converged, host)
    assert "Open Kernel Module for x86_64  580.178.04" in sh(converged, host, "cat /proc/driver/nvidia/version")


def test_a_companion_installed_unpinned_is_drift_naming_both_versions(converged):
    host = "t4-01"
    sh(converged, host, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-change-held-packages "
                        "nvidia-persistenced")          # what an unpinned install gets: the repository's newest
    assert "nvidia-persistenced 620.70.10-1" in listing(converged, host)
    found = detect_and_repair(converged, "t4", host, {PERSISTENCED})
    assert found[PERSISTENCED] == "nvidia-persistenced 620.70.10-1 installed, the driver is 580.178.04-1"
    assert "nvidia-persistenced 580.178.04-1" in listing(converged, host)


def test_canonicals_transitional_package_is_caught_and_undone(converged):
    host = "t4-01"
    # an operator reinstalls the driver by hand, the way many guides say: `apt-get install nvidia-driver-535`,
    # unpinned. Canonical's transitional package answers, pulling the newest 580 with the proprietary modules
    sh(converged, host, "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q --allow-change-held-packages "
                        "nvidia-kernel-common-580 nvidia-dkms-580-open libnvidia-compute-580 nvidia-utils-580")
    sh(converged, host, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-driver-535")
    assert "nvidia-driver-535 580.95.05-0ubuntu1" in listing(converged, host)
    found = detect_and_repair(converged, "t4", host, {STACK})
    message = found[STACK]
    assert ("purge nvidia-driver-535 580.95.05-0ubuntu1 (named for branch 535, carries 580.95.05: "
            "a transitional package)") in message
    # it pulled the newest 580 with the proprietary modules: the pinned version, the wrong flavour
    assert message.startswith("switch kernel modules proprietary -> open; a reboot follows"), message
    after = installed(converged, host)   # dpkg may keep `un` rows of what was purged: not installed
    assert "nvidia-driver-535" not in after and "nvidia-dkms-580" not in after, after


def test_a_flavour_switch_is_drift_that_names_the_swap_and_the_reboot(converged):
    host, proprietary = "t4-01", ("-e", "nvidia_driver_flavour=proprietary")
    check = converged.checked("t4", "--limit", host, *proprietary)
    assert check.rc == 2, check.stdout[-3000:]
    swap = drifted(check, host)[STACK]
    assert swap.startswith("switch kernel modules open -> proprietary; a reboot follows")
    assert "purge nvidia-dkms-580-open 580.178.04-1" in swap and "install nvidia-dkms-580 580.178.04-1" in swap
    apply = converged.run("apply", "t4", "--limit", host, *proprietary)
    assert apply.rc == 0, apply.stdout[-3000:] + apply.stderr
    assert converged.checked("t4", "--limit", host, *proprietary).rc == 0
    assert sh(converged, host, "modinfo -F license nvidia").strip() == "NVIDIA"
    back = converged.run("apply", "t4", "--limit", host)                        # auto: open again
    assert back.rc == 0, back.stdout[-3000:]
    assert converged.checked("t4", "--limit", host).rc == 0
    assert sh(converged, host, "modinfo -F license nvidia").strip() == "Dual MIT/GPL"


def test_a_version_the_repository_lacks_is_refused_and_apply_leaves_the_stack_alone(converged):
    host, missing = "t4-01", ("-e", "nvidia_driver_version=580.65.06")
    before = listing(converged, host)
    check = converged.checked("t4", "--limit", host, *missing)
    assert check.rc == 4, check.stdout[-3000:]
    refusal = stack_task(check, host)["error"]
    assert "not in this host's repositories" in refusal and "580.65.06-1" in refusal and "580.95.05-1" in refusal
    apply = converged.run("apply", "t4", "--limit", host, *missing)
    assert apply.rc == 4, apply.stdout[-3000:]
    assert listing(converged, host) == before
    assert converged.checked("t4", "--limit", host).rc == 0


def test_a_kernel_installed_but_not_booted_is_drift_until_its_module_is_built(converged):
    host, newer = "h100-01", "6.1.0-21-amd64"
    rc, out, err = converged.lab.fault(host, "kernel-upgrade", newer)
    assert rc == 0, out + err
    found = detect_and_repair(converged, "h100", host, {DKMS})   # before any reboot
    assert newer in found[DKMS]
    assert f"nvidia/580.178.04, {newer}, x86_64: installed" in sh(converged, host, "dkms status")
    reboot(converged, host)
    assert sh(converged, host, "uname -r").strip() == newer
    assert sh(converged, host, "cat /sys/module/nvidia/version").strip() == "580.178.04"
    assert converged.checked("h100", "--limit", host).rc == 0


def test_secure_boot_refuses_unsigned_dkms_and_converges_with_precompiled_modules(converged):
    host, precompiled = "h100-01", ("-e", "nvidia_driver_modules=precompiled")
    assert converged.lab.fault(host, "secure-boot", "on")[0] == 0
    reboot(converged, host)
    assert sh(converged, host, "mokutil --sb-state").strip() == "SecureBoot enabled"
    check = converged.checked("h100", "--limit", host)
    assert check.rc == 4, check.stdout[-3000:]
    assert "nvidia_driver_modules: precompiled" in stack_task(check, host)["error"]
    apply = converged.run("apply", "h100", "--limit", host, *precompiled)
    assert apply.rc == 0, apply.stdout[-3000:] + apply.stderr
    assert converged.checked("h100", "--limit", host, *precompiled).rc == 0
    kernel = sh(converged, host, "uname -r").strip()
    packages = installed(converged, host)
    assert packages[f"linux-modules-nvidia-580-open-{kernel}"] == "580.178.04-1", packages
    assert not [name for name in packages if name.startswith("nvidia-dkms")], packages
    assert sh(converged, host, "cat /sys/module/nvidia/version").strip() == "580.178.04"
    # and back to the fleet's DKMS stack, Secure Boot off, for whatever runs next
    assert converged.lab.fault(host, "secure-boot", "off")[0] == 0
    reboot(converged, host)
    assert converged.run("apply", "h100", "--limit", host).rc == 0
    assert converged.checked("h100", "--limit", host).rc == 0

