"""The lab's apt repository, and real apt/dpkg using it inside a throwaway overlay node.

The pin tests are the evidence behind the preferences stanza documented in
``lab/gpuconf_lab/repo.py``: a pin on ``cuda-toolkit-12-2`` alone does not stop
``apt-get install cuda`` from pulling 12.4; pinning the ``cuda`` metapackage does.
"""
from __future__ import annotations

import hashlib
import re

import pytest

from gpuconf_lab.repo import CUDA_PIN_EXAMPLE, build_repo

from .sandbox import available, run_in_sandbox

needs_sandbox = pytest.mark.skipif(available() is not None, reason=f"sandbox: {available()}")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return build_repo(tmp_path_factory.mktemp("repo") / "repo")


def packages(repo) -> list[dict]:
    text = (repo / "dists/gpuconf-lab/main/binary-amd64/Packages").read_text()
    stanzas = []
    for block in text.strip().split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z0-9-]+): (.*)$", block, re.M))
        stanzas.append(fields)
    return stanzas


def versions(repo, name: str) -> list[str]:
    return sorted(p["Version"] for p in packages(repo) if p["Package"] == name)


def test_the_repository_holds_the_versions_gpuconf_needs(repo):
    assert versions(repo, "nvidia-driver-535") == ["535.104.05-1", "535.86.05-1"]
    assert versions(repo, "nvidia-driver-550") == ["550.127.05-1"]
    assert versions(repo, "nvidia-fabricmanager-535") == ["535.104.05-1", "535.86.05-1"]
    assert versions(repo, "cuda-toolkit-12-2") == ["12.2.0-1", "12.2.2-1"]
    assert versions(repo, "cuda") == ["11.7.1-1", "12.2.0-1", "12.2.2-1", "12.4.1-1"]
    for name in ("dkms", "opensm", "infiniband-diags", "ibverbs-utils", "rdma-core", "nvidia-container-toolkit",
                 "docker.io", "nvidia-persistenced", "cuda-toolkit-11-7", "cuda-toolkit-12-4"):
        assert versions(repo, name), name
    driver = next(p for p in packages(repo) if p["Package"] == "nvidia-driver-535" and p["Version"] == "535.86.05-1")
    assert driver["Depends"] == "nvidia-dkms-535 (= 535.86.05-1), nvidia-utils-535 (= 535.86.05-1)"
    assert driver["Conflicts"] == "nvidia-driver-550"
    newest = next(p for p in packages(repo) if p["Package"] == "cuda" and p["Version"] == "12.4.1-1")
    assert newest["Depends"] == "cuda-toolkit-12-4 (>= 12.4.1-1)"


def test_release_lists_the_index_hashes(repo):
    release = (repo / "dists/gpuconf-lab/Release").read_text()
    data = (repo / "dists/gpuconf-lab/main/binary-amd64/Packages.gz").read_bytes()
    assert f" {hashlib.sha256(data).hexdigest()} " in release and "Origin: gpuconf-lab" in release


@needs_sandbox
def test_driver_install_builds_dkms_and_purge_removes_it(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, """
apt-get install -y -q nvidia-driver-535=535.104.05-1 >/dev/null 2>&1; echo "install=$?"
echo "status=$(dkms status)"
ls /usr/src/nvidia-535.104.05/dkms.conf && echo has-conf
apt-get install -s -q nvidia-driver-550 2>&1 | grep -E '^(Inst|Remv) nvidia' | sort
apt-get purge -y -q nvidia-driver-535 nvidia-dkms-535 nvidia-utils-535 >/dev/null 2>&1; echo "purge=$?"
echo "after=$(dkms status)|"
ls /lib/modules/$(uname -r)/updates/dkms/ | wc -l
true
""")
    assert "install=0" in out and "status=nvidia/535.104.05, 6.1.0-18-amd64, x86_64: installed" in out
    assert "has-conf" in out
    assert "Remv nvidia-dkms-535 [535.104.05-1]" in out and "Inst nvidia-driver-550 (550.127.05" in out
    assert "purge=0" in out and "after=|\n0\n" in out


@needs_sandbox
def test_a_toolkit_pin_alone_does_not_block_cuda_but_the_documented_pin_does(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, f"""
apt-get install -y -q cuda-toolkit-12-2=12.2.2-1 >/dev/null 2>&1
apt-mark hold cuda-toolkit-12-2 >/dev/null
printf 'Package: cuda-toolkit-12-2\\nPin: version 12.2.2-1\\nPin-Priority: 1001\\n' > /etc/apt/preferences.d/cuda
echo "--- toolkit only"; apt-get install -s -q cuda 2>&1 | grep -E '^Inst'
cat > /etc/apt/preferences.d/cuda <<'PIN'
{CUDA_PIN_EXAMPLE}PIN
echo "--- documented"; apt-get install -s -q cuda 2>&1 | grep -E '^Inst|^E:'
echo "--- explicit 12.4"; apt-get install -s -q cuda=12.4.1-1 2>&1 | grep -E '^Inst|^E:'
apt-get install -y -q cuda >/dev/null 2>&1; echo "real=$?"
dpkg-query -W -f '${{Package}} ${{Version}}\\n' cuda cuda-toolkit-12-2 cuda-toolkit-12-4 2>&1
/usr/local/cuda/bin/nvcc --version | tail -2
true
""")
    toolkit_only, rest = out.split("--- toolkit only")[1].split("--- documented")
    documented, explicit = rest.split("--- explicit 12.4")
    assert "Inst cuda-toolkit-12-4" in toolkit_only                 # the trap: 12.4 gets pulled in
    assert "Inst cuda (12.2.2-1" in documented and "12-4" not in documented
    assert "Inst" not in explicit.split("real=")[0] and "E:" in explicit
    assert "real=0" in out and "cuda 12.2.2-1" in out and "cuda-toolkit-12-2 12.2.2-1" in out
    assert "no packages found matching cuda-toolkit-12-4" in out
    assert "Cuda compilation tools, release 12.2, V12.2.140" in out


@needs_sandbox
def test_pin_order_matters_glob_first_blocks_the_pinned_toolkit_too(repo, tmp_path):
    glob_first = CUDA_PIN_EXAMPLE.split("\n\n")[2] + "\n" + "\n\n".join(CUDA_PIN_EXAMPLE.split("\n\n")[:2])
    out = run_in_sandbox(tmp_path, repo, f"""
cat > /etc/apt/preferences.d/cuda <<'PIN'
{glob_first}
PIN
apt-cache policy cuda-toolkit-12-2 | grep Candidate
true
""")
    assert "Candidate: (none)" in out


@needs_sandbox
def test_hold_blocks_upgrade(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, """
apt-get install -y -q nvidia-driver-535=535.86.05-1 2>&1 | grep -m1 'but 535.104.05-1 is to be installed'
apt-get install -y -q cuda-toolkit-12-2=12.2.0-1 nvidia-driver-535=535.86.05-1 nvidia-dkms-535=535.86.05-1 \
    nvidia-utils-535=535.86.05-1 >/dev/null 2>&1
apt-mark hold cuda-toolkit-12-2 nvidia-driver-535 nvidia-dkms-535 nvidia-utils-535 >/dev/null
apt-get upgrade -y -q >/dev/null 2>&1
dpkg-query -W -f '${Package} ${Version}\\n' cuda-toolkit-12-2 nvidia-driver-535
apt-get install -y -q cuda-toolkit-12-2=12.2.2-1 2>&1 | grep -E '^E:'
true
""")
    # apt never picks a non-candidate version of a dependency: an older driver names all three
    assert "Depends: nvidia-dkms-535 (= 535.86.05-1) but 535.104.05-1 is to be installed" in out
    assert "cuda-toolkit-12-2 12.2.0-1" in out and "nvidia-driver-535 535.86.05-1" in out
    assert "E: Held packages were changed and -y was used without --allow-change-held-packages." in out


@needs_sandbox
def test_fabricmanager_refuses_a_version_mismatch_with_the_real_packages(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, """
apt-get install -y -q nvidia-driver-535=535.104.05-1 nvidia-fabricmanager-535=535.86.05-1 >/dev/null 2>&1
printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' > /etc/modprobe.d/blacklist-nouveau.conf
update-initramfs -u >/dev/null
/usr/lib/gpuconf-lab/sim/boot prepare; /usr/lib/gpuconf-lab/sim/boot start
systemctl start nvidia-fabricmanager; echo "start=$?"
journalctl -u nvidia-fabricmanager --no-pager -o cat | grep -m1 "don't match"
apt-get install -y -q nvidia-fabricmanager-535=535.104.05-1 >/dev/null 2>&1
systemctl restart nvidia-fabricmanager; echo "restart=$?"
systemctl is-active nvidia-fabricmanager
true
""")
    assert "start=1" in out
    assert ("fabric manager NVIDIA GPU driver interface version 535.86.05 don't match with driver version "
            "535.104.05. Please update with matching NVIDIA driver package.") in out
    assert "restart=0\nactive\n" in out


@needs_sandbox
def test_dpkg_lock_fault_blocks_real_apt(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, """
/usr/lib/gpuconf-lab/sim/fault dpkg-lock >/dev/null
apt-get install -y -q dkms 2>&1 | grep '^E:'
/usr/lib/gpuconf-lab/sim/fault clear dpkg-lock >/dev/null
apt-get install -y -q dkms >/dev/null 2>&1; echo "after=$?"
true
""")
    assert re.search(r"E: Could not get lock /var/lib/dpkg/lock-frontend\. It is held by process \d+ \(unattended-upgr\)", out)
    assert "after=0" in out


@needs_sandbox
def test_container_toolkit_merges_daemon_json_and_docker_reloads_it(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, """
mkdir -p /etc/docker; echo '{"data-root": "/srv/docker", "log-driver": "json-file"}' > /etc/docker/daemon.json
apt-get install -y -q docker.io nvidia-container-toolkit >/dev/null 2>&1
echo "enabled=$(systemctl is-enabled docker) active=$(systemctl is-active docker)"
nvidia-ctk runtime configure --runtime=docker --set-as-default >/dev/null
python3 -c 'import json; d = json.load(open("/etc/docker/daemon.json")); print("keys", sorted(d))'
echo "before=$(docker info --format '{{.DefaultRuntime}}')"
systemctl restart docker
echo "after=$(docker info --format '{{.DefaultRuntime}}')"
true
""")
    assert "enabled=enabled active=active" in out
    assert "keys ['data-root', 'default-runtime', 'log-driver', 'runtimes']" in out
    assert "before=runc" in out and "after=nvidia" in out
