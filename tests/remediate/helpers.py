"""What the remediate lab tests share: the test playbooks, the drift they plant, and the
cluster's nodes as `scontrol show node` reads them. The `cluster` fixture is in conftest.py."""
from __future__ import annotations

from pathlib import Path

from gpuconf.scheduler.slurm import parse_nodes
from tests.lab_fixtures import slurm_idle

ROOT = Path(__file__).resolve().parents[2]
SITE = "tests/remediate/site.yml"
HEALTH = "tests/remediate/health.yml"
DRIFT_FILE = "/etc/modprobe.d/gpuconf-remediate-test.conf"
RELEASE = "/var/tmp/remediate-release"  # the test's jobs end once it exists


def put_back(lab, node: str) -> None:
    lab.exec(node, ["rm", "-f", DRIFT_FILE, RELEASE])
    slurm_idle(lab, node)


def drift(lab, node: str) -> None:
    rc, _, err = lab.exec(node, ["sh", "-c", f"echo 'options nvidia NVreg_EnableGpuFirmware=0' > {DRIFT_FILE}"])
    assert rc == 0, err


def nodes(lab) -> dict:
    result = lab.slurm(["scontrol", "show", "node"])
    assert result.returncode == 0, result.stderr
    return {n.name: n for n in parse_nodes(result.stdout)}
