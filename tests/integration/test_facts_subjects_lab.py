"""`gpuconf facts HOST -s SUBJECT,...` against a lab node over SSH: one round trip, every subject
answered: parsed output, or why a tool gave none (the fresh node has no NVIDIA driver yet)."""
from __future__ import annotations

import json
import subprocess
import sys


def test_facts_subjects_from_a_lab_node(lab):
    inventory = str(lab.inventory_path.parent)
    proc = subprocess.run([sys.executable, "-m", "gpuconf", "facts", "a100-01", "-i", inventory,
                           "-s", "driver,packages,services,infiniband,gpus,kernel_log"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert facts["hostname"] == "a100-01" and facts["gpu_count"] == 8
    dpkg = facts["packages"]["dpkg"]
    assert "packages" in dpkg and dpkg["problems"] == []  # real dpkg -l, parsed
    assert facts["driver"]["devices"]  # /proc/devices of the node
    assert facts["driver"]["loaded"] == {"unavailable": "/proc/driver/nvidia/version does not exist"}
    assert facts["gpus"]["list"] == {"unavailable": "nvidia-smi is not installed"}
    for subject in ("services", "infiniband", "kernel_log"):
        assert facts[subject] and all(value is not None for value in facts[subject].values()), facts[subject]
