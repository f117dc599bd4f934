"""Issue 28's node actions on NVLink-fabric nodes of the fabric lab (tests/fabric/conftest.py),
through the hooks `gpuconf remediate` uses (its Slurm part is tested on the Slurm lab):

* an HGX B200 (NVSwitches, Fabric Manager): an Xid 119 on one GPU asks for reset_gpu; the reset
  stops Fabric Manager and the other units holding the GPUs, resets every GPU and NVSwitch
  (the Fabric Manager guide's baseboard reset), starts them again, and the check is clean after;
* a GB200 tray whose IMEX daemon stopped answering its peers: restarting it (recover_imex_domain)
  brings the domain back, as its peer's check sees.
"""
from __future__ import annotations

import threading

from gpuconf.engine.options import RunOptions
from gpuconf.inventory.hosts import load_inventory
from gpuconf.playbook.loader import load_playbook
from gpuconf.remediate.command import EngineHooks
from gpuconf.remediate.decision import IMEX, Decision
from tests.fabric.fabric_helpers import B200, GB200, GB200_PEER, IMEX_DOMAIN, NAME, ROOT

HEALTH = ROOT / "tests/remediate/health.yml"  # the Xid probe (and nvidia-smi's recovery action)


def engine_hooks(kind: str, tmp_path) -> EngineHooks:
    playbook = load_playbook(ROOT / f"playbooks/{kind}-node.yml", ROOT)
    return EngineHooks(load_inventory(NAME, [ROOT]), playbook, load_playbook(HEALTH, ROOT), RunOptions(),
                       threading.Event(), tmp_path / "state")


def test_a_gpu_reset_on_an_nvswitch_node_resets_the_baseboard_with_fabric_manager_stopped(fabric_lab, tmp_path):
    hooks = engine_hooks("b200", tmp_path)
    fabric_lab.fault(B200, "xid", "119", "--gpu", "3")
    try:
        verdict = hooks.check([B200])[B200]
        assert not verdict.clean and verdict.decision is not None, verdict
        assert (verdict.decision.action, verdict.decision.code, len(verdict.decision.buses)) == ("reset_gpu",
                                                                                              "Xid 119", 1)
        assert fabric_lab.sh(B200, "systemctl is-active nvidia-fabricmanager").strip() == "active"

        outcome = hooks.node_action(B200, "reset", verdict.decision)
        assert outcome.done and "nvidia-fabricmanager" in outcome.units and not outcome.not_started, outcome
        account = fabric_lab.sh(B200, "cat /run/gpuconf-reset.log")
        assert "group all: NVSwitch system" in account, account
        log = fabric_lab.sh(B200, "dmesg")
        assert "gpuconf: resetting all GPUs" in log and "gpuconf: all GPUs were reset" in log, log[-2000:]
        assert fabric_lab.sh(B200, "systemctl is-active nvidia-fabricmanager").strip() == "active"
        after = hooks.check([B200])[B200]
        assert after.clean, after  # the Xid the reset answered no longer fails the probe
        playbook = fabric_lab.gpuconf("check", "b200", "--limit", B200)
        assert playbook.rc == 0, playbook.stdout[-3000:]  # the fabric registered again with Fabric Manager back
    finally:
        fabric_lab.fault(B200, "clear")


def test_restarting_the_imex_daemon_brings_the_domain_back(fabric_lab, tmp_path):
    fabric_lab.fault(GB200_PEER, "imex-peer-down")
    try:
        down = fabric_lab.gpuconf("check", "gb200", "--limit", GB200)
        assert down.tasks(GB200)[IMEX_DOMAIN]["status"] == "would_change", down.stdout[-2000:]
        decision = Decision("recover_imex_domain", IMEX, "the IMEX domain is not up", "nvidia-smi gpu_recovery_action")
        outcome = engine_hooks("gb200", tmp_path).node_action(GB200_PEER, "imex", decision)
        assert outcome.done and outcome.said == "nvidia-imex restarted: READY", outcome
        up = fabric_lab.gpuconf("check", "gb200", "--limit", GB200)
        assert up.tasks(GB200)[IMEX_DOMAIN]["status"] == "ok", up.stdout[-2000:]
    finally:
        fabric_lab.fault(GB200_PEER, "clear", "imex-peer-down")
