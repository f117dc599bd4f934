"""One rule for output cut short (gpuconf.facts.common.reads_whole_lines): every line parser's result says it is
incomplete when its last line was cut, whatever the result's type (a row tuple or a mapping too), and a parser that
knows its rows also takes a last line that is not a whole row for a cut, newline or not."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import gpuconf.facts
from gpuconf.facts.apt_policy import parse_apt_cache_policy
from gpuconf.facts.common import CutRows, incomplete
from gpuconf.facts.packages import parse_dpkg_l, parse_dpkg_query
from tests.real import read_real

CUT_ROW = "dpkg/dpkg-l-last-row-cut-after-name-510-TRUNCATED-nvidia-container-toolkit-188.txt"
CASES = (CUT_ROW,)


def test_a_dpkg_row_cut_after_its_name_makes_the_list_incomplete():
    listed = parse_dpkg_l(read_real(CUT_ROW))
    assert incomplete(listed).startswith("the last line ('ii  libnvidia-compute') is not a whole row")
    assert "libnvidia-compute" not in {p.name for p in listed.packages}  # never a package without its version
    whole = parse_dpkg_l(read_real(CUT_ROW).rsplit("ii  libnvidia-compute", 1)[0])
    assert listed.packages == whole.packages and not incomplete(whole)


def test_an_apt_source_cut_short_makes_the_policy_incomplete_with_or_without_its_newline():
    text = read_real("apt/apt-cache-policy-cuda-repo-pin-580-TRUNCATED-apt-packaging-fabric-manager-3.txt")
    for cut in (text, text + "\n"):
        policy = parse_apt_cache_policy(cut)
        assert isinstance(policy, CutRows) and "cut short" in incomplete(policy)
        assert all(s.origin.endswith(" Packages") or s.origin == "/var/lib/dpkg/status"
                   for p in policy for v in p.versions for s in v.sources)
    ends_on_a_version = parse_apt_cache_policy(read_real(
        "apt/apt-cache-policy-nvidia-driver-555-debian12-german-locale-TRUNCATED-vaapi-312.txt"))
    assert "535.183.01-1~deb12u1 500" in incomplete(ends_on_a_version)  # a version row comes before its sources
    assert parse_dpkg_query("nvidia-driver-550\t550.90.07-0ubuntu1\tii \nlibnvidia-cfg1-550\t").packages[0].name \
        == "nvidia-driver-550"
    assert incomplete(parse_dpkg_query("nvidia-driver-550\t550.90.07-0ubuntu1\tii \nlibnvidia-cfg1-550\t\n"))


def line_parsers() -> list:
    found = []
    for module in pkgutil.walk_packages(gpuconf.facts.__path__, "gpuconf.facts."):
        loaded = importlib.import_module(module.name)
        found += [(f"{module.name}.{name}", value) for name, value in vars(loaded).items()
                  if inspect.isfunction(value) and getattr(value, "reads_whole_lines", False)
                  and value.__module__ == module.name]
    return sorted(found, key=lambda item: item[0])


@pytest.mark.parametrize(("name", "parse"), line_parsers(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_line_parser_says_a_cut_output_is_incomplete(name, parse):
    result = parse("GPU 00000000:3B:00.0\nii  nvidia-driver-5")
    if result is None:
        return  # "nothing found" in an earlier, shorter output: a search, not a value
    assert incomplete(result), f"{name} returned {result!r} for output cut mid-line without saying so"


def test_the_rule_covers_the_parsers_that_return_rows_and_mappings():
    names = {name for name, _ in line_parsers()}
    assert {"gpuconf.facts.apt_policy.parse_apt_cache_policy", "gpuconf.facts.rpm.parse_rpm_qa",
            "gpuconf.facts.infiniband_verbs.parse_ibstatus", "gpuconf.facts.nvidia.driver.parse_proc_driver_params"} <= names
    assert len(names) >= 35
