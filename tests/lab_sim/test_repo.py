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


def driver_set(branch: str, version: str, open_modules: bool = False) -> str:
    """Every package of one driver version, each named at that version (``apt-get install`` args):
    apt takes a dependency at its candidate version only, so the meta alone cannot pull an older one."""
    flavour = "-open" if open_modules else ""
    names = (f"nvidia-driver-{branch}{flavour}", f"nvidia-dkms-{branch}{flavour}", f"nvidia-utils-{branch}",
             f"libnvidia-compute-{branch}", f"nvidia-kernel-common-{branch}")
    return " ".join(f"{name}={version}-1" for name in names)


def test_the_repository_holds_the_versions_gpuconf_needs(repo):
    assert versions(repo, "nvidia-driver-535") == ["535.104.05-1", "535.247.01-1", "580.95.05-0ubuntu1"]
    assert versions(repo, "nvidia-driver-580-open") == ["580.105.08-1", "580.178.04-1", "580.95.05-1"]
    assert versions(repo, "nvidia-driver-570") == ["570.195.03-1"]
    assert versions(repo, "nvidia-open") == ["595.71.05-1", "595.91.07-1", "620.70.10-1"]
    assert versions(repo, "nvidia-driver") == ["595.71.05-1", "595.91.07-1"]           # 620: open modules only
    assert "620.70.10-1" in versions(repo, "nvidia-dkms-open") and "620.70.10-1" not in versions(repo, "nvidia-dkms")
    assert not versions(repo, "linux-modules-nvidia-620-6.1.0-21-amd64")
    assert versions(repo, "nvidia-fabricmanager-535") == ["535.104.05-1", "535.247.01-1"]
    assert versions(repo, "nvidia-persistenced") == ["535.104.05-1", "535.247.01-1", "570.195.03-1",
                                                     "580.105.08-1", "580.178.04-1", "580.95.05-1", "595.71.05-1",
                                                     "595.91.07-1", "620.70.10-1"]
    assert versions(repo, "nvidia-driver-pinning-595") == ["595-1"] and versions(repo, "nvidia-driver-pinning-620") == ["620-1"]
    assert versions(repo, "linux-modules-nvidia-620-open-6.1.0-21-amd64") == ["620.70.10-1"]
    assert versions(repo, "nvidia-fabricmanager") == versions(repo, "libnvidia-nscq") == versions(repo, "nvidia-open")
    assert versions(repo, "linux-modules-nvidia-595-open-6.1.0-21-amd64") == ["595.71.05-1", "595.91.07-1"]
    assert not versions(repo, "nvidia-driver-550") and "535.86.05-1" not in versions(repo, "nvidia-dkms-535")
    assert versions(repo, "cuda-toolkit-13-0") == ["13.0.2-1"] and versions(repo, "cuda-toolkit-12-8") == ["12.8.1-1"]
    assert versions(repo, "cuda") == ["11.7.1-1", "12.2.0-1", "12.2.2-1", "12.4.1-1", "12.8.1-1", "13.0.2-1", "13.1.0-1"]
    assert versions(repo, "nvidia-container-toolkit") == ["1.16.2-1", "1.17.8-1", "1.18.2-1", "1.20.0-1"]
    for name in ("dkms", "opensm", "infiniband-diags", "ibverbs-utils", "rdma-core", "docker.io",
                 "cuda-toolkit-11-7", "cuda-toolkit-12-4", "libnvidia-nscq-580", "libnvidia-nscq",
                 "nvidia-kernel-common", "nvidia-dkms-open", "nvidia-utils", "libnvidia-compute", "nvidia-fabricmanager"):
        assert versions(repo, name), name
    driver = next(p for p in packages(repo) if p["Package"] == "nvidia-driver-535" and p["Version"] == "535.104.05-1")
    assert driver["Depends"] == ("nvidia-utils-535 (= 535.104.05-1), libnvidia-compute-535 (= 535.104.05-1), "
                                 "nvidia-kernel-common-535 (= 535.104.05-1), nvidia-dkms-535 (= 535.104.05-1)")
    trap = next(p for p in packages(repo) if p["Package"] == "nvidia-driver-535" and p["Version"].startswith("580"))
    assert trap["Depends"] == "nvidia-driver-580 (>= 580.95.05-1)"
    newest = next(p for p in packages(repo) if p["Package"] == "cuda" and p["Version"] == "13.0.2-1")
    assert newest["Depends"] == "cuda-toolkit-13-0 (>= 13.0.2-1)"


def test_release_lists_the_index_hashes(repo):
    release = (repo / "dists/gpuconf-lab/Release").read_text()
    data = (repo / "dists/gpuconf-lab/main/binary-amd64/Packages.gz").read_bytes()
    assert f" {hashlib.sha256(data).hexdigest()} " in release and "Origin: gpuconf-lab" in release


@needs_sandbox
def test_driver_install_builds_dkms_and_purge_removes_it(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, f"""
apt-get install -y -q {driver_set("535", "535.104.05")} >/dev/null 2>&1; echo "install=$?"
echo "status=$(dkms status)"
ls /usr/src/nvidia-535.104.05/dkms.conf && echo has-conf
apt-get install -s -q nvidia-driver-580 2>&1 | grep -E '^(Inst|Remv) nvidia' | sort
apt-get purge -y -q nvidia-driver-535 nvidia-dkms-535 nvidia-utils-535 >/dev/null 2>&1; echo "purge=$?"
echo "after=$(dkms status)|"
ls /lib/modules/$(uname -r)/updates/dkms/ | wc -l
true
""")
    assert "install=0" in out and "status=nvidia/535.104.05, 6.1.0-18-amd64, x86_64: installed" in out
    assert "has-conf" in out
    assert "Remv nvidia-dkms-535 [535.104.05-1]" in out and "Inst nvidia-driver-580 (580.178.04-1" in out
    assert "Remv nvidia-kernel-common-535 [535.104.05-1]" in out     # branches conflict through it
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
    assert "Inst cuda-toolkit-13-1" in toolkit_only                 # the trap: the newest toolkit gets pulled in
    assert "Inst cuda (12.2.2-1" in documented and "12-4" not in documented and "13-" not in documented
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
    out = run_in_sandbox(tmp_path, repo, f"""
apt-get install -y -q nvidia-driver-535=535.104.05-1 2>&1 | grep -m1 'but 535.247.01-1 is to be installed'
apt-get install -y -q cuda-toolkit-12-2=12.2.0-1 {driver_set("535", "535.104.05")} >/dev/null 2>&1
apt-mark hold cuda-toolkit-12-2 nvidia-driver-535 nvidia-dkms-535 nvidia-utils-535 libnvidia-compute-535 \
    nvidia-kernel-common-535 >/dev/null
apt-get upgrade -y -q >/dev/null 2>&1
dpkg-query -W -f '${{Package}} ${{Version}}\\n' cuda-toolkit-12-2 nvidia-driver-535
apt-get install -y -q cuda-toolkit-12-2=12.2.2-1 2>&1 | grep -E '^E:'
true
""")
    # apt never picks a non-candidate version of a dependency: an older driver names the whole set
    assert "Depends: nvidia-utils-535 (= 535.104.05-1) but 535.247.01-1 is to be installed" in out
    assert "cuda-toolkit-12-2 12.2.0-1" in out and "nvidia-driver-535 535.104.05-1" in out
    assert "E: Held packages were changed and -y was used without --allow-change-held-packages." in out


@needs_sandbox
def test_fabricmanager_refuses_a_version_mismatch_with_the_real_packages(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, f"""
apt-get install -y -q {driver_set("535", "535.104.05")} nvidia-fabricmanager-535=535.247.01-1 >/dev/null 2>&1
printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' > /etc/modprobe.d/blacklist-nouveau.conf
update-initramfs -u >/dev/null
/usr/lib/gpuconf-lab/sim/boot prepare; /usr/lib/gpuconf-lab/sim/boot start
systemctl start nvidia-fabricmanager; echo "start=$?"
journalctl -u nvidia-fabricmanager --no-pager -o cat | grep -m1 "don't match"
apt-get install -y -q --allow-downgrades nvidia-fabricmanager-535=535.104.05-1 >/dev/null 2>&1
systemctl restart nvidia-fabricmanager; echo "restart=$?"
systemctl is-active nvidia-fabricmanager
true
""")
    assert "start=1" in out
    assert ("fabric manager NVIDIA GPU driver interface version 535.247.01 don't match with driver version "
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


@needs_sandbox
def test_the_transitional_package_turns_an_unpinned_535_install_into_580(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, """
apt-cache madison nvidia-driver-535 | head -1
echo "--- unpinned"; apt-get install -s -q nvidia-driver-535 2>&1 | grep -E '^Inst nvidia-(driver|dkms)'
cat > /etc/apt/preferences.d/nvidia <<'PIN'
Package: nvidia-driver-535 nvidia-dkms-535 nvidia-utils-535 libnvidia-compute-535 nvidia-kernel-common-535
Pin: version 535.104.05-1
Pin-Priority: 1001
PIN
echo "--- pinned"; apt-get install -y -q nvidia-driver-535 >/dev/null 2>&1; echo "install=$?"
dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\\n' nvidia-driver-535 nvidia-driver-580 2>&1
dkms status
true
""")
    unpinned, pinned = out.split("--- unpinned")[1].split("--- pinned")
    assert out.startswith("nvidia-driver-535 | 580.95.05-0ubuntu1 |")
    assert "Inst nvidia-driver-535 (580.95.05-0ubuntu1" in unpinned and "Inst nvidia-driver-580 (580.178.04-1" in unpinned
    assert "Inst nvidia-dkms-580 (580.178.04-1" in unpinned and "535.104.05" not in unpinned
    assert "install=0" in pinned and "nvidia-driver-535 535.104.05-1 ii " in pinned
    assert "nvidia-driver-580 580" not in pinned
    assert "nvidia/535.104.05, 6.1.0-18-amd64, x86_64: installed" in pinned


@needs_sandbox
def test_the_pinning_package_holds_the_unversioned_names_on_595(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, """
echo "--- before"; apt-cache policy nvidia-persistenced | grep -E '^ +(\\*\\*\\* )?(595|580.105)'
apt-get install -y -q nvidia-driver-pinning-595 >/dev/null 2>&1; echo "pin=$?"
cat /etc/apt/preferences.d/nvidia-driver-pinning-595
echo "--- after"; apt-cache policy nvidia-persistenced nvidia-open | grep -E '^ +(\\*\\*\\* )?(595|580.105)'
apt-get install -y -q nvidia-persistenced=580.105.08-1 >/dev/null 2>&1
echo "--- upgrade"; apt-get upgrade -s -q 2>&1 | grep -E '^Inst'
apt-get install -y -q nvidia-open >/dev/null 2>&1; echo "open=$?"
dpkg-query -W -f '${Package} ${Version}\\n' nvidia-open nvidia-dkms-open nvidia-kernel-common nvidia-utils
modinfo -F license nvidia
true
""")
    before, rest = out.split("--- before")[1].split("pin=")
    after, upgrade = rest.split("--- after")[1].split("--- upgrade")
    assert "595.71.05-1 500" in before and rest.startswith("0\n")
    assert "Package: libnvidia-compute libnvidia-nscq nvidia-dkms nvidia-dkms-open nvidia-driver " in rest
    assert "\nPin: version 595.*\nPin-Priority: 1000\n" in rest
    assert after.count("595.91.07-1 1000") == 2 and "580.105.08-1 500" in after
    assert "Inst nvidia-persistenced [580.105.08-1] (595.91.07-1" in upgrade     # the branch's newest, not 620's
    assert "open=0" in upgrade and "nvidia-open 595.91.07-1" in upgrade and "nvidia-dkms-open 595.91.07-1" in upgrade
    assert "Dual MIT/GPL" in upgrade


@needs_sandbox
def test_precompiled_modules_and_dkms_exclude_each_other(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, f"""
apt-get install -y -q {driver_set("580", "580.95.05")} >/dev/null 2>&1; echo "dkms=$?"
echo "--- precompiled"
apt-get install -s -q linux-modules-nvidia-580-6.1.0-18-amd64=580.95.05-1 2>&1 | grep -E '^(Inst|Remv)'
apt-get install -y -q linux-modules-nvidia-580-6.1.0-18-amd64=580.95.05-1 nvidia-dkms-580- >/dev/null 2>&1
echo "precompiled=$? dkms=[$(dkms status)]"
modinfo nvidia | grep -E '^(filename|signer)'
echo "--- both flavours"
apt-get install -s -q linux-modules-nvidia-580-open-6.1.0-18-amd64=580.95.05-1 2>&1 | grep -E '^(Inst|Remv)'
true
""")
    before, rest = out.split("--- precompiled")
    precompiled, flavours = rest.split("--- both flavours")
    assert "dkms=0" in before
    assert "Remv nvidia-dkms-580 [580.95.05-1]" in precompiled
    assert "Inst linux-modules-nvidia-580-6.1.0-18-amd64 (580.95.05-1" in precompiled
    assert "precompiled=0 dkms=[]" in precompiled
    assert "filename:       /lib/modules/6.1.0-18-amd64/kernel/nvidia-580/nvidia.ko" in precompiled
    assert "signer:         Canonical Ltd. Kernel Module Signing" in precompiled
    assert "Remv linux-modules-nvidia-580-6.1.0-18-amd64 [580.95.05-1]" in flavours


@needs_sandbox
def test_a_dkms_flavour_switch_in_one_transaction_removes_the_old_flavour(repo, tmp_path):
    out = run_in_sandbox(tmp_path, repo, f"""
apt-get install -y -q {driver_set("580", "580.95.05")} >/dev/null 2>&1; echo "install=$?"
modinfo -F license nvidia
apt-get install -y -q {driver_set("580", "580.95.05", open_modules=True)} >/dev/null 2>&1
echo "switch=$?"
dpkg-query -W -f '${{Package}} ${{db:Status-Abbrev}}\\n' nvidia-dkms-580 nvidia-dkms-580-open nvidia-driver-580-open
dkms status; modinfo -F license nvidia; ls /usr/src/nvidia-580.95.05
true
""")
    before, after = out.split("switch=")
    assert "install=0\nNVIDIA\n" in before
    assert after.startswith("0\n")
    assert "nvidia-dkms-580 un " in after and "nvidia-dkms-580-open ii " in after
    assert "nvidia-driver-580-open ii " in after
    assert "nvidia/580.95.05, 6.1.0-18-amd64, x86_64: installed\nDual MIT/GPL\n" in after
    assert "kernel-open" in after
