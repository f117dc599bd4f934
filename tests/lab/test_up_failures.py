"""`lab up` that cannot finish leaves nothing behind and says why."""
from __future__ import annotations

import socket

import pytest

from gpuconf_lab.fleet import Lab
from gpuconf_lab.runtime import LabError
from tests.lab_fixtures import lab_traces, lab_unavailable


@pytest.fixture(autouse=True)
def needs_lab():
    why = lab_unavailable()
    if why:
        pytest.skip(why)


def test_a_port_taken_on_every_address_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", 0))
        listener.listen()
        port = listener.getsockname()[1]
        lab = Lab("labporttest", port=port, project_root=tmp_path)
        with pytest.raises(LabError, match=f"0.0.0.0:{port}.*choose another --port"):
            lab.up({"t4": 1})
    assert not lab.paths.root.exists()
    assert not (tmp_path / "inventories").exists()


def test_nodes_that_do_not_answer_in_time_are_removed_with_everything_else(tmp_path):
    lab = Lab("labtimeouttest", project_root=tmp_path)
    with pytest.raises(LabError, match="did not answer SSH within 0s"):
        lab.up({"t4": 2}, timeout=0)
    assert lab_traces(lab.paths) == ([], [])
    assert not lab.paths.root.exists()
    assert not (tmp_path / "inventories" / lab.name).exists()
