"""One inventory, two OS families (issue 13's acceptance, the RHEL half; issue 30's EL 10 node).

A lab of four fresh nodes: a T4 on Debian, a T4 on Rocky Linux 9 and a T4 on Rocky Linux 10 (the
same `t4` group, the same playbook), and an A100 on Rocky Linux 9 (fabric manager, NSCQ, opensm:
the RHEL names). On the EL nodes the package manager is the real rpm and dnf, with NVIDIA's module
streams in a local repository on EL 9 and plain versionlocked packages on EL 10 (a repository with
no module metadata); only the kernel, systemd and the GPU are simulated. Each playbook must check as drift,
leave the nodes byte for byte unchanged while checking, converge, and check clean.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpuconf_lab.fleet import Lab
from tests.lab_fixtures import LAB_NAME, el9_unavailable, start_lab, wait_until
from tests.report_runs import Run, run_gpuconf

NAME = f"{LAB_NAME}-mixed"[:31]
PLAYBOOKS = {"t4": "playbooks/t4-inference.yml", "a100": "playbooks/a100-node.yml"}
EL9 = "3:580.178.04-1.el9"
EL10 = "3:580.178.04-1.el10"


@dataclass
class Mixed:
    lab: Lab
    tmp: Path
    runs: dict[str, dict[str, Run]] = field(default_factory=dict)
    unchanged: dict[str, bool] = field(default_factory=dict)   # node -> the first check left it as it was

    def run(self, verb: str, group: str, *args: str) -> Run:
        report = self.tmp / f"{verb}-{group}-{len(list(self.tmp.iterdir()))}.json"
        return run_gpuconf(NAME, verb, PLAYBOOKS[group], "--no-retry-file", *args, report=report, timeout=900)

    def sh(self, host: str, command: str) -> str:
        rc, out, err = self.lab.exec(host, command, timeout=300)
        assert rc == 0, f"{command}: {out}{err}"
        return out

    def converge(self, group: str) -> dict[str, Run]:
        hosts = [n.name for n in self.lab.nodes if n.profile == group]
        before = {h: self.lab.digest(h) for h in hosts}
        check = self.run("check", group)
        self.unchanged.update({h: self.lab.digest(h) == before[h] for h in hosts})
        return {"check": check, "apply": self.run("apply", group), "check2": self.run("check", group)}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    lab = start_lab(NAME, {"t4": 1, "t4@el9": 1, "a100@el9": 1, "t4@el10": 1}, unavailable=el9_unavailable)
    state = Mixed(lab, tmp_path_factory.mktemp("mixed"))
    try:
        with ThreadPoolExecutor(2) as pool:
            a100 = pool.submit(state.converge, "a100")
            state.runs["t4"] = state.converge("t4")
            state.runs["a100"] = a100.result()
        yield state
    finally:
        lab.down()


def statuses(run: Run, host: str) -> set[str]:
    return {t["status"] for t in run.report["hosts"][host]["tasks"]}


@pytest.mark.parametrize("group, hosts", [("t4", ["t4-01", "t4-el9-01", "t4-el10-01"]), ("a100", ["a100-el9-01"])])
def test_each_playbook_checks_converges_and_checks_clean_on_both_families(mixed, group, hosts):
    runs = mixed.runs[group]
    assert runs["check"].rc == 2, runs["check"].stdout[-3000:] + runs["check"].stderr
    for host in hosts:
        assert "would_change" in statuses(runs["check"], host)
        assert not statuses(runs["check"], host) & {"failed", "unknown"}, runs["check"].stdout[-3000:]
        assert mixed.unchanged[host], f"the check changed {host}"
    assert runs["apply"].rc == 0, runs["apply"].stdout[-4000:] + runs["apply"].stderr
    assert runs["check2"].rc == 0, runs["check2"].stdout[-4000:]
    assert set(runs["check2"].report["hosts"]) == set(hosts)


def test_the_el9_stack_comes_from_the_module_stream_at_one_version_locked(mixed):
    host = "a100-el9-01"
    rpms = mixed.sh(host, "rpm -q --qf '%{NAME} %{EPOCH}:%{VERSION}-%{RELEASE}\\n' nvidia-kmod-common "
                          "kmod-nvidia-open-dkms nvidia-driver nvidia-driver-cuda nvidia-driver-cuda-libs "
                          "nvidia-persistenced nvidia-fabric-manager libnvidia-nscq")
    assert {line.split()[1] for line in rpms.splitlines()} == {EL9}, rpms
    assert "stream=580-open" in mixed.sh(host, "cat /etc/dnf/modules.d/nvidia-driver.module")
    locks = mixed.sh(host, "cat /etc/dnf/plugins/versionlock.list")
    for name in ("nvidia-driver", "kmod-nvidia-open-dkms", "nvidia-fabric-manager", "cuda-toolkit-13-0"):
        assert f"\n{name}-" in locks, (name, locks)
    assert "rd.driver.blacklist=nouveau" in mixed.sh(host, "cat /proc/cmdline")
    assert mixed.sh(host, "modinfo -F license nvidia").strip() == "Dual MIT/GPL"
    assert "Open Kernel Module for x86_64  580.178.04" in mixed.sh(host, "cat /proc/driver/nvidia/version")


def test_the_el10_stack_is_plain_packages_at_one_version_locked_with_no_stream(mixed):
    host = "t4-el10-01"
    assert 'VERSION_ID="10.0"' in mixed.sh(host, "cat /etc/os-release")
    rpms = mixed.sh(host, "rpm -q --qf '%{NAME} %{EPOCH}:%{VERSION}-%{RELEASE}\\n' nvidia-open nvidia-kmod-common "
                          "kmod-nvidia-open-dkms nvidia-driver nvidia-driver-cuda nvidia-driver-cuda-libs "
                          "nvidia-persistenced")
    assert {line.split()[1] for line in rpms.splitlines()} == {EL10}, rpms
    assert mixed.sh(host, "ls /etc/dnf/modules.d 2>/dev/null; true").strip() == ""     # no stream was enabled
    locks = mixed.sh(host, "cat /etc/dnf/plugins/versionlock.list")
    for name in ("nvidia-open", "nvidia-driver", "kmod-nvidia-open-dkms", "cuda-toolkit-13-0"):
        assert f"\n{name}-" in locks, (name, locks)
    assert "Open Kernel Module for x86_64  580.178.04" in mixed.sh(host, "cat /proc/driver/nvidia/version")


def test_dnf_upgrade_on_el10_moves_nothing_the_versionlock_holds(mixed):
    host = "t4-el10-01"
    offered = mixed.sh(host, "dnf -q repoquery --disableexcludes=all --qf '%{version}' nvidia-open")
    assert {"595.91.07", "620.70.10"} <= set(offered.split()), offered     # newer drivers are there to take
    query = "rpm -qa --qf '%{NAME} %{EPOCH}:%{VERSION}-%{RELEASE}\\n' | sort"
    before = mixed.sh(host, query)
    upgrade = mixed.sh(host, "dnf -y upgrade")
    after = mixed.sh(host, query)
    locked = [line for line in before.splitlines() if line.startswith(("nvidia-", "kmod-nvidia", "cuda-toolkit"))]
    assert locked and all(line in after.splitlines() for line in locked), upgrade + after
    assert "620.70.10" not in after and "595.91.07" not in after, after
    assert "Open Kernel Module for x86_64  580.178.04" in mixed.sh(host, "cat /proc/driver/nvidia/version")
    assert mixed.run("check", "t4", "--limit", host).rc == 0


def test_dnf_install_cuda_cannot_move_the_locked_toolkit(mixed):
    host = "t4-el9-01"
    offered = mixed.sh(host, "dnf -q repoquery --disablerepo='*' --enablerepo=gpuconf-lab --disableexcludes=all "
                             "--qf '%{version}' cuda")
    assert "13.1.0" in offered.split()          # an unlocked `dnf install cuda` would take CUDA 13.1
    mixed.lab.exec(host, "dnf -y -q install cuda", timeout=300)
    toolkits = mixed.sh(host, "rpm -qa --qf '%{NAME} %{VERSION}\\n' 'cuda-toolkit-*'")
    assert toolkits.split("\n")[0] == "cuda-toolkit-13-0 13.0.2" and "13-1" not in toolkits, toolkits
    assert mixed.run("check", "t4", "--limit", host).rc == 0


def test_a_kernel_upgrade_on_el9_is_caught_before_the_reboot_and_repaired(mixed):
    host, newer = "t4-el9-01", "5.14.0-427.16.1.el9_4.x86_64"
    rc, out, err = mixed.lab.fault(host, "kernel-upgrade")
    assert rc == 0 and newer in out, out + err
    check = mixed.run("check", "t4", "--limit", host)
    assert check.rc == 2, check.stdout[-3000:]
    dkms = next(t for t in check.report["hosts"][host]["tasks"]
                if t["task"] == "DKMS module built for every installed kernel")
    assert dkms["status"] == "would_change" and newer in dkms["message"]
    assert mixed.run("apply", "t4", "--limit", host).rc == 0
    assert f"nvidia/580.178.04, {newer}, x86_64: installed" in mixed.sh(host, "dkms status")
    boots = mixed.lab.node_state(host)["boots"]
    mixed.lab.reboot(host)
    assert wait_until(lambda: mixed.lab.node_state(host).get("boots") == boots + 1
                      and mixed.lab.node_state(host).get("state") == "up", timeout=60)
    mixed.lab.wait_ssh(host, 60)
    assert mixed.sh(host, "uname -r").strip() == newer
    assert mixed.sh(host, "cat /sys/module/nvidia/version").strip() == "580.178.04"
    assert mixed.run("check", "t4", "--limit", host).rc == 0


PLATFORM_PLAY = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: a package the nodes lack
      package: {name: gpuconf-no-such-package}
"""


def platform_check(mixed: Mixed, playbook: Path, *args: str) -> Run:
    report = mixed.tmp / f"platform-{len(list(mixed.tmp.iterdir()))}.json"
    return run_gpuconf(NAME, "check", str(playbook), "--no-retry-file", *args, report=report, timeout=300)


def test_with_fact_gathering_off_each_host_still_plans_its_own_package_manager(mixed):
    """The platform is read in every host's first round trip, whatever the play gathers: an EL
    node is never planned apt-get because its facts were not gathered."""
    playbook = mixed.tmp / "platform.yml"
    playbook.write_text(PLATFORM_PLAY)
    check = platform_check(mixed, playbook)
    assert check.rc == 2, check.stdout[-3000:] + check.stderr
    ops = {host: [op for t in data["tasks"] for change in t["changes"] for op in change["ops"]]
           for host, data in check.report["hosts"].items()}
    assert any("apt-get install" in op for op in ops["t4-01"]), ops
    for host in ("t4-el9-01", "a100-el9-01"):
        assert any("dnf" in op for op in ops[host]) and not any("apt-get" in op for op in ops[host]), ops


def test_a_host_whose_platform_cannot_be_known_fails_alone_with_the_reason(mixed):
    host = "t4-el9-01"
    saved = mixed.sh(host, "cat /etc/os-release")
    mixed.sh(host, "printf 'NAME=\"Alpine Linux\"\\nID=alpine\\nVERSION_ID=3.20.3\\n' > /etc/os-release")
    try:
        playbook = mixed.tmp / "platform.yml"
        playbook.write_text(PLATFORM_PLAY)
        check = platform_check(mixed, playbook)
        assert check.rc == 6, check.stdout[-3000:] + check.stderr   # drift elsewhere, this host failed
        (task,) = check.report["hosts"][host]["tasks"]
        assert task["status"] == "failed", task
        assert "os-release ID 'alpine' is not a platform gpuconf knows" in task["error"], task
        assert "Traceback" not in check.stdout + check.stderr
        for other in ("t4-01", "a100-el9-01"):
            assert {t["status"] for t in check.report["hosts"][other]["tasks"]} == {"would_change"}
    finally:
        mixed.lab.exec(host, ["sh", "-c", "cat > /etc/os-release"], input=saved)
    assert "rocky" in mixed.sh(host, "cat /etc/os-release")
