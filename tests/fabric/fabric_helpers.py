"""What the fabric lab tests share: the session's lab (an HGX B200, two GB200 NVL72 trays of one
IMEX domain, an HGX H100), converged once, and gpuconf run against it. The fixture is in conftest.py."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gpuconf_lab.fleet import Lab
from tests.lab_fixtures import LAB_NAME

ROOT = Path(__file__).resolve().parents[2]
# after LAB_NAME: apart from another checkout's (GPUCONF_TEST_LAB) and another pytest-xdist worker's
NAME = f"{LAB_NAME}-fabric"[:31]
B200, GB200, GB200_PEER, H100 = "b200-01", "gb200-01", "gb200-02", "h100-01"
IMEX_DOMAIN = "Every IMEX peer of the domain READY and connected"
IMEX_CHANNEL = "IMEX channel 0 now and after every reboot"
CHANNEL0 = "/dev/nvidia-caps-imex-channels/channel0"
# The H100 runs the newer 580 release, so fabric manager can be put one release behind it;
# its InfiniBand has no subnet manager in this lab.
H100_VARS = ("-e", "nvidia_driver_version=580.105.08", "-e", "infiniband_subnet_manager=false",
             "-e", "infiniband_expect_subnet_manager=false")


@dataclass
class Run:
    rc: int
    stdout: str
    report: dict

    def tasks(self, host: str) -> dict[str, dict]:
        return {t["task"]: t for t in self.report["hosts"][host]["tasks"]}


@dataclass
class FabricLab:
    lab: Lab
    tmp: Path
    first: dict[str, Run]
    applied: dict[str, Run]
    second: dict[str, Run]

    def gpuconf(self, verb: str, playbook: str, *args: str) -> Run:
        report = self.tmp / f"{verb}-{len(list(self.tmp.iterdir()))}.json"
        proc = subprocess.run([sys.executable, "-m", "gpuconf", verb, f"playbooks/{playbook}-node.yml", "-i", NAME,
                               "--report", str(report), *args], capture_output=True, text=True, cwd=ROOT,
                              timeout=600)
        data = json.loads(report.read_text()) if report.exists() else {}
        return Run(proc.returncode, proc.stdout + proc.stderr, data)

    def fault(self, host: str, *args: str) -> None:
        rc, out, err = self.lab.fault(host, *args)
        assert rc == 0, out + err

    def sh(self, host: str, command: str) -> str:
        """Set-up and inspection inside the node (the lab's root shell, not gpuconf's SSH)."""
        _rc, out, err = self.lab.exec(host, command, timeout=120)
        return out + err
