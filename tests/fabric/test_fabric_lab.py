"""Issue 14 on lab nodes over SSH: an HGX B200 node, two GB200 NVL72 trays and an HGX H100,
one small lab for the session. Fresh nodes check as drift (exit 2), converge with the held
reboot, and check clean; then the fabric faults are reported naming the GPU, the service or
the IMEX peer, never as ok. The two GB200 trays form one IMEX domain (group gb200)."""
from __future__ import annotations

import pytest

from tests.fabric.fabric_helpers import (
    B200,
    CHANNEL0,
    GB200,
    GB200_PEER,
    H100,
    H100_VARS,
    IMEX_CHANNEL,
    IMEX_DOMAIN,
)
from tests.lab_fixtures import wait_until


@pytest.mark.parametrize("kind", ["b200", "gb200"])
def test_fresh_nodes_drift_converge_and_check_clean(fabric_lab, kind):
    first, applied, second = fabric_lab.first[kind], fabric_lab.applied[kind], fabric_lab.second[kind]
    assert first.rc == 2, first.stdout[-2000:]
    assert applied.rc == 0, applied.stdout[-3000:]
    assert second.rc == 0, second.stdout[-3000:]
    host = B200 if kind == "b200" else GB200
    fabric = second.tasks(host)["Every GPU registered with the NVLink fabric (Completed, Success)"]
    assert fabric["status"] == "ok" and "GPU 0 (0000:" in fabric["message"]


def test_b200_gets_nvlsm_its_library_and_ib_umad_at_boot(fabric_lab):
    tasks = fabric_lab.applied["b200"].tasks(B200)
    for name in ("ib_umad loaded now and at boot (fabric manager's NVLink5 precheck needs it)",
                 "NVLink subnet manager (nvlsm) at the driver's version, held",
                 "NVSwitch device-management library at the driver's version, held",
                 "Fabric manager enabled and active"):
        assert tasks[name]["status"] == "changed", (name, tasks[name])
    listed = fabric_lab.sh(B200, "dpkg-query -W nvlsm libnvsdm-580; cat /etc/modules-load.d/ib_umad.conf")
    assert "nvlsm\t580.178.04-1" in listed and "libnvsdm-580\t580.178.04-1" in listed and "ib_umad" in listed


def test_gb200_runs_no_fabric_manager_and_a_tray_without_nvswitch_says_why(fabric_lab):
    tasks = fabric_lab.second["gb200"].tasks(GB200)
    assert tasks["No fabric manager on a rack NVLink tray (the rack routes the fabric)"]["status"] == "ok"
    assert "Fabric manager at the driver's version, held" not in tasks or \
        tasks["Fabric manager at the driver's version, held"]["status"] == "skipped"


def test_fabric_manager_enabled_on_a_gb200_tray_is_drift(fabric_lab):
    fabric_lab.sh(GB200, "apt-get install -y -q nvidia-fabricmanager-580=580.95.05-1 >/dev/null 2>&1; "
                         "systemctl enable nvidia-fabricmanager")
    try:
        run = fabric_lab.gpuconf("check", "gb200", "--limit", GB200)
        assert run.rc == 2, run.stdout[-2000:]
        task = run.tasks(GB200)["No fabric manager on a rack NVLink tray (the rack routes the fabric)"]
        assert task["status"] == "would_change" and "disable nvidia-fabricmanager" in task["message"]
    finally:
        fabric_lab.sh(GB200, "systemctl disable nvidia-fabricmanager; apt-get purge -y -q nvidia-fabricmanager-580 "
                             ">/dev/null 2>&1")


@pytest.mark.parametrize("kind, host", [("gb200", GB200), ("b200", B200)])
def test_fabric_stuck_in_progress_fails_naming_the_gpu_in_check_and_apply(fabric_lab, kind, host):
    fabric_lab.fault(host, "fabric-in-progress", "--gpu", "1")
    try:
        for verb in ("check", "apply"):
            run = fabric_lab.gpuconf(verb, kind, "--limit", host)
            assert run.rc not in (0, 2), run.stdout[-2000:]
            task = run.tasks(host)["Every GPU registered with the NVLink fabric (Completed, Success)"]
            assert task["status"] == "failed", task
            assert "GPU 1 (0000:" in task["message"] and "fabric state In Progress" in task["message"]
    finally:
        fabric_lab.fault(host, "clear", "fabric-in-progress")


def test_fabric_manager_one_release_behind_the_driver_is_drift_and_repaired(fabric_lab):
    assert fabric_lab.applied["h100"].rc == 0, fabric_lab.applied["h100"].stdout[-3000:]
    behind = fabric_lab.sh(H100, "apt-mark unhold nvidia-fabricmanager-580 >/dev/null; apt-get install -y -q "
                                 "--allow-downgrades nvidia-fabricmanager-580=580.95.05-1 >/dev/null 2>&1; "
                                 "systemctl restart nvidia-fabricmanager; journalctl -u nvidia-fabricmanager")
    assert "version 580.95.05 don't match with driver version 580.105.08" in behind   # the refusal itself
    check = fabric_lab.gpuconf("check", "h100", "--limit", H100, *H100_VARS)
    assert check.rc != 0, check.stdout[-2000:]
    tasks = check.tasks(H100)
    package = tasks["Fabric manager at the driver's version, held"]
    assert package["status"] == "would_change"
    assert "nvidia-fabricmanager-580 580.95.05-1 installed, the driver is 580.105.08-1" in package["message"]
    assert tasks["Fabric manager enabled and active"]["status"] == "would_change"
    fabric = tasks["Every GPU registered with the NVLink fabric (Completed, Success)"]
    assert fabric["status"] == "failed" and "GPU 0 (0000:" in fabric["message"] and "In Progress" in fabric["message"]
    repaired = fabric_lab.gpuconf("apply", "h100", "--limit", H100, *H100_VARS)
    assert repaired.rc == 0, repaired.stdout[-3000:]
    again = fabric_lab.gpuconf("check", "h100", "--limit", H100, *H100_VARS)
    assert again.rc == 0, again.stdout[-3000:]


def test_gb200_trays_converge_imex_and_their_domain_is_up(fabric_lab):
    applied = fabric_lab.applied["gb200"].tasks(GB200)
    for name in ("nvidia-imex at the driver's version, held", "IMEX peer list from the domain group (nodes_config.cfg)",
                 "IMEX enabled and running", IMEX_CHANNEL):
        assert applied[name]["status"] == "changed", (name, applied[name])
    peers = [fabric_lab.lab.node(name).address for name in (GB200, GB200_PEER)]
    second = fabric_lab.second["gb200"]
    for host in (GB200, GB200_PEER):
        tasks = second.tasks(host)
        assert tasks[IMEX_CHANNEL]["status"] == "ok" and tasks[IMEX_DOMAIN]["status"] == "ok", tasks[IMEX_DOMAIN]
        assert tasks[IMEX_DOMAIN]["message"] == f"IMEX domain UP: 2 nodes READY and connected ({', '.join(peers)})"
    listed = fabric_lab.sh(GB200, "grep -v '^#' /etc/nvidia-imex/nodes_config.cfg; dpkg-query -W nvidia-imex; "
                                  f"stat -c %F {CHANNEL0}; cat /etc/modprobe.d/nvidia-imex-channels.conf")
    assert listed.split("\n")[:2] == peers and "nvidia-imex\t580.178.04-1" in listed
    assert "character special file" in listed and "options nvidia NVreg_CreateImexChannel0=1" in listed


def test_a_rebooted_gb200_tray_has_its_channel_and_checks_clean(fabric_lab):
    lab = fabric_lab.lab
    boots = lab.node_state(GB200)["boots"]
    lab.reboot(GB200)
    assert wait_until(lambda: lab.node_state(GB200).get("boots") == boots + 1
                      and lab.node_state(GB200).get("state") == "up", timeout=60)
    lab.wait_ssh(GB200, timeout=30)
    assert "character special file" in fabric_lab.sh(GB200, f"stat -c %F {CHANNEL0}")
    run = fabric_lab.gpuconf("check", "gb200", "--limit", GB200)
    assert run.rc == 0, run.stdout[-3000:]
    assert run.tasks(GB200)[IMEX_DOMAIN]["status"] == "ok"


def test_an_imex_peer_down_is_drift_on_its_peer_naming_it_and_a_failure_with_strict(fabric_lab):
    peer = fabric_lab.lab.node(GB200_PEER).address
    fabric_lab.fault(GB200_PEER, "imex-peer-down")
    try:
        check = fabric_lab.gpuconf("check", "gb200", "--limit", GB200)
        assert check.rc == 2, check.stdout[-2000:]
        task = check.tasks(GB200)[IMEX_DOMAIN]
        assert task["status"] == "would_change" and f"IMEX peer not connected: {peer} (node #1, UNAVAILABLE" \
            in task["message"], task
        assert [f["severity"] for f in task["findings"]] == ["warning"]
        strict = fabric_lab.gpuconf("check", "gb200", "--limit", GB200, "--strict")
        assert strict.rc & 4 and strict.tasks(GB200)[IMEX_DOMAIN]["status"] != "ok", strict.stdout[-2000:]
        assert peer in strict.tasks(GB200)[IMEX_DOMAIN]["message"]
    finally:
        fabric_lab.fault(GB200_PEER, "clear", "imex-peer-down")


def test_an_imex_domain_group_missing_from_the_inventory_is_refused_clearly(fabric_lab):
    run = fabric_lab.gpuconf("check", "gb200", "--limit", GB200, "-e", "imex_domain_group=rack_nowhere")
    assert run.rc & 4, run.stdout[-2000:]
    task = run.tasks(GB200)["The IMEX domain's inventory group lists this node"]
    assert task["status"] == "failed" and "inventory group 'rack_nowhere' (imex_domain_group) does not exist" \
        in (task["error"] or ""), task
