"""containerd and `nvidia-ctk runtime configure --runtime=containerd` (lab/gpuconf_lab/sim/containerd.py),
read back by the containerd_nvidia_runtime task's own check: what the toolkit writes is in sync,
what it lacks is drift naming why, and a node without containerd has nothing to do."""
from __future__ import annotations

import base64

from gpuconf.facts.base import file_state
from gpuconf.tasks.containerd import CONFIG, CONTAINERD, DROP_IN
from gpuconf.tasks.registry import TASK_TYPES, build_params
from tests.unit.tasks.test_tasks_table import Conditions, served

CONFIGURE = "nvidia-ctk runtime configure --runtime=containerd --cdi.enabled"


def check(node):
    """The task's verdict on the sandbox node's files."""
    replies = {}
    for path in (CONTAINERD, CONFIG, DROP_IN):
        key = file_state(path).key
        real = node.path(path)
        replies[key] = {"exists": False} if not real.exists() else {
            "exists": True, "kind": "file", "mode": 0o644, "owner": "root", "group": "root",
            "content_b64": base64.b64encode(real.read_bytes()).decode()}
    task = TASK_TYPES["containerd_nvidia_runtime"]
    model = build_params(task.name, task.resolve({}, Conditions(None)))
    return task.check(model, served(replies, task.reads(model), None, (), task.host_facts))


def configure(node, *flags: str):
    return node.tool("/usr/bin/nvidia-ctk", "runtime", "configure", "--runtime=containerd", *flags)


def test_without_containerd_there_is_nothing_to_configure(make_node):
    node = make_node("t4", driver="580.95.05")
    node.install("nvidia-container-toolkit", "1.20.0")
    verdict = check(node)
    assert verdict.changes == [] and "containerd is not installed" in verdict.message


def test_the_toolkit_writes_the_drop_in_and_the_import_and_the_daemon_loads_both(make_node):
    node = make_node("t4", driver="580.95.05")
    node.install("nvidia-container-toolkit", "1.20.0")
    node.install("containerd")
    node.write(CONFIG, 'version = 2\n\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n')
    [change] = check(node).changes
    assert change.summary == (f"configure containerd's nvidia runtime with CDI enabled: {DROP_IN} is missing; "
                              f"{CONFIG} does not import {DROP_IN}")
    assert [op.command for op in change.ops] == [CONFIGURE]
    done = configure(node, "--cdi.enabled")
    assert done.returncode == 0, done.stderr
    assert node.read(CONFIG).startswith('imports = ["/etc/containerd/conf.d/*.toml"]\nversion = 2\n')
    assert 'sandbox_image = "pause:3.9"' in node.read(CONFIG)               # the user's settings kept
    assert "    enable_cdi = true\n" in node.read(DROP_IN)
    verdict = check(node)
    assert verdict.changes == [], verdict.message
    started = node.tool("/usr/bin/systemctl", "restart", "containerd")
    assert started.returncode == 0, started.stderr
    loaded = node.read("/run/gpuconf-lab/containerd.json")
    assert '"enable_cdi": true' in loaded and '"nvidia"' in loaded, loaded


def test_a_drop_in_without_cdi_is_drift_and_configure_is_idempotent(make_node):
    node = make_node("t4", driver="580.95.05")
    node.install("nvidia-container-toolkit", "1.20.0")
    node.install("containerd")
    assert configure(node).returncode == 0                                   # no --cdi.enabled
    [change] = check(node).changes
    assert change.summary.endswith(f"{DROP_IN}: CDI is not enabled (enable_cdi)")
    assert configure(node, "--cdi.enabled").returncode == 0
    once = node.read(CONFIG)
    assert configure(node, "--cdi.enabled").returncode == 0
    assert node.read(CONFIG) == once and once.count("conf.d/*.toml") == 1
    assert check(node).changes == []
