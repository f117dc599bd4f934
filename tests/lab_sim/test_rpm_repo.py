"""The lab's EL 9 repository: real RPMs and module metadata, read by the real rpm and dnf.

dnf runs with ``--installroot`` in a temporary directory, so the machine's own state is never
touched; it sees only this repository (``--repofrompath``).
"""
from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuconf_lab.repo_rpm import build_rpm_repo
from gpuconf_lab.sim.rpm_packages import DRIVERS
from tests.real import read_real

FIXTURE = "dnf/dnf-module-list-nvidia-driver-rhel9-TRUNCATED-yum-precompiled-kmod-63.txt"
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(tool) for tool in ("rpmbuild", "createrepo_c", "dnf")),
    reason="needs root and rpmbuild, createrepo_c, dnf (scripts/system-deps.sh)")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return build_rpm_repo(tmp_path_factory.mktemp("rpm") / "repo")


@pytest.fixture
def dnf(repo, tmp_path):
    """Real dnf against the repository, in a throwaway install root."""
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["dnf", "-q", "-y", f"--installroot={tmp_path}", "--releasever=9", "--disableplugin=*",
             f"--repofrompath=gpuconf-lab,file://{repo}", "--repo=gpuconf-lab", "--setopt=gpgcheck=0",
             "--setopt=module_platform_id=platform:el9", *args],
            capture_output=True, text=True, timeout=120, env={"PATH": "/usr/sbin:/usr/bin", "HOME": str(tmp_path),
                                                              "LANG": "C.UTF-8"})
    return run


def module_documents(repo: Path) -> list[dict]:
    (path,) = (repo / "repodata").glob("*modules.yaml.gz")
    return list(yaml.safe_load_all(gzip.decompress(path.read_bytes())))


def rpm_query(path: Path, what: str) -> list[str]:
    done = subprocess.run(["rpm", "-qp", what, str(path)], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def test_module_metadata_has_every_stream_with_its_artifacts(repo):
    docs = module_documents(repo)
    streams = {d["data"]["stream"]: d["data"] for d in docs if d["document"] == "modulemd"}
    assert set(streams) == ({"latest-dkms", "open-dkms"} | {f"{b}-open" for b in DRIVERS}
                            | {f"{b}-dkms" for b in DRIVERS if b != "620"})       # R620: open modules only
    assert not [a for a in streams["620-open"]["artifacts"]["rpms"] if a.startswith("kmod-nvidia-latest-dkms")]
    assert "nvidia-open-3:620.70.10-1.el9.x86_64" in streams["620-open"]["artifacts"]["rpms"]
    (defaults,) = [d["data"] for d in docs if d["document"] == "modulemd-defaults"]
    assert defaults["stream"] == "open-dkms" and defaults["profiles"]["580-open"] == ["default"]
    open580 = streams["580-open"]["artifacts"]["rpms"]
    assert "nvidia-open-3:580.95.05-1.el9.x86_64" in open580
    assert "kmod-nvidia-open-dkms-3:580.105.08-1.el9.x86_64" in open580
    assert "nvidia-kmod-common-3:580.95.05-1.el9.noarch" in open580
    assert not [a for a in open580 if a.startswith("kmod-nvidia-latest-dkms") or ":595." in a]
    dkms580 = streams["580-dkms"]["artifacts"]["rpms"]
    assert "kmod-nvidia-latest-dkms-3:580.95.05-1.el9.x86_64" in dkms580
    assert not [a for a in dkms580 if a.startswith(("nvidia-open-", "kmod-nvidia-open-dkms"))]
    assert not [a for a in streams["535-open"]["artifacts"]["rpms"] if a.startswith("nvidia-open-")]   # R560+
    assert streams["580-open"]["profiles"]["fm"]["rpms"] == [
        "nvidia-driver", "nvidia-driver-cuda", "kmod-nvidia-open-dkms", "nvidia-fabric-manager", "libnvidia-nscq"]


def test_packages_carry_nvidias_epoch_release_and_scriptlets(repo):
    packages = repo / "Packages"
    meta = packages / "nvidia-open-580.95.05-1.el9.x86_64.rpm"
    assert rpm_query(meta, "--qf=%{EPOCH}:%{VERSION}-%{RELEASE}") == ["3:580.95.05-1.el9"]
    assert "kmod-nvidia-open-dkms = 3:580.95.05-1.el9" in rpm_query(meta, "--requires")
    kmod = packages / "kmod-nvidia-open-dkms-580.95.05-1.el9.x86_64.rpm"
    assert "kmod-nvidia-latest-dkms" in rpm_query(kmod, "--conflicts")
    assert "/usr/src/nvidia-580.95.05/kernel-open/nvidia/nv.c" in rpm_query(kmod, "-l")
    scripts = "\n".join(rpm_query(kmod, "--scripts"))
    assert "dkms add -m nvidia -v 580.95.05" in scripts and "dkms install -m nvidia -v 580.95.05 -k $kernel" in scripts
    common = "\n".join(rpm_query(packages / "nvidia-kmod-common-580.95.05-1.el9.noarch.rpm", "--scripts"))
    assert "grubby --update-kernel=ALL --args='rd.driver.blacklist=nouveau'" in common
    versions = sorted(p.name for p in packages.glob("nvidia-persistenced-*.rpm"))
    assert len(versions) == sum(len(v) for v in DRIVERS.values()) and versions[-1].startswith("nvidia-persistenced-620.70.10")
    assert sorted(p.name for p in packages.glob("cuda-1*.rpm")) == ["cuda-12.8.1-1.x86_64.rpm", "cuda-13.0.2-1.x86_64.rpm",
                                                                    "cuda-13.1.0-1.x86_64.rpm"]
    assert (repo.parent / "kernel-rpms/kernel-core-5.14.0-427.16.1.el9_4.x86_64.rpm").is_file()
    assert not list(packages.glob("kernel-core-5.14.0-427.16.1*"))   # only the fault brings it


def test_dnf_module_list_prints_like_the_real_capture(dnf):
    done = dnf("module", "list", "nvidia-driver")
    assert done.returncode == 0, done.stderr
    row = re.compile(r"^nvidia-driver +(\S+(?: \[[de]\])?) +(.+?) +(Nvidia driver for \S+ branch) *$")
    ours = {m.group(1): m for m in map(row.match, done.stdout.splitlines()) if m}
    real = {m.group(1): m for m in map(row.match, read_real(FIXTURE).splitlines()) if m}
    assert re.search(r"^Name +Stream +Profiles +Summary *$", done.stdout, re.M)
    assert list(ours)[:4] == ["latest-dkms", "open-dkms [d]", "535-dkms", "535-open"]
    for stream in ("latest-dkms", "open-dkms [d]", "535-dkms", "535-open"):
        assert ours[stream].group(2).startswith("default [d], fm"), stream
        assert real[stream].group(2).startswith("default [d], fm"), stream
        assert ours[stream].group(3) == real[stream].group(3)
    assert done.stdout.rstrip().endswith("Hint: [d]efault, [e]nabled, [x]disabled, [i]nstalled")


def test_an_enabled_stream_hides_every_other_streams_driver(dnf):
    assert dnf("module", "enable", "nvidia-driver:580-open").returncode == 0
    done = dnf("list", "--available", "--showduplicates", "nvidia-open", "kmod-nvidia-*", "nvidia-persistenced")
    assert done.returncode == 0, done.stderr
    found = sorted((line.split()[0], line.split()[1]) for line in done.stdout.splitlines()[1:])
    assert found == sorted([(f"{name}.x86_64", f"3:{version}-1.el9")
                            for name in ("kmod-nvidia-open-dkms", "nvidia-open", "nvidia-persistenced")
                            for version in ("580.105.08", "580.178.04", "580.95.05")])
