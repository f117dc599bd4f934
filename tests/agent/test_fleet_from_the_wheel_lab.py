"""Acceptance (issue 39): from `pip install gpuconf` to a whole fleet, on the lab's real Slurm.

gpuconf is this checkout's wheel installed into a fresh virtual environment outside the repository
(tests/package_fixtures.py). From a directory outside the repository, `gpuconf init` writes a site;
its inventory gets the lab's two fresh nodes (Debian 12 with apt, Rocky Linux 9 with dnf) in its t4
group, with a driver pin of its own, and the Slurm controller (the lab's slurmctld, on this machine:
its files are reached with `connection: local`, its `scontrol reconfigure` through the lab's own
client, as the lab's munge socket is in the controller's namespace). Check and apply of the site's
playbook converge the nodes with the shipped playbooks; one apply of the shipped gpuconf-agent.yml
installs the controller's gpuconf on each node, which then is the only gpuconf a node can run: the
lab lends no node this machine's checkout or environments (`lab up --no-controller-copy`).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

import gpuconf
from gpuconf.scheduler.slurm import parse_show_node
from tests.lab_fixtures import LAB_NAME, start_lab, unavailable_with, wait_until
from tests.package_fixtures import ROOT, build_wheel

LAB = f"{LAB_NAME}-agent"[:31]
DEBIAN, EL9 = "t4-01", "t4-el9-01"
PIN = "580.95.05"         # the site's own pin (group_vars/t4.yml), not the roles' default
REASON = "agent test: keep the first run on the faulty node"


def unavailable() -> str | None:
    from gpuconf_lab.runtime import require_el9_tools
    from gpuconf_lab.slurm_cluster import require_slurm_tools

    return unavailable_with(lambda: (require_el9_tools(), require_slurm_tools()))


@pytest.fixture(scope="module")
def fleet():
    lab = start_lab(LAB, {"t4": 1, "t4@el9": 1}, unavailable=unavailable, slurm=True, controller_copy=False,
                    # a failed prolog requeues the job without holding it; a requeued job waits the
                    # credential's lifetime before it starts again (120 s by default)
                    slurm_settings={"SchedulerParameters": "nohold_on_prolog_fail", "AuthInfo": "cred_expire=10"})
    yield lab
    lab.down()


class Site:
    """The site `gpuconf init` wrote, and the controller's gpuconf (the installed wheel)."""

    def __init__(self, path: Path, bin_dir: Path, cache: Path):
        self.path, self.bin, self.cache = path, bin_dir, cache

    def gpuconf(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCONF_") and k != "PYTHONPATH"}
        env["GPUCONF_AGENT_CACHE"] = str(self.cache)
        return subprocess.run([str(self.bin / "gpuconf"), *args], cwd=self.path, capture_output=True, text=True,
                              timeout=timeout, env=env)


@pytest.fixture(scope="module")
def site(fleet, installed_gpuconf, tmp_path_factory) -> Site:
    where = tmp_path_factory.mktemp("site-home")
    made = subprocess.run([str(installed_gpuconf / "gpuconf"), "init", "site"], cwd=where, capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    path = where / "site"
    inventory = path / "inventories" / "prod"
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    groups = hosts["all"]["children"]
    groups["t4"]["hosts"] = {info.name: {"address": info.address} for info in fleet.nodes}
    groups["slurm_controller"]["hosts"] = {"slurmctl": {
        "connection": "local", "become": False, "slurm_conf_dir": str(fleet.slurm_paths.conf.parent),
        # a command's line is split as Ansible's command module splits it: the path quoted (a clone at a path with a space)
        "slurm_reconfigure_command": f"{shlex.quote(str(Path(sys.executable).with_name('gpuconf-lab')))} "
                                     f"slurm --name {LAB} -- scontrol reconfigure"}}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    (inventory / "group_vars" / "all.yml").write_text(yaml.safe_dump({
        "port": fleet.port, "user": "gpuadmin", "become": True, "ssh_key": str(fleet.client_key),
        "known_hosts_file": str(fleet.known_hosts)}))
    pins = inventory / "group_vars" / "t4.yml"
    pins.write_text(re.sub(r"(?m)^nvidia_driver_version: .*$", f'nvidia_driver_version: "{PIN}"', pins.read_text()))
    return Site(path, installed_gpuconf, tmp_path_factory.mktemp("agent-cache"))


def node_json(lab, node: str, path: str) -> dict:
    rc, out, _ = lab.exec(node, ["cat", path])
    return json.loads(out) if rc == 0 and out.strip() else {}


def show(lab, node: str):
    done = lab.slurm(["scontrol", "show", "node", node])
    assert done.returncode == 0, done.stderr
    return parse_show_node(done.stdout)


def job(lab, job_id: str) -> dict[str, str]:
    done = lab.slurm(["scontrol", "show", "job", "-o", job_id])
    return dict(re.findall(r"(\w+)=(\S*)", done.stdout)) if done.returncode == 0 else {}


@pytest.fixture(scope="module")
def converged(fleet, site) -> dict[str, subprocess.CompletedProcess]:
    runs = {"check": site.gpuconf("check", "playbooks/t4.yml", "-v")}
    runs["apply"] = site.gpuconf("apply", "playbooks/t4.yml")
    runs["again"] = site.gpuconf("check", "playbooks/t4.yml")
    return runs


@pytest.fixture(scope="module")
def agents(fleet, site, converged, tmp_path_factory) -> subprocess.CompletedProcess:
    assert converged["again"].returncode == 0, converged["again"].stdout[-3000:]
    before = tmp_path_factory.mktemp("agent-check") / "check.json"
    checked = site.gpuconf("check", "gpuconf-agent.yml", "--report", str(before))
    applied = site.gpuconf("apply", "gpuconf-agent.yml")
    applied.checked = (checked, before)   # type: ignore[attr-defined]
    return applied


def test_a_site_written_by_init_from_the_wheel_converges_both_families_with_the_shipped_playbook(fleet, site,
                                                                                              converged):
    assert not str(site.path).startswith(str(ROOT)) and not str(site.bin).startswith(str(ROOT))
    check, apply, again = converged["check"], converged["apply"], converged["again"]
    assert check.returncode == 2, check.stdout[-3000:] + check.stderr[-2000:]   # fresh nodes have drifted
    assert "playbook: playbooks/t4.yml (a local file)" in check.stderr, check.stderr[-2000:]
    assert "T4 inference node" in check.stdout   # the play of the shipped t4-inference.yml it imports
    assert apply.returncode == 0, apply.stdout[-4000:] + apply.stderr[-2000:]
    assert again.returncode == 0 and "2/2 in sync" in again.stdout, again.stdout[-3000:]
    for node in (DEBIAN, EL9):   # the site's group_vars pinned the driver, not the shipped roles' default
        assert PIN in fleet.exec(node, ["cat", "/proc/driver/nvidia/version"])[1]


def test_one_apply_of_gpuconf_agent_installs_the_controllers_gpuconf_the_only_one_a_node_can_run(fleet, site,
                                                                                                 agents):
    checked, report = agents.checked
    assert checked.returncode == 2, checked.stdout[-3000:]   # before: no agent, and Slurm names no gpuconf
    hosts = json.loads(report.read_text())["hosts"]
    for node in (DEBIAN, EL9):
        drifted = {t["type"] for t in hosts[node]["tasks"] if t["status"] == "would_change"}
        assert {"gpuconf_agent", "slurm_settings"} <= drifted, (node, drifted)
    assert agents.returncode == 0, agents.stdout[-5000:] + agents.stderr[-2000:]
    for node in (DEBIAN, EL9):
        installed = node_json(fleet, node, "/opt/gpuconf/agent.json")
        assert installed["version"] == gpuconf.__version__ and installed["python"] == "/usr/bin/python3.11", installed
        rc, out, err = fleet.exec(node, "command -v gpuconf && gpuconf --version")
        assert (rc, out.split()) == (0, ["/usr/local/bin/gpuconf", "gpuconf", gpuconf.__version__]), err
        # nothing of this machine's gpuconf is there: the checkout, its venv and the controller's venv
        for path in (ROOT / "gpuconf", Path(sys.prefix) / "bin", site.bin):
            assert fleet.exec(node, ["test", "-e", str(path)])[0] == 1, (node, path)
        rc, _, err = fleet.exec(node, ["/usr/bin/python3", "-c", "import gpuconf"])
        assert rc == 1 and "No module named 'gpuconf'" in err
        rc, out, _ = fleet.exec(node, ["grep", "-h", "^Prolog=\\|^Epilog=\\|^HealthCheckProgram=",
                                       "/run/slurm/conf/gpuconf.conf"])
        assert out.split() == ["Prolog=/usr/local/sbin/gpuconf-gate", "Epilog=/usr/local/sbin/gpuconf-gate",
                               "HealthCheckProgram=/usr/local/sbin/gpuconf-healthcheck"], (node, out)
    conf = fleet.slurm_paths.conf.read_text()
    assert conf.rstrip().endswith("Include gpuconf.conf") and conf.count("Include gpuconf.conf") == 1
    again = site.gpuconf("check", "gpuconf-agent.yml")
    assert again.returncode == 0, again.stdout[-3000:]


def test_the_health_check_and_the_drift_timer_run_the_nodes_own_gpuconf(fleet, site, agents):
    assert agents.returncode == 0
    # slurmd runs the HealthCheckProgram when it starts, then every HealthCheckInterval (300 s: the
    # role's default, so that the next test's Xid is the prolog's to find, not the health check's)
    started = time.time()
    for node in (DEBIAN, EL9):
        rc, out, err = fleet.exec(node, "systemctl restart slurmd")
        assert rc == 0, out + err
    for node in (DEBIAN, EL9):
        fresh = lambda n=node: node_json(fleet, n, "/var/lib/gpuconf/healthcheck-report.json").get(
            "gpuconf_version") == gpuconf.__version__ and int(fleet.exec(
                n, ["stat", "-c", "%Y", "/var/lib/gpuconf/healthcheck-report.json"])[1] or 0) >= int(started)
        assert wait_until(fresh, 120, 2), (node, fleet.exec(node, ["ls", "-l", "/var/lib/gpuconf"]))
        report = node_json(fleet, node, "/var/lib/gpuconf/healthcheck-report.json")
        assert report["verb"] == "check" and list(report["hosts"]) == [node]
        assert not show(fleet, node).drained, show(fleet, node)
    with ThreadPoolExecutor(2) as pool:   # the drift timer's service, on both nodes at once
        list(pool.map(lambda n: fleet.exec(n, "systemctl start gpuconf-drift.service", timeout=300), (DEBIAN, EL9)))
    for node in (DEBIAN, EL9):
        assert fleet.exec(node, "systemctl is-enabled gpuconf-drift.timer")[1].strip() == "enabled"
        status = fleet.exec(node, "systemctl show gpuconf-drift.service --property=ExecMainStatus")[1]
        # t4-inference.yml (the site's group_vars: drift_timer_playbook) with the site's pin: in sync
        assert status.strip() == "ExecMainStatus=0", (node, fleet.exec(node, "journalctl -u gpuconf-drift -n 30"))
        report = node_json(fleet, node, "/var/lib/gpuconf/last-check.json")
        assert report["gpuconf_version"] == gpuconf.__version__ and list(report["hosts"]) == [node]
        assert report["playbook"].endswith("/gpuconf/library/playbooks/t4-inference.yml"), report["playbook"]
        assert report["playbook"].startswith("/opt/gpuconf/"), report["playbook"]


def test_an_xid_fails_the_next_prolog_which_drains_the_node_and_the_job_completes_on_the_other(fleet, agents):
    assert agents.returncode == 0
    try:
        first = fleet.slurm(["sbatch", "--parsable", "--chdir=/tmp", "-w", DEBIAN, "--wrap", "true"]).stdout.strip()
        assert wait_until(lambda: job(fleet, first).get("JobState") == "COMPLETED", 60, 0.5), job(fleet, first)
        assert node_json(fleet, DEBIAN, "/var/lib/gpuconf/gate-report.json")["verdict"] == "PASS"

        rc, out, err = fleet.fault(DEBIAN, "xid", "79")
        assert rc == 0, out + err
        assert fleet.slurm(["scontrol", "update", f"NodeName={EL9}", "State=DRAIN", f"Reason={REASON}"]).returncode == 0
        submitted = fleet.slurm(["sbatch", "--parsable", "--chdir=/tmp", "--requeue", "--wrap", "hostname"])
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.strip()
        assert wait_until(lambda: show(fleet, DEBIAN).drained, 60, 0.5), (show(fleet, DEBIAN), job(fleet, job_id))
        drained = show(fleet, DEBIAN)
        assert drained.reason.startswith("gpuconf: gate: GPU 0 (0000:3b:00.0): Xid 79"), drained
        assert node_json(fleet, DEBIAN, "/var/lib/gpuconf/gate-report.json")["verdict"] == "CRITICAL"
        assert wait_until(lambda: job(fleet, job_id).get("Restarts") == "1", 30, 0.5), job(fleet, job_id)
        assert fleet.slurm(["scontrol", "update", f"NodeName={EL9}", "State=RESUME"]).returncode == 0
        assert wait_until(lambda: job(fleet, job_id).get("JobState") == "COMPLETED", 120, 1), job(fleet, job_id)
        assert job(fleet, job_id)["NodeList"] == EL9
        assert node_json(fleet, EL9, "/var/lib/gpuconf/gate-report.json")["verdict"] == "PASS"
        assert show(fleet, DEBIAN).reason == drained.reason
    finally:
        fleet.slurm(["scontrol", "update", f"NodeName={EL9}", "State=RESUME"])


def test_an_upgraded_controller_finds_every_agent_behind_and_apply_brings_them_level(fleet, site, agents,
                                                                                    gpuconf_wheel, tmp_path):
    assert agents.returncode == 0
    now = Version(gpuconf.__version__)
    newer = f"{now.major}.{now.minor}.{now.micro + 1}"
    pip = [str(site.bin / "pip"), "install", "--quiet", "--no-deps", "--no-index", "--force-reinstall"]
    upgraded = subprocess.run([*pip, str(build_wheel(tmp_path, version=newer))], capture_output=True, text=True,
                              timeout=300)
    assert upgraded.returncode == 0, upgraded.stderr
    try:
        assert site.gpuconf("--version").stdout.split() == ["gpuconf", newer]
        check = site.gpuconf("check", "gpuconf-agent.yml", "--report", str(tmp_path / "check.json"))
        assert check.returncode == 2, check.stdout[-3000:]
        hosts = json.loads((tmp_path / "check.json").read_text())["hosts"]
        behind = f"gpuconf agent {gpuconf.__version__} is behind the controller's {newer}: install {newer}"
        for node in (DEBIAN, EL9):
            drifted = [(t["type"], [c["summary"] for c in t["changes"]]) for t in hosts[node]["tasks"]
                       if t["status"] == "would_change"]
            assert drifted == [("gpuconf_agent", [behind])], (node, drifted)
        applied = site.gpuconf("apply", "gpuconf-agent.yml")
        assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr[-2000:]
        for node in (DEBIAN, EL9):
            assert fleet.exec(node, "gpuconf --version")[1].split() == ["gpuconf", newer]
            assert node_json(fleet, node, "/opt/gpuconf/agent.json")["version"] == newer
            assert fleet.exec(node, ["ls", "/opt/gpuconf/releases"])[1].split() == [f"{newer}-cp311-x86_64"]
        level = site.gpuconf("check", "gpuconf-agent.yml")
        assert level.returncode == 0, level.stdout[-3000:]
    finally:
        subprocess.run([*pip, str(gpuconf_wheel)], capture_output=True, timeout=300)
