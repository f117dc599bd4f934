"""Fixtures shared across the suite. The lab's live in tests/lab_fixtures.py; the
reliability figures printed at the end in tests/figures.py."""
import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.parallel import distribute, grouping_worker, starts_a_lab

# pytest-xdist's hooks for `make test` (tests/parallel.py), found here by their names
from tests.parallel import pytest_configure_node as pytest_configure_node
from tests.parallel import pytest_xdist_make_scheduler as pytest_xdist_make_scheduler

pytest_plugins = ["tests.lab_fixtures", "tests.figures", "tests.package_fixtures"]

# The remote runner's derived-data cache (what an initramfs holds) for runs on this machine
# (-c local, the runner tests): a directory of the session's own, never the machine's
# /var/cache, which lab nodes see through their overlay. Nodes reached over SSH keep theirs.
if "GPUCONF_CACHE_DIR" not in os.environ:
    os.environ["GPUCONF_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpuconf-test-cache-")
    atexit.register(shutil.rmtree, os.environ["GPUCONF_CACHE_DIR"], True)


# The markers (registered in pyproject.toml): `pytest -m unit` is the quick loop with no lab, no
# sshd and no Slurm; `make test` runs them all. A test is marked by what it starts, found from the
# fixtures it uses (transitively) and its own body, so a new lab test needs no marker by hand.
# Every test under these folders of tests/ (at any depth) is a lab test; tests/slurm's use the Slurm lab.
_LAB_DIRS = {"lab", "lab_sim", "gpu", "fabric"}
_TESTS = Path(__file__).resolve().parent


def _area(item) -> str:
    """The folder right under tests/ that holds the test: `unit`, `lab`, `slurm`, `remediate`, ..."""
    try:
        return item.path.resolve().relative_to(_TESTS).parts[0]
    except ValueError:
        return ""


def _starts_a_lab(item) -> bool:
    if _area(item) in _LAB_DIRS or "slurm_lab" in item.fixturenames:
        return True
    functions = [getattr(item, "function", None)]
    for defs in item._fixtureinfo.name2fixturedefs.values():
        functions += [definition.func for definition in defs]
    return any(starts_a_lab(func) for func in functions if func is not None)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if "slurm_lab" in item.fixturenames or _area(item) == "slurm":
            item.add_marker(pytest.mark.slurm)
            item.add_marker(pytest.mark.lab)
        elif _starts_a_lab(item):
            item.add_marker(pytest.mark.lab)
        else:
            item.add_marker(pytest.mark.unit)
    if grouping_worker(config):
        distribute(config, items, lambda item: item.get_closest_marker("lab") is not None)
