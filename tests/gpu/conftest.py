"""A lab of its own for the GPU library, converged once per session.

The shared session lab (tests/lab_fixtures.py) keeps fresh nodes for the
lab's own tests; converging changes nodes for good, so the GPU library gets
a separate lab: 2 x A100 (one is the subnet manager), 1 x H100, 1 x T4.
Each playbook goes check -> apply -> apply -> check exactly once; the tests
read what those runs recorded, and the drift scenarios start from there.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpuconf_lab.fleet import Lab
from tests.lab_fixtures import LAB_NAME, start_lab
from tests.report_runs import Run, run_gpuconf

# after LAB_NAME: GPUCONF_TEST_LAB keeps two checkouts' labs apart, the pytest-xdist worker two processes'
NAME = f"{LAB_NAME}-gpulib"[:31]
PLAYBOOKS = {"a100": "playbooks/a100-node.yml", "h100": "playbooks/h100-node.yml",
             "t4": "playbooks/t4-inference.yml"}
USER_DAEMON_JSON = {"log-driver": "json-file", "data-root": "/srv/docker"}


def gpuconf(verb: str, playbook: str, *args: str, report: Path, timeout: float = 600) -> Run:
    """A run on this lab (tests/report_runs.py)."""
    return run_gpuconf(NAME, verb, playbook, *args, report=report, timeout=timeout)


@dataclass
class Converged:
    lab: Lab
    tmp: Path
    runs: dict[str, dict[str, Run]] = field(default_factory=dict)
    digests: dict[str, tuple[str, str]] = field(default_factory=dict)  # node -> (before, after) first check

    def hosts(self, profile: str) -> list[str]:
        return [n.name for n in self.lab.nodes if n.profile == profile]

    def run(self, verb: str, profile: str, *args: str) -> Run:
        report = self.tmp / f"{verb}-{profile}-{len(list(self.tmp.iterdir()))}.json"
        return gpuconf(verb, PLAYBOOKS[profile], *args, report=report)

    def checked(self, profile: str, *args: str) -> Run:
        """A check that must leave every node of the profile byte for byte unchanged."""
        before = {h: self.lab.digest(h) for h in self.hosts(profile)}
        result = self.run("check", profile, *args)
        after = {h: self.lab.digest(h) for h in self.hosts(profile)}
        assert before == after, f"check changed a node: {[h for h in before if before[h] != after[h]]}"
        return result


def _converge(state: Converged, profile: str) -> dict[str, Run]:
    hosts = state.hosts(profile)
    for host in hosts:  # the user's own daemon.json, which the toolkit role must keep
        state.lab.exec(host, ["sh", "-c", "mkdir -p /etc/docker && printf '%s' "
                              + repr(json.dumps(USER_DAEMON_JSON)) + " > /etc/docker/daemon.json"])
    before = {h: state.lab.digest(h) for h in hosts}
    first = state.run("check", profile)
    after = {h: state.lab.digest(h) for h in hosts}
    for host in hosts:
        state.digests[host] = (before[host], after[host])
    apply = state.run("apply", profile)
    again = state.run("apply", profile, "--detailed-exitcodes")
    final = state.run("check", profile)
    return {"check": first, "apply": apply, "apply2": again, "check2": final}


@pytest.fixture(scope="session")
def converged(tmp_path_factory) -> Converged:
    pytest.importorskip("gpuconf_lab.repo", reason="the lab's apt repository of NVIDIA packages is not built yet")
    lab = start_lab(NAME, {"a100": 2, "h100": 1, "t4": 1})
    state = Converged(lab, tmp_path_factory.mktemp("gpulib"))
    try:
        with ThreadPoolExecutor(2) as pool:
            # the lab's one fabric has its subnet manager on a100-01: the H100's ports reach
            # ACTIVE only once the A100 play has started opensm, as on a real cluster
            t4 = pool.submit(_converge, state, "t4")
            state.runs["a100"] = _converge(state, "a100")
            state.runs["h100"] = _converge(state, "h100")
            state.runs["t4"] = t4.result()
        yield state
    finally:
        lab.down()
