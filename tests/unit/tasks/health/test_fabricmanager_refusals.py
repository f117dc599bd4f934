"""Fabric manager's start-up refusals, from this boot's journal, are named findings with their
fix (issue 30, item 7): journals are the real captures under fixtures/real/fabricmanager."""
from __future__ import annotations

import pytest

from gpuconf.facts.nvidia import fabricmanager as fm
from tests.real import read_real
from tests.unit.tasks.health.fakes import hang, run_probe, shell, smi

STATE = "health:is-active:nvidia-fabricmanager"
JOURNAL = "health:journal:nvidia-fabricmanager"
F = "fabricmanager/"


def failed_with(journal: str, nvidia_smi: dict | None = None) -> dict:
    return {**(nvidia_smi or smi()), STATE: shell("failed\n", rc=3), JOURNAL: shell(journal)}


@pytest.mark.parametrize("rel, name, fix", [
    (F + "journal-fm-precheck-ib-umad-not-loaded-hgx-b200-TRUNCATED-canvos-700.txt", fm.IB_UMAD_NOT_LOADED,
     "modprobe ib_umad"),
    (F + "nvlsm-ibwarn-ib-umad-not-loaded-talos-siderolabs-docs-581.txt", fm.IB_UMAD_NOT_LOADED, "modprobe ib_umad"),
    (F + "journal-fm-nothing-to-do-no-nvswitch-cube-studio-29.txt", fm.NO_NVSWITCH, "systemctl disable --now"),
    (F + "fm-driver-interface-mismatch-530-gpu-operator-544.txt", fm.REFUSED_VERSION, "package: fabricmanager"),
    (F + "journalctl-u-nvidia-fabricmanager-mismatch-535-TRUNCATED-dstack-2348.txt", fm.REFUSED_VERSION,
     "exact version"),
    (F + "fm-config-item-invalid-value-fabric-node-config-file-talos-siderolabs-511.txt", fm.CONFIG_INVALID,
     "correct FABRIC_NODE_CONFIG_FILE in fabric manager's config file"),
])
def test_a_refusal_is_a_named_failure_with_its_fix_and_no_restart(rel, name, fix):
    check, unknown = run_probe("health_fabricmanager", {"remedy": True}, failed_with(read_real(rel)))
    assert unknown is None
    first = check.findings[0]
    assert (first.severity, first.value) == ("failure", name)
    assert "nvidia-fabricmanager is failed: it refused to start" in first.message and fix in first.message
    assert check.changes == []   # a restart would be refused again until the fix is made


def test_nvl5_nothing_to_do_is_the_nvlink_subnet_manager_not_running():
    # SYNTHETIC (assembled from two real lines, not one capture): the NVL5 precheck line of CanvOS PR 700
    # and the NV_WARN_NOTHING_TO_DO line of cube-studio issue 29
    lines = (read_real(F + "journal-fm-precheck-ib-umad-not-loaded-hgx-b200-TRUNCATED-canvos-700.txt").splitlines()[3],
             read_real(F + "journal-fm-nothing-to-do-no-nvswitch-cube-studio-29.txt").splitlines()[1])
    check, _ = run_probe("health_fabricmanager", {}, failed_with("\n".join(lines) + "\n"))
    assert check.findings[0].value == fm.NVLINK_SM_NOT_RUNNING and "nvlsm" in check.findings[0].message


def test_a_refusal_is_named_even_when_nvidia_smi_hangs():
    rel = F + "journal-fm-precheck-ib-umad-not-loaded-hgx-b200-TRUNCATED-canvos-700.txt"
    check, unknown = run_probe("health_fabricmanager", {}, failed_with(read_real(rel), {**smi(), **{
        k: hang() for k in smi()}}))
    assert unknown is None and check.findings[0].value == fm.IB_UMAD_NOT_LOADED
    assert check.findings[-1].value == "driver_unresponsive"


def test_an_active_service_reads_no_journal_and_a_quiet_journal_is_the_plain_failure():
    active, _ = run_probe("health_fabricmanager", {}, {**smi(), STATE: shell("active\n")})   # journal not served
    assert active.findings[0].severity == "ok"
    quiet, _ = run_probe("health_fabricmanager", {}, failed_with(
        read_real(F + "fabricmanager-log-multicast-team-8gpu-gpud.txt")))
    assert quiet.findings[0].message == "nvidia-fabricmanager is failed" and quiet.findings[0].value == "failed"


def test_a_refusal_no_name_covers_is_refused_naming_fabric_managers_own_line():
    # SYNTHETIC: the start script's failure line of cube-studio issue 29 after an error line no named refusal covers
    journal = ("Sep 18 03:19:01 node nv-fabricmanager[4756]: [ERROR] failed to open topology file "
               "/usr/share/nvidia/nvswitch/dgxh100_hgxh100_topology\n"
               + read_real(F + "journal-fm-nothing-to-do-no-nvswitch-cube-studio-29.txt").splitlines()[2] + "\n")
    check, _ = run_probe("health_fabricmanager", {}, failed_with(journal))
    first = check.findings[0]
    assert first.value == fm.REFUSED and "failed to open topology file" in first.message
