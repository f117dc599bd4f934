"""`make test` runs the suite in several processes (pytest-xdist, `-n N --dist loadgroup`): this
module (its hooks are tests/conftest.py's) decides which tests must share a process, and in which
order the work is handed out.

A lab is a session (or module) fixture of one process. The labs that cost little to start (the
session's fresh `lab`, `el9_lab`, the `sshd`: PER_PROCESS) are named after the worker too
(tests/lab_fixtures.py), so each process that needs one starts its own. The others converge GPU
nodes or run a Slurm cluster, and are started once (so is what ONCE_PER_RUN names): every lab test
is in a group, and a group holds, together, each test module with a lab test and every such fixture
its tests use (a union over "module M uses fixture F"), so such a lab starts in the one process
that runs all of its tests, in their usual order. The unit tests have no group and go wherever a
process is free.

The groups are handed out first, the heaviest first (`weight`), so that the long lab waits
(reboots, Slurm, converging a GPU lab) overlap each other and the unit tests' CPU fill the gaps.

pytest-xdist's own `xdist_group` marks cannot carry this: under pytest 9.2 the group never reaches
its scheduler (pytest-xdist issue 1386, "`--dist=loadgroup` silently stops grouping"). So each
worker writes the groups it computed at collection into a file the controller names, and the
controller's scheduler (`GroupScheduling`, xdist's scope scheduler with these groups as scopes)
reads them: every worker collects the same tests in the same order, so any worker's file will do.
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

# What a fixture's source must hold to start a lab (the markers of tests/conftest.py use it too).
STARTS_A_LAB = ("start_lab(", "Lab(", "SSHD", "slurm=True")
# Labs each process starts for itself (a few seconds): their tests need not share a process.
PER_PROCESS = {"lab", "el9_lab", "sshd"}
# Session fixtures that start no lab but cost too much to make in each process (a wheel built, a virtual
# environment installed from the package index): their tests are grouped like a lab's.
ONCE_PER_RUN = {"gpuconf_wheel", "installed_gpuconf"}
_sources: dict[object, str] = {}
_GROUPS_DIR = "gpuconf_groups"   # the controller's directory for the workers' files, in workerinput


def source(func) -> str:
    if func not in _sources:
        try:
            _sources[func] = inspect.getsource(func)
        except (OSError, TypeError):
            _sources[func] = ""
    return _sources[func]


def starts_a_lab(func) -> bool:
    return any(marker in source(func) for marker in STARTS_A_LAB)


class _Union:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def join(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)   # the smaller key names the group: the same in every process


def once_per_run(item) -> list[str]:
    """The session-wide fixtures in the test's closure made once a run: those that start a lab (but the
    PER_PROCESS ones) and ONCE_PER_RUN."""
    names = []
    for name, defs in item._fixtureinfo.name2fixturedefs.items():
        definition = defs[-1]
        if name in ONCE_PER_RUN or (name not in PER_PROCESS and definition.scope in ("session", "package")
                                    and starts_a_lab(definition.func)):
            names.append(name)
    return names


def _module(item: pytest.Item) -> str:
    return "module " + item.nodeid.split("::")[0]


def group_labs(items: Iterable[pytest.Item], is_lab: Callable[[pytest.Item], bool]) -> dict[str, list[pytest.Item]]:
    """The group of each lab test and each test of a fixture made once a run (by the union above), as
    {group name: its tests in collection order}."""
    union = _Union()
    lab_items = [item for item in items if is_lab(item) or once_per_run(item)]
    for item in lab_items:
        union.find(_module(item))
        for name in once_per_run(item):
            union.join(_module(item), "fixture " + name)
    groups: dict[str, list[pytest.Item]] = {}
    for item in lab_items:
        groups.setdefault(union.find(_module(item)), []).append(item)
    return groups


def weight(item: pytest.Item) -> float:
    """A rough cost in seconds, for the order only: a lab test waits on its lab far longer than a unit
    test computes."""
    return 10.0 if item.get_closest_marker("lab") else 0.1


def grouping(config: pytest.Config) -> bool:
    """True in the controller of a `--dist loadgroup` run."""
    return not hasattr(config, "workerinput") and config.getoption("dist", "no") == "loadgroup"


def grouping_worker(config: pytest.Config) -> bool:
    """True in each worker of a `--dist loadgroup` run."""
    return _GROUPS_DIR in getattr(config, "workerinput", {})


def distribute(config: pytest.Config, items: list[pytest.Item], is_lab: Callable[[pytest.Item], bool]) -> None:
    """In a worker: the groups first, the heaviest first (each group's tests in their order), then the
    unit tests in theirs; each test's group written for the controller's scheduler."""
    groups = group_labs(items, is_lab)
    ordered = sorted(groups.items(), key=lambda group: -sum(weight(item) for item in group[1]))
    grouped = {item.nodeid: name for name, members in ordered for item in members}
    items[:] = [item for _, members in ordered for item in members] + \
        [item for item in items if item.nodeid not in grouped]
    path = Path(config.workerinput[_GROUPS_DIR]) / f"{config.workerinput['workerid']}.json"
    path.write_text(json.dumps(grouped))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """The controller, for each worker it starts: where the worker writes its groups."""
    config = node.config
    if grouping(config):
        if not hasattr(config, "_gpuconf_groups"):
            config._gpuconf_groups = tempfile.mkdtemp(prefix="gpuconf-test-groups-")
            config.add_cleanup(lambda: shutil.rmtree(config._gpuconf_groups, ignore_errors=True))
        node.workerinput[_GROUPS_DIR] = config._gpuconf_groups


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if not grouping(config):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """xdist's scope scheduler with a test's group as its scope (a unit test is its own), in the
        workers' order: the groups, heaviest first, then the unit tests."""

        def __init__(self, config, log=None) -> None:
            super().__init__(config, log)
            self.group_of: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.group_of is None:
                files = sorted(os.listdir(config._gpuconf_groups))
                self.group_of = json.loads((Path(config._gpuconf_groups) / files[0]).read_text()) if files else {}
            return self.group_of.get(nodeid, nodeid)

    config.option.loadscopereorder = False   # the workers' order, not by size
    return GroupScheduling(config, log)
