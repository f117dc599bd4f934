"""A checkout anywhere: nodes see the checkout and venv the controller runs from, even under /tmp.

Every node mounts a fresh /tmp and /run at boot, and a node runs the machine's gpuconf in local
mode (image builds, the drift timer) against the lab's inventory in the checkout. A checkout under
/tmp (a CI runner's, say) is bound read-only at the same path in every node, and nothing else of
the machine's /tmp shows.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from gpuconf_lab.fleet import Lab
from gpuconf_lab.runtime import controller_paths, find_project_root
from tests.lab_fixtures import LAB_NAME, lab_unavailable, wait_until


def test_only_the_paths_a_node_cannot_see_are_shared():
    assert "/usr" not in controller_paths(Path("/usr"))   # a node sees the machine's / as its lower layer
    assert "/tmp/gpuconf-no-such-checkout" not in controller_paths(Path("/tmp/gpuconf-no-such-checkout"))
    inside = Path(tempfile.mkdtemp(prefix="gpuconf anywhere ", dir="/tmp"))
    try:
        (inside / ".venv").mkdir()
        shared = controller_paths(inside)
        assert str(inside) in shared and str(inside / ".venv") not in shared   # the parent covers it
        assert all(path.startswith(("/tmp/", "/run/")) for path in shared)
    finally:
        shutil.rmtree(inside)


def test_lab_up_from_inside_the_lab_distribution_writes_the_checkouts_inventories():
    checkout = Path(__file__).resolve().parents[2]
    assert find_project_root(checkout / "lab" / "gpuconf_lab" / "sim") == checkout


def test_a_checkout_under_tmp_with_a_space_is_seen_read_only_by_nodes_across_reboots():
    why = lab_unavailable()
    if why:
        pytest.skip(why)
    checkout = Path(tempfile.mkdtemp(prefix="gpuconf checkout ", dir="/tmp"))
    neighbour = Path(tempfile.mkdtemp(prefix="gpuconf-neighbour-", dir="/tmp"))
    (checkout / "pyproject.toml").write_text("[project]\nname = 'a-checkout'\n")
    (checkout / "marker").write_text("the controller's checkout\n")
    lab = Lab(f"{LAB_NAME[:20]}-anywhere", boot_delay=0.2, project_root=checkout)
    try:
        if lab.exists():
            lab.down()
        lab.up({"t4": 1})
        assert lab.inventory_path.is_relative_to(checkout)

        def sees_the_checkout() -> None:
            rc, out, err = lab.exec("t4-01", ["cat", str(checkout / "marker"), str(lab.inventory_path)])
            assert rc == 0 and out.startswith("the controller's checkout\n"), err
            rc, _, err = lab.exec("t4-01", ["touch", str(checkout / "written-by-a-node")])
            assert rc != 0 and "Read-only file system" in err
            assert lab.exec("t4-01", ["test", "-e", str(neighbour)])[0] == 1   # the rest of /tmp stays hidden
            if str(Path(sys.prefix)).startswith(("/tmp/", "/run/")):
                assert lab.exec("t4-01", ["test", "-x", sys.executable])[0] == 0

        sees_the_checkout()
        boot_id = lab.exec("t4-01", ["cat", "/proc/sys/kernel/random/boot_id"])[1]
        lab.reboot("t4-01")
        assert wait_until(lambda: lab.exec("t4-01", ["cat", "/proc/sys/kernel/random/boot_id"])[1]
                          not in ("", boot_id), 30, 0.1)
        lab.wait_ssh("t4-01", 30)
        sees_the_checkout()   # bound again in the new /tmp
        assert not (checkout / "written-by-a-node").exists()
    finally:
        lab.down()
        shutil.rmtree(checkout, ignore_errors=True)
        shutil.rmtree(neighbour, ignore_errors=True)
