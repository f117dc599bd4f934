"""The lab's EL 10 repository: real RPMs at NVIDIA's `1.el10` release, no module metadata at all,
read by the real rpm and dnf (in a throwaway ``--installroot``, as test_rpm_repo does for EL 9).

With no driver module streams (NVIDIA's RHEL 10 guide), dnf offers every driver version at once:
only a versionlock keeps a node on its branch, which is what the EL 10 node's lab test proves.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuconf_lab.repo_rpm import build_rpm_repo

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(tool) for tool in ("rpmbuild", "createrepo_c", "dnf")),
    reason="needs root and rpmbuild, createrepo_c, dnf (scripts/system-deps.sh)")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rpm10")
    return build_rpm_repo(root / "repo", root / "kernel-rpms", el="10")


def dnf(repo: Path, root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["dnf", "-q", "-y", f"--installroot={root}", "--releasever=10", "--disableplugin=*",
         f"--repofrompath=gpuconf-lab,file://{repo}", "--repo=gpuconf-lab", "--setopt=gpgcheck=0",
         "--setopt=module_platform_id=platform:el10", *args],
        capture_output=True, text=True, timeout=120, env={"PATH": "/usr/sbin:/usr/bin", "HOME": str(root),
                                                          "LANG": "C.UTF-8"})


def test_the_repository_has_no_module_metadata(repo):
    assert (repo / "repodata/repomd.xml").is_file()
    assert not list((repo / "repodata").glob("*modules*"))
    assert "modules" not in (repo / "repodata/repomd.xml").read_text()


def test_packages_carry_the_el10_release_and_rocky_10s_os_release(repo):
    meta = repo / "Packages/nvidia-open-580.178.04-1.el10.x86_64.rpm"
    done = subprocess.run(["rpm", "-qp", "--qf=%{EPOCH}:%{VERSION}-%{RELEASE}\\n", "--requires", str(meta)],
                          capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[0] == "3:580.178.04-1.el10"
    assert "kmod-nvidia-open-dkms = 3:580.178.04-1.el10" in done.stdout
    release = repo / "Packages/rocky-release-10.0-1.6.el10.noarch.rpm"
    provides = subprocess.run(["rpm", "-qp", "--provides", str(release)], capture_output=True, text=True, check=True)
    assert "system-release(releasever) = 10" in provides.stdout
    assert "base-module(platform:el10)" in provides.stdout
    assert not list((repo / "Packages").glob("*el9*")), "an EL 9 package in the EL 10 repository"
    assert not list((repo / "Packages").glob("*-535.*")), "branch 535 predates EL 10"


def test_dnf_offers_every_driver_branch_without_a_stream(repo, tmp_path):
    done = dnf(repo, tmp_path, "list", "--available", "--showduplicates", "nvidia-open")
    assert done.returncode == 0, done.stderr
    versions = {line.split()[1] for line in done.stdout.splitlines()[1:]}
    assert {"3:580.178.04-1.el10", "3:595.91.07-1.el10", "3:620.70.10-1.el10"} <= versions, versions
    latest = dnf(repo, tmp_path, "repoquery", "--latest-limit=1", "--qf=%{version}", "nvidia-open")
    assert latest.stdout.split() == ["620.70.10"], latest.stdout + latest.stderr   # what an unlocked upgrade takes
