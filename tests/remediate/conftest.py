"""The remediate lab tests' cluster: the session's Slurm lab, and a PATH whose scontrol is the
lab cluster's (what SLURM_CONF and munge are on a real login node)."""
from __future__ import annotations

import os
import shlex

import pytest

from tests.remediate.helpers import put_back


@pytest.fixture(scope="module")
def cluster(slurm_lab, tmp_path_factory):
    """The lab, and a PATH whose scontrol is the lab cluster's; every node put back at the end."""
    shim = tmp_path_factory.mktemp("slurm-client")
    argv = slurm_lab.slurm_client_argv(["scontrol"])
    (shim / "scontrol").write_text(f"#!/bin/sh\nexec {shlex.join(argv)} \"$@\"\n")
    (shim / "scontrol").chmod(0o755)
    yield slurm_lab, f"{shim}:{os.environ['PATH']}"
    for info in slurm_lab.nodes:
        put_back(slurm_lab, info.name)
