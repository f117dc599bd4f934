"""gpuconf_agent as a table: the node's Pythons and its agent.json in, the changes out.

The Python is chosen from what the distribution has (the /usr/bin/python3 link and the
pythonX.Y there): its python3 when new enough, else its newest pythonX.Y that is, else its newer
Python package, else a refusal naming what is missing."""
from __future__ import annotations

import json

import pytest

from gpuconf import __version__
from gpuconf.facts.platform import resolve
from gpuconf.tasks.agent import NODE_PYTHON, GpuconfAgent, choose_python
from gpuconf.tasks.base import Facts, Refused
from gpuconf.tasks.registry import build_params
from tests.platforms import DEBIAN_12, ROCKY_9, ROCKY_10
from tests.replies import parsed_replies

UBUNTU_22 = resolve('NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n', {"dpkg-query", "apt-get"})
DEBIAN_11 = resolve('PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\nVERSION_ID="11"\nID=debian\n',
                    {"dpkg-query", "apt-get"})
TASK = GpuconfAgent()


def test_the_node_python_is_gpuconfs_own_requirement():
    import tomllib

    from tests.paths import ROOT

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">={}.{}".format(*NODE_PYTHON)


@pytest.mark.parametrize("platform, link, versioned, path, package", [
    (DEBIAN_12, "python3.11", {"python3.11"}, "/usr/bin/python3.11", None),
    (ROCKY_10, "python3.12", {"python3.12"}, "/usr/bin/python3.12", None),
    (ROCKY_9, "python3.9", {"python3.9", "python3.11"}, "/usr/bin/python3.11", None),   # installed before
    (ROCKY_9, "python3.9", {"python3.9", "python3.11", "python3.12"}, "/usr/bin/python3.12", None),
    (ROCKY_9, "python3.9", {"python3.9"}, "/usr/bin/python3.11", "python3.11"),         # EL 9's AppStream
    (UBUNTU_22, "python3.10", {"python3.10"}, "/usr/bin/python3.11", "python3.11"),     # universe
], ids=["debian12", "el10", "el9-with-3.11", "el9-with-3.12", "el9", "ubuntu22.04"])
def test_the_distributions_python_where_new_enough_else_its_newer_package(platform, link, versioned, path, package):
    chosen = choose_python(link, versioned, platform)
    assert (chosen.path, chosen.package) == (path, package)


def test_a_distribution_with_no_python_new_enough_says_what_is_missing():
    with pytest.raises(Refused) as refused:
        choose_python("python3.9", {"python3.9"}, DEBIAN_11)
    assert str(refused.value) == (
        "Debian 11's python3 is 3.9, and gpuconf's node half needs Python 3.11 or newer, which Debian 11 does "
        "not package: install one and give its path as gpuconf_agent_python (e.g. /usr/local/bin/python3.11)")


def facts(agent: dict | None, link: str = "python3.11", versioned=("python3.11",), platform=DEBIAN_12,
          launcher: bool = True, params=None) -> Facts:
    params = params or build_params("gpuconf_agent", {})
    reads = TASK.reads(params)
    replies = {reads[0].key: {"exists": False} if agent is None else {
                   "exists": True, "kind": "file", "mode": 0o644, "owner": "root", "group": "root",
                   "content_b64": __import__("base64").b64encode(json.dumps(agent).encode()).decode()},
               reads[1].key: {"exists": launcher, **({"kind": "file", "mode": 0o755} if launcher else {})},
               reads[2].key: {"files": {"/usr/bin/python3": link} if link else {}},
               reads[3].key: {"files": {f"/usr/bin/{name}": "" for name in versioned}}}
    return Facts(parsed_replies(reads, replies), reads, {"architecture": "x86_64"}, platform=platform,
                 host_facts=TASK.host_facts)


def agent(version: str = __version__, python: str = "/usr/bin/python3.11", tag: str = "cp311-x86_64") -> dict:
    return {"version": version, "python": python, "tag": tag, "python_version": "3.11.2"}


def summaries(verdict) -> list[str]:
    return [change.summary for change in verdict.changes]


def test_the_controllers_version_on_the_chosen_python_is_in_sync():
    verdict = TASK.check(build_params("gpuconf_agent", {}), facts(agent()))
    assert verdict.changes == [] and verdict.message == (
        f"gpuconf agent {__version__} (the controller's version) in /opt/gpuconf, on /usr/bin/python3.11")


@pytest.mark.parametrize("installed, launcher, summary", [
    (None, False, f"install gpuconf {__version__} (the controller's) on /usr/bin/python3.11"),
    (agent("0.0.1"), True, f"gpuconf agent 0.0.1 is behind the controller's {__version__}: install {__version__}"),
    (agent("99.0.0"), True, f"gpuconf agent 99.0.0 is ahead of the controller's {__version__}: install {__version__}"),
    (agent(python="/usr/bin/python3.12", tag="cp312-x86_64"), True,
     f"gpuconf agent {__version__} runs on /usr/bin/python3.12: install it on /usr/bin/python3.11"),
    (agent(), False, f"gpuconf agent {__version__}: /opt/gpuconf/bin/gpuconf is missing: install it again"),
], ids=["none", "behind", "ahead", "other-python", "no-launcher"])
def test_an_agent_that_is_not_the_controllers_is_drift(installed, launcher, summary):
    verdict = TASK.check(build_params("gpuconf_agent", {}), facts(installed, launcher=launcher))
    assert summaries(verdict) == [summary]
    assert verdict.changes[0].after == {"version": __version__, "python": "/usr/bin/python3.11",
                                        "tag": "cp311-x86_64"}


def test_el9_gets_python311_from_dnf_first():
    verdict = TASK.check(build_params("gpuconf_agent", {}), facts(None, "python3.9", ("python3.9",), ROCKY_9))
    assert [(c.summary, [op.command for op in c.ops]) for c in verdict.changes] == [
        ("install python3.11 (Rocky 9.4's python3 is too old: gpuconf's node half needs Python 3.11 or newer)",
         ["dnf -y -q install python3.11"]),
        (f"install gpuconf {__version__} (the controller's) on /usr/bin/python3.11", [])]
    ubuntu = TASK.check(build_params("gpuconf_agent", {}), facts(None, "python3.10", ("python3.10",), UBUNTU_22))
    assert [op.command for op in ubuntu.changes[0].ops] == [
        "env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3.11"]


def test_a_given_python_is_used_and_must_be_a_versioned_path():
    params = build_params("gpuconf_agent", {"python": "/opt/python/bin/python3.12"})
    verdict = TASK.check(params, facts(None, params=params))
    assert verdict.changes[0].after["python"] == "/opt/python/bin/python3.12"
    assert verdict.changes[0].after["tag"] == "cp312-x86_64"
    for bad in ("python3", "/usr/bin/python3", "relative/python3.11"):
        with pytest.raises(ValueError, match="python must be an absolute path to a pythonX.Y"):
            build_params("gpuconf_agent", {"python": bad})
    assert build_params("gpuconf_agent", {"python": "", "wheelhouse": ""}).python is None
