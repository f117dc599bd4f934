"""Package parsers: dpkg -l tables (with dpkg-query errors), dpkg-query -W, apt-mark,
apt-cache policy (German locale), on every real capture of those kinds."""
from __future__ import annotations

import pytest

from gpuconf.facts.common import incomplete
from gpuconf.facts.packages import (
    parse_apt_cache_policy,
    parse_apt_mark,
    parse_apt_mark_showhold,
    parse_dpkg_l,
    parse_dpkg_query,
)
from tests.real import read_real as read

# file -> (rows, installed (ii) rows, rc rows, not_found patterns, problems)
DPKG_L = {
    "dpkg/dpkg-l-nvidia-glob-440-TRUNCATED-k8s-device-plugin-178.txt": (8, 4, 1, (), ()),
    "dpkg/dpkg-l-with-dpkg-query-errors-510-TRUNCATED-nvidia-container-toolkit-188.txt":
        (7, 3, 1, ("*nvidia*rpm", "-qa"), ("_or_: command not found",)),
}


@pytest.mark.parametrize("rel", sorted(DPKG_L))
def test_dpkg_l(rel: str) -> None:
    rows, installed, config_only, not_found, problems = DPKG_L[rel]
    listing = parse_dpkg_l(read(rel))
    assert len(listing.packages) == rows
    assert sum(p.installed for p in listing.packages) == installed
    assert sum(p.status == "config-files" for p in listing.packages) == config_only
    assert (listing.not_found, listing.problems) == (not_found, problems)


def test_dpkg_l_columns_arch_and_cut_versions() -> None:
    listing = parse_dpkg_l(read("dpkg/dpkg-l-nvidia-glob-440-TRUNCATED-k8s-device-plugin-178.txt"))
    compute = [p for p in listing.packages if p.name == "libnvidia-compute-440"]
    assert [(p.arch, p.version, p.status_abbrev) for p in compute] == [
        ("amd64", "440.59-0ubuntu0.18", "ii"), ("i386", "440.59-0ubuntu0.18", "ii")]
    assert compute[0].version_may_be_cut  # the Version column is 18 wide and full
    absent = listing.get("libgldispatch0-nvidia")
    assert absent is not None and (absent.version, absent.installed, absent.status) == (None, False, "not-installed")
    old = listing.get("libnvidia-compute-435")
    assert old is not None and (old.desired, old.status, old.version) == ("remove", "config-files", "435.21-0ubuntu0.18")
    errors = parse_dpkg_l(read("dpkg/dpkg-l-with-dpkg-query-errors-510-TRUNCATED-nvidia-container-toolkit-188.txt"))
    common = errors.get("libnvidia-common-510")
    assert common is not None and (common.version, common.arch) == ("510.47.03-0ubuntu1", "all")


def test_dpkg_query_tab_format() -> None:
    listing = parse_dpkg_query(
        "nvidia-driver-535\t535.104.05-0ubuntu1\thi \n"
        "nvidia-fabricmanager-535\t535.86.05-1\tii \n"
        "cuda-toolkit-12-2\t\tun \n"
        "garbage\n"   # a line it cannot place, before the last: a problem (as the last line: a cut)
        "libnvidia-compute-535:i386\t535.104.05-0ubuntu1\tiF \n"
        "dpkg-query: no packages found matching nvidia-dkms-550\n")
    driver = listing.get("nvidia-driver-535")
    assert driver is not None and (driver.held, driver.installed, driver.version) == (True, True, "535.104.05-0ubuntu1")
    toolkit = listing.get("cuda-toolkit-12-2")
    assert toolkit is not None and (toolkit.installed, toolkit.version) == (False, None)
    half = listing.get("libnvidia-compute-535", arch="i386")
    assert half is not None and half.status == "half-configured"
    assert listing.not_found == ("nvidia-dkms-550",)
    assert listing.problems == ("garbage",)


def test_apt_mark_hold_output() -> None:
    marks = parse_apt_mark(read("apt/apt-mark-hold-nvidia-glob-shine-cluster-31.txt"))
    assert len(marks.held) == 42
    assert (marks.held[0], marks.held[-1]) == ("nvidia-340", "nvidia-headless-390")
    assert "nvidia-driver-440" in marks.held and marks.problems == ()
    again = parse_apt_mark("nvidia-driver-535 was already set on hold.\nCanceled hold on cuda-12-2.\n")
    assert (again.already_held, again.unheld) == (("nvidia-driver-535",), ("cuda-12-2",))
    assert parse_apt_mark_showhold("nvidia-driver-535\ncuda-toolkit-12-2\n") == ("nvidia-driver-535", "cuda-toolkit-12-2")


def test_apt_cache_policy_german_locale_truncated() -> None:
    (policy,) = parse_apt_cache_policy(read("apt/apt-cache-policy-nvidia-driver-555-debian12-german-locale-TRUNCATED-vaapi-312.txt"))
    assert (policy.package, policy.installed, policy.candidate) == ("nvidia-driver", "555.42.06-1", "555.42.06-1")
    assert len(policy.versions) == 8  # the ninth, cut off before its sources, is not read
    installed = [v for v in policy.versions if v.installed]
    assert [(v.version, v.priority) for v in installed] == [("555.42.06-1", 1001)]
    assert [s.origin for s in installed[0].sources][-1] == "/var/lib/dpkg/status"
    assert "535.183.01-1~deb12u1" not in {v.version for v in policy.versions}
    assert "535.183.01-1~deb12u1 500" in incomplete(parse_apt_cache_policy(read(
        "apt/apt-cache-policy-nvidia-driver-555-debian12-german-locale-TRUNCATED-vaapi-312.txt")))


def test_apt_cache_policy_english_none_and_several_packages() -> None:
    policies = parse_apt_cache_policy(
        "cuda-toolkit-12-2:\n  Installed: (none)\n  Candidate: 12.2.2-1\n  Version table:\n"
        "     12.2.2-1 500\n        500 https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64  Packages\n"
        "nvidia-driver-535:\n  Installed: 535.104.05-0ubuntu1\n  Candidate: 535.104.05-0ubuntu1\n  Version table:\n"
        " *** 535.104.05-0ubuntu1 1001\n        100 /var/lib/dpkg/status\n")
    assert [(p.package, p.installed, p.candidate) for p in policies] == [
        ("cuda-toolkit-12-2", None, "12.2.2-1"), ("nvidia-driver-535", "535.104.05-0ubuntu1", "535.104.05-0ubuntu1")]
    french = parse_apt_cache_policy("foo:\n  Installé : 1.0\n  Candidat : 1.1\n  Table de version :\n     1.1 500\n")
    assert (french[0].installed, french[0].candidate) == ("1.0", "1.1")  # positional fallback


CASES = sorted(DPKG_L) + ["apt/apt-mark-hold-nvidia-glob-shine-cluster-31.txt",
                          "apt/apt-cache-policy-nvidia-driver-555-debian12-german-locale-TRUNCATED-vaapi-312.txt"]


def test_dpkg_l_rows_without_the_header_ruler_are_packages() -> None:
    """`dpkg -l | grep nvidia` keeps the rows and drops the header and its ruler."""
    text = ("ii  nvidia-driver-535          535.104.05-0ubuntu1   amd64        NVIDIA driver metapackage\n"
            "hi  libnvidia-compute-535:amd64 535.104.05-0ubuntu1 amd64 NVIDIA libcompute package\n"
            "rc  nvidia-dkms-530             530.30.02-0ubuntu1    amd64        NVIDIA DKMS package\n")
    listing = parse_dpkg_l(text)
    assert [(p.name, p.version, p.arch, p.installed, p.held) for p in listing.packages] == [
        ("nvidia-driver-535", "535.104.05-0ubuntu1", "amd64", True, False),
        ("libnvidia-compute-535", "535.104.05-0ubuntu1", "amd64", True, True),
        ("nvidia-dkms-530", "530.30.02-0ubuntu1", "amd64", False, False)]
    assert listing.problems == ()
    cut = parse_dpkg_l(text[: text.index("535.104.05-0ubuntu1 amd64") + 6])
    assert [p.name for p in cut.packages] == ["nvidia-driver-535"] and cut.incomplete   # the cut row is not read



def test_the_installed_fact_reads_every_package_by_name_and_no_listing_cut_short() -> None:
    from gpuconf.facts.base import FactUnavailable, Output
    from gpuconf.facts.installed import _dpkg

    text = ("nvidia-driver-535\t535.104.05-0ubuntu1\thi \n"
            "cuda-toolkit-12-2\t<none>\tun \n"
            "libnvidia-compute-535:i386\t535.104.05-0ubuntu1\tiF \n"
            "garbage\n"
            "nvidia-kernel-common-535\t535.104.05-0ubuntu1\trc \n"
            "dpkg-query: no packages found matching nvidia-dkms-550\n\n")
    listing = _dpkg(Output(text))
    got = {name: (p.version, p.status, p.held, p.installed) for name, p in listing.packages.items()}
    assert got == {"nvidia-driver-535": ("535.104.05-0ubuntu1", "installed", True, True),
                   "cuda-toolkit-12-2": ("", "not-installed", False, False),
                   "libnvidia-compute-535": ("535.104.05-0ubuntu1", "half-configured", False, False),
                   "nvidia-kernel-common-535": ("535.104.05-0ubuntu1", "config-files", False, False)}
    assert [(u.name, u.state) for u in listing.unfinished] == [("libnvidia-compute-535", "half-configured")]
    with pytest.raises(FactUnavailable, match="cut short"):
        _dpkg(Output(text + "nvidia-utils-535\t535.10"))


def test_hosts_with_the_same_listing_share_one_read_only_parse() -> None:
    from gpuconf.facts.base import Output
    from gpuconf.facts.installed import _dpkg

    text = "nvidia-driver-580\t580.95.05-1\thi \nvim\t2:9.0.1378-2\tii \n"
    one, other = _dpkg(Output(text)).packages, _dpkg(Output("".join(text))).packages   # two hosts, equal strings
    assert one is other and one["vim"].installed
    with pytest.raises(TypeError):
        one["vim"] = one["nvidia-driver-580"]   # type: ignore[index]  # no host can change what all share
    assert _dpkg(Output(text + "curl\t7.88.1-10\tii \n")).packages is not one   # a host that differs parses its own
