"""`lab exec` runs as root inside the node, not on the machine, and passes the exit code through."""
from __future__ import annotations

import pytest

from gpuconf_lab.runtime import LabError


def test_exec_runs_as_root_inside_the_node(lab):
    rc, out, _ = lab.exec("a100-02", ["sh", "-c", "id -u; hostname; cat /etc/gpuconf-lab/node.json"])
    assert rc == 0
    uid, hostname, node_json = out.splitlines()
    assert (uid, hostname) == ("0", "a100-02") and '"profile": "a100"' in node_json


def test_exec_passes_the_exit_code_and_streams_through(lab):
    assert lab.exec("a100-02", "echo out; echo err >&2; exit 7") == (7, "out\n", "err\n")
    assert lab.exec("a100-02", ["false"])[0] == 1


def test_exec_on_an_unknown_node_lists_the_nodes(lab):
    with pytest.raises(LabError, match="has no node 'gpu-7'.*a100-01"):
        lab.exec("gpu-7", "true")
