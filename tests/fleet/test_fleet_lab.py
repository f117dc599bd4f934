"""Fleet operations on the lab, over real SSH and inside nodes: reports, the drift timer,
the deadline with a hung nvidia-smi, and image convergence.

Nodes as tests_fixtures assigns them: a100-01 is only read (checks); t4-01 takes the
writes and faults and is reset afterwards; a100-02 converges and reboots and
is reset afterwards.
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
from prometheus_client.parser import text_string_to_metric_families

from gpuconf.cli.schedule import render_units
from tests.lab_fixtures import wait_until

ROOT = Path(__file__).parents[2]
GPUCONF = str(Path(sys.executable).with_name("gpuconf"))
SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())


def gpuconf(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([GPUCONF, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def inventory(lab) -> str:
    return str(lab.inventory_path.parent)


def metrics(text: str) -> dict[str, list]:
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def test_reports_of_a_lab_check_parse_and_fit_the_schema(lab, tmp_path):
    proc = gpuconf("check", "playbooks/a100-node.yml", "-i", inventory(lab), "--limit", "a100-01",
                   "--junit", str(tmp_path / "j.xml"), "--prometheus", str(tmp_path / "m.prom"),
                   "--format", "json")
    assert proc.returncode & 2, proc.stderr  # a fresh node has drifted
    report = json.loads(proc.stdout)
    jsonschema.validate(report, SCHEMA)
    tasks = report["hosts"]["a100-01"]["tasks"]
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite[@name='a100-01']")
    assert int(suite.get("tests")) == len(tasks)
    assert int(suite.get("failures")) == sum(t["status"] in ("would_change", "failed", "unknown") for t in tasks)
    found = metrics((tmp_path / "m.prom").read_text())
    drifted = {s.labels["task"] for s in found["gpuconf_drift"] if s.value == 1}
    assert drifted == {t["task"] for t in tasks if t["status"] == "would_change"}
    assert {s.labels["role"] for s in found["gpuconf_drift"]} >= {"nouveau", "nvidia_driver"}
    assert found["gpuconf_check_ok"][0].labels == {"host": "a100-01"} and found["gpuconf_check_ok"][0].value == 0


def drift_timer_vars(lab) -> list[str]:
    # the controller's gpuconf, which this lab lends its nodes (tests/agent installs a node's own), and
    # the shipped playbook by name: the node's gpuconf finds it
    values = {"drift_timer_gpuconf": GPUCONF,
              "drift_timer_inventory": inventory(lab), "drift_timer_playbook": "t4-inference.yml",
              "drift_timer_interval": "30min", "drift_timer_deadline": 120}
    return [arg for key, value in values.items() for arg in ("-e", f"{key}={value}")]


def test_the_drift_timer_installs_fires_through_systemd_and_writes_the_textfile(lab):
    try:
        extra = drift_timer_vars(lab)
        first = gpuconf("apply", "playbooks/drift-timer.yml", "-i", inventory(lab), "--limit", "t4-01", *extra)
        assert first.returncode == 0, first.stdout + first.stderr
        again = gpuconf("apply", "playbooks/drift-timer.yml", "-i", inventory(lab), "--limit", "t4-01",
                        "--detailed-exitcodes", *extra)
        assert again.returncode == 0, again.stdout  # nothing left to change
        options = {extra[i + 1].split("=", 1)[0]: extra[i + 1].split("=", 1)[1] for i in range(0, len(extra), 2)}
        for path, text in render_units(options | {"drift_timer_deadline": 120}, "t4-01", ROOT):
            assert lab.exec("t4-01", ["cat", path])[1] == text  # `schedule show` prints what was installed
        assert lab.exec("t4-01", "systemctl is-enabled gpuconf-drift.timer")[1].strip() == "enabled"
        assert lab.exec("t4-01", "test -e /var/lib/node_exporter/textfile_collector/gpuconf.prom")[0] == 1

        lab.exec("t4-01", "systemctl start gpuconf-drift.service", timeout=180)
        status = lab.exec("t4-01", "systemctl show gpuconf-drift.service --property=ExecMainStatus")[1]
        assert status.strip() == "ExecMainStatus=2"  # the check ran to its end: drift on a fresh node
        rc, text, _ = lab.exec("t4-01", "cat /var/lib/node_exporter/textfile_collector/gpuconf.prom")
        assert rc == 0
        found = metrics(text)
        assert [(s.labels, s.value) for s in found["gpuconf_check_ok"]] == [({"host": "t4-01"}, 0)]
        assert any(s.value == 1 and s.labels["host"] == "t4-01" for s in found["gpuconf_drift"])
        assert time.time() - found["gpuconf_last_run_timestamp_seconds"][0].value < 300
        assert lab.exec("t4-01", "ls -a /var/lib/node_exporter/textfile_collector")[1].split() == \
            [".", "..", "gpuconf.prom"]  # no temp file left behind
    finally:
        lab.reset("t4-01")


def test_the_deadline_holds_with_a_hung_nvidia_smi(lab, tmp_path):
    playbook = tmp_path / "hang.yml"
    playbook.write_text(textwrap.dedent("""\
        - name: gpu check
          hosts: t4
          tasks:
            - name: hostname file
              file: {path: /etc/hostname-copy, content: "x\\n"}
            - name: GPUs answer
              probe: {command: "nvidia-smi -L", timeout: 120, pending_in_check: false}
            - name: after the GPUs
              file: {path: /etc/after-gpus, content: "x\\n"}
        """))
    try:
        rc, out, err = lab.exec("t4-01", "DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-utils-580=580.95.05-1",
                                timeout=180)
        assert rc == 0, out + err  # the node's nvidia-smi (simulated), which the fault hangs
        rc, _, err = lab.fault("t4-01", "nvidia-smi-hang")
        assert rc == 0, err
        started = time.monotonic()
        proc = gpuconf("check", str(playbook), "-i", inventory(lab), "--limit", "t4-01", "--deadline", "5",
                       "--report", str(tmp_path / "r.json"), timeout=120)
        elapsed = time.monotonic() - started
        assert elapsed < 60  # the probe alone may take 120 s: the deadline ended the run
        assert proc.returncode & 4, proc.stdout
        tasks = {t["task"]: t for t in json.loads((tmp_path / "r.json").read_text())["hosts"]["t4-01"]["tasks"]}
        assert tasks["hostname file"]["status"] == "would_change"
        assert tasks["GPUs answer"]["status"] == "unknown", tasks["GPUs answer"]["error"]
        # after the deadline a check still reports a task whose facts were already read, else not run
        after = tasks["after the GPUs"]
        assert after["status"] == "would_change" or (after["status"], after["not_run"]) == ("unknown", "deadline")
    finally:
        lab.fault("t4-01", "clear")
        lab.reset("t4-01")


def test_the_readme_image_build_holds_the_reboot_defers_the_driver_services_then_checks_clean(lab):
    """The README's image-build flow, exactly: inside a fresh node (its own machine, -c local
    through `-i image`), `gpuconf apply playbooks/a100-node.yml -i image` converges what it can
    and exits 16; the services that need the driver are enabled and their start deferred to the
    held reboot, and reported as such. After the reboot, a check exits 0."""
    node = "a100-02"
    where = f"cd {shlex.quote(str(ROOT))} && {shlex.quote(GPUCONF)}"
    apply = f"{where} apply playbooks/a100-node.yml -i image --report /root/apply.json"
    check = f"{where} check playbooks/a100-node.yml -i image --report /root/check.json"
    try:
        lab.reset(node)
        boot_id = lab.exec(node, "cat /proc/sys/kernel/random/boot_id")[1]
        rc, out, err = lab.exec(node, apply, timeout=600)
        assert rc == 16, out[-4000:] + err  # converged what it could; the reboot is pending
        report = json.loads(lab.exec(node, "cat /root/apply.json")[1])
        tasks = {t["task"]: t for t in report["hosts"]["localhost"]["tasks"]}
        assert tasks["Reboot if required"]["status"] == "reboot_pending"
        assert report["hosts"]["localhost"]["reboot_pending"] is True and report["exit_code"] == 16
        service = tasks["nvidia-persistenced enabled and running, so persistence survives reboots"]
        assert service["status"] == "changed" and service["reboot_required"] is True, service
        assert any("deferred to the pending reboot" in c["summary"] for c in service["changes"]), service
        assert not [t for t in tasks.values() if t["status"] in ("failed", "unknown")]
        assert "reboot pending" in out
        assert lab.exec(node, "systemctl is-enabled nvidia-persistenced")[1].strip() == "enabled"
        assert lab.exec(node, "cat /proc/sys/kernel/random/boot_id")[1] == boot_id  # the machine stayed up

        lab.reboot(node)
        assert wait_until(lambda: lab.exec(node, "cat /proc/sys/kernel/random/boot_id")[1] not in ("", boot_id),
                          60, 0.2)
        lab.wait_ssh(node, 60)
        rc, out, err = lab.exec(node, check, timeout=300)
        assert rc == 0, out[-4000:] + err  # after the reboot: in sync, the deferred services running
        report = json.loads(lab.exec(node, "cat /root/check.json")[1])
        assert {t["status"] for t in report["hosts"]["localhost"]["tasks"]} <= {"ok", "skipped"}
        assert lab.exec(node, "systemctl is-active nvidia-persistenced")[1].strip() == "active"
        # the CDI spec deferred in the build: the toolkit's refresh unit, enabled, wrote it at boot
        assert "deferred to the pending reboot" in tasks["CDI spec made for the loaded driver"]["changes"][0]["summary"]
        assert lab.exec(node, "systemctl is-active nvidia-cdi-refresh.service")[1].strip() == "active"
        assert "Finished Refresh NVIDIA CDI specification file." in \
            lab.exec(node, "journalctl -b -u nvidia-cdi-refresh.service")[1]
    finally:
        lab.reset(node)
