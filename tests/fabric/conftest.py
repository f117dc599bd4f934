"""The fabric lab, started and converged once per session (tests/fabric/fabric_helpers.py)."""
from __future__ import annotations

import pytest

from tests.fabric.fabric_helpers import H100_VARS, NAME, FabricLab
from tests.lab_fixtures import start_lab


@pytest.fixture(scope="session")
def fabric_lab(tmp_path_factory):
    lab = start_lab(NAME, {"b200": 1, "gb200": 2, "h100": 1})
    state = FabricLab(lab, tmp_path_factory.mktemp("fabric"), {}, {}, {})
    try:
        for kind in ("b200", "gb200"):
            state.first[kind] = state.gpuconf("check", kind)
            state.applied[kind] = state.gpuconf("apply", kind)
            state.second[kind] = state.gpuconf("check", kind)
        state.applied["h100"] = state.gpuconf("apply", "h100", *H100_VARS)
        yield state
    finally:
        lab.down()
