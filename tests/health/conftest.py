"""The health probes' lab: one A100 node of their own, converged once per session, and
one fresh T4 node.

nvidia-smi answers only with the driver installed and loaded, so the node is first
converged with playbooks/a100-node.yml (the slow part, once). Converging changes a
node for good and the probes' tests inject faults, so this lab is separate from the
session lab of the lab's own tests and from the GPU library's. The node is not a
subnet manager and nothing waits for ACTIVE ports: with no subnet manager in this lab
the InfiniBand ports stay INIT, which the InfiniBand probe's test uses.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gpuconf_lab.fleet import Lab
from tests.lab_fixtures import LAB_NAME, start_lab
from tests.paths import ROOT
from tests.report_runs import Run, run_gpuconf

# after LAB_NAME: GPUCONF_TEST_LAB keeps two checkouts' labs apart, the pytest-xdist worker two processes'
NAME = f"{LAB_NAME}-health"[:31]
NODE = "a100-01"
FRESH = "t4-01"      # never converged: what a cloud image looks like (nouveau, no driver)
# the driver the A100 playbook converges the node to: the shipped role's pin
PIN = yaml.safe_load((ROOT / "roles/nvidia_driver/defaults/main.yml").read_text())["nvidia_driver_version"]
# What the healthy A100 node should be: the inventory's expectations, as extra vars.
EXPECT = ["-e", "gpu_health_expected_gpu_count=8", "-e", "gpu_health_expected_gpu_model=A100-SXM4-80GB",
          "-e", "gpu_health_nvlink_expected_links=12", "-e", f"nvidia_driver_version={PIN}"]


def gpuconf(verb: str, playbook: str, *args: str, report: Path, timeout: float = 600) -> Run:
    """A run on this lab, read for the A100 node unless told otherwise."""
    return run_gpuconf(NAME, verb, playbook, *args, report=report, timeout=timeout, host=NODE)


@dataclass
class HealthLab:
    lab: Lab
    tmp: Path

    def health(self, *args: str, verb: str = "check", host: str = NODE, timeout: float = 300) -> Run:
        """`gpuconf VERB playbooks/gpu-health.yml` on one node, with the A100 expectations."""
        report = self.tmp / f"health-{len(list(self.tmp.iterdir()))}.json"
        run = gpuconf(verb, "playbooks/gpu-health.yml", "--limit", host, *EXPECT, *args, report=report,
                      timeout=timeout)
        run.host = host
        return run

    def fault(self, kind: str, *args: str) -> None:
        rc, out, err = self.lab.fault(NODE, kind, *args)
        assert rc == 0, out + err

    def sh(self, command: str) -> tuple[int, str, str]:
        return self.lab.exec(NODE, ["sh", "-c", command])


@pytest.fixture(scope="session")
def health_lab(tmp_path_factory) -> HealthLab:
    lab = start_lab(NAME, {"a100": 1, "t4": 1})
    state = HealthLab(lab, tmp_path_factory.mktemp("health"))
    try:
        converge = gpuconf("apply", "playbooks/a100-node.yml", "-e", "infiniband_subnet_manager=false",
                           "-e", "infiniband_expect_subnet_manager=false",
                           report=state.tmp / "converge.json", timeout=1200)
        rc, listed, _ = state.sh("nvidia-smi -L")
        if rc != 0 or listed.count("GPU ") != 8:
            pytest.skip(f"the lab cannot converge an A100 node yet, so nvidia-smi does not answer (nvidia-smi -L: "
                        f"exit {rc}); converge: {converge.stdout[-1500:]}")
        yield state
    finally:
        lab.down()


@pytest.fixture
def node(health_lab: HealthLab) -> HealthLab:
    """The converged node, put back after the test: faults cleared, and the kernel ring
    buffer cleared as the next boot would (Xid lines count for the boot they were in)."""
    yield health_lab
    health_lab.fault("clear")
    health_lab.sh("dmesg -C")
    health_lab.sh("nvidia-smi -pm 1 >/dev/null; systemctl start nvidia-fabricmanager")
