"""The firmware lab tests' lab: two DGX H100 nodes, each with its lab BMC (Redfish over TLS on the
lab's loopback addresses, the lab CA), and a real Slurm cluster for remediate. One lab for every
test here; the tests put the nodes' BMCs back as they found them, but h100-01's update (the
acceptance) is kept: the tests after it read a fleet whose nodes differ."""
from __future__ import annotations

import os
import shlex

import pytest

from tests.lab_fixtures import LAB_NAME, slurm_unavailable, start_lab

FIRMWARE_LAB = f"{LAB_NAME}-fw"[:31]


@pytest.fixture(scope="session")
def firmware_lab(tmp_path_factory):
    """The lab, a PATH whose scontrol is its cluster's, and a state directory of the session's own."""
    lab = start_lab(FIRMWARE_LAB, {"h100": 2}, unavailable=slurm_unavailable, slurm=True, bmc=True,
                    bmc_task_seconds=1.0)
    shim = tmp_path_factory.mktemp("slurm-client")
    (shim / "scontrol").write_text(f"#!/bin/sh\nexec {shlex.join(lab.slurm_client_argv(['scontrol']))} \"$@\"\n")
    (shim / "scontrol").chmod(0o755)
    yield lab, f"{shim}:{os.environ['PATH']}", tmp_path_factory.mktemp("state")
    lab.down()
