"""Issue 36's acceptance on a lab GB200 NVL72 tray in a real Slurm cluster: NVIDIA's per-line decode of
the NVLink5 Xids 144-150 decides the verdict. A non-fatal Xid 145 line and an Xid 149 line the decode
ignores leave the health check passing; a link-fatal Xid 149 line makes `gpuconf remediate --check` plan
a GPU reset, naming the decode's row. The lines are the driver's format (`lab fault xid`, sim/xid_lines.py).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from tests.lab_fixtures import LAB_NAME, slurm_idle, slurm_unavailable, start_lab
from tests.paths import ROOT

NAME = f"{LAB_NAME}-nvl5"[:31]
NODE = "gb200-01"
HEALTH = "tests/remediate/health.yml"  # the Xid probe (roles/gpu_health's health_xid)
SITE = "tests/remediate/site.yml"


@pytest.fixture(scope="module")
def tray(tmp_path_factory):
    lab = start_lab(NAME, {"gb200": 1}, unavailable=slurm_unavailable, slurm=True)
    shim = tmp_path_factory.mktemp("slurm-client")
    (shim / "scontrol").write_text(f"#!/bin/sh\nexec {shlex.join(lab.slurm_client_argv(['scontrol']))} \"$@\"\n")
    (shim / "scontrol").chmod(0o755)
    try:
        slurm_idle(lab, NODE)
        yield lab, f"{shim}:{os.environ['PATH']}"
    finally:
        lab.down()


def gpuconf(path: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuconf", *args], cwd=ROOT, env=dict(os.environ, PATH=path),
                          capture_output=True, text=True, timeout=500)


def fault(lab, *args: str) -> None:
    rc, out, err = lab.fault(NODE, "xid", *args)
    assert rc == 0, out + err


def test_the_decode_passes_ignored_link_events_and_plans_a_reset_for_a_link_fatal_one(tray, tmp_path):
    lab, path = tray
    fault(lab, "145", "--nonfatal", "--gpu", "0")  # RLW_RXPIPE Nonfatal, errorStatus 0x8: IGNORE
    fault(lab, "149", "--nonfatal", "--gpu", "1")  # NETIR_BER_EVENT Nonfatal, errorStatus 0x1: IGNORE
    report = tmp_path / "check.json"
    check = gpuconf(path, "check", HEALTH, "-i", NAME, "--report", str(report))
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]
    (task,) = json.loads(report.read_text())["hosts"][NODE]["tasks"]
    decided = sorted((f["code"], f["severity"], f["rule"].split(":")[0]) for f in task["findings"] if f["code"])
    assert decided == [("Xid 145", "ok", "xid_nvlink5_decode.csv row 25"),
                       ("Xid 149", "ok", "xid_nvlink5_decode.csv row 65")], task["findings"]

    fault(lab, "149", "--gpu", "2")  # NETIR_LINK_EVT Fatal, intrInfo 0x004505c6: LINK_DOWN, RESET_GPU
    plan = gpuconf(path, "remediate", SITE, "-i", NAME, "--health", HEALTH, "--check",
                   "--state-dir", str(tmp_path / "state"))
    line = next(line for line in plan.stdout.splitlines() if line.startswith(f"{NODE}:"))
    assert line.startswith(f"{NODE}: reset_gpu, decided by xid_nvlink5_decode.csv row 71: Xid 149 "
                           "NETIR_LINK_EVT/NETIR_LINK_DOWN errorStatus 0x00000000 Link Fatal -> RESET_GPU: GPU "), line
    assert "(0000:03:00.0)" in line or "GPU at 0000:03:00.0" in line, line  # GPU 2 of the tray
    assert "NETIR_LINK_EVT Fatal, decoded: RESET_GPU (Link Fatal)" in line and "steps: drain and wait" in line
    assert "check mode: nothing was changed" in plan.stdout
    assert "IDLE" in lab.slurm(["scontrol", "show", "node", NODE]).stdout  # nothing was drained
