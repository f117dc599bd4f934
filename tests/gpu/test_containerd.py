"""containerd with the nvidia runtime and CDI on the converged lab, over SSH (issue 30, item 3).

The fleet's nodes run Docker only, so the container toolkit's containerd task is in sync there
("not installed"). Once an operator installs containerd (a node joining Kubernetes), check finds
the runtime unconfigured, apply runs the node's own `nvidia-ctk runtime configure
--runtime=containerd --cdi.enabled` and restarts containerd, which then runs with the nvidia
runtime and CDI enabled, and a second check is clean. containerd is purged again afterwards.
"""
from __future__ import annotations

import json

from tests.gpu.test_drift import detect_and_repair, sh

HOST = "t4-01"
TASK = "containerd has the nvidia runtime with CDI enabled (where containerd is installed)"


def test_a_node_without_containerd_has_nothing_to_configure(converged):
    check = converged.checked("t4", "--limit", HOST)
    assert check.rc == 0, check.stdout[-3000:]
    [task] = [t for t in check.host_tasks(HOST) if t["task"] == TASK]
    assert "containerd is not installed" in task["message"], task


def test_containerd_installed_later_is_configured_with_cdi_and_restarted(converged):
    sh(converged, HOST, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q containerd")
    try:
        assert sh(converged, HOST, "systemctl is-active containerd").strip() == "active"
        found = detect_and_repair(converged, "t4", HOST, {TASK})
        assert "/etc/containerd/conf.d/99-nvidia.toml is missing" in found[TASK], found[TASK]
        assert "enable_cdi = true" in sh(converged, HOST, "cat /etc/containerd/conf.d/99-nvidia.toml")
        assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in sh(converged, HOST, "cat /etc/containerd/config.toml")
        # the handler restarted containerd: the running daemon loaded the drop-in
        loaded = json.loads(sh(converged, HOST, "cat /run/gpuconf-lab/containerd.json"))
        assert loaded["enable_cdi"] is True and "nvidia" in loaded["runtimes"], loaded
    finally:
        sh(converged, HOST, "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q containerd")
    assert converged.checked("t4", "--limit", HOST).rc == 0
