"""`gpuconf schedule show` renders the drift_timer role's own templates; pull mode needs no SSH."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuconf.cli.main import main
from gpuconf.cli.schedule import render_units, role_dir, unit_templates
from tests.paths import ROOT

GPUCONF = str(Path(sys.executable).with_name("gpuconf"))


def units(capsys, *args: str) -> dict[str, str]:
    assert main(["schedule", "show", *args]) == 0
    text = capsys.readouterr().out
    found, path = {}, None
    for line in text.splitlines(keepends=True):
        if line.startswith("# /etc/systemd/system/"):
            path = line[2:].strip()
            found[path] = ""
        elif path:
            found[path] += line
    return {path: text.rstrip() + "\n" for path, text in found.items()}


def directives(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def test_show_prints_the_service_and_timer_the_role_installs(capsys):
    shown = units(capsys, "--interval", "30min", "--randomized-delay", "5min", "--host", "node07",
                  "--playbook", "playbooks/h100-node.yml", "-e", "drift_timer_extra_args=--slurm")
    assert set(shown) == {path for path, _ in unit_templates(role_dir(ROOT))}
    timer = directives(shown["/etc/systemd/system/gpuconf-drift.timer"])
    assert (timer["OnUnitActiveSec"], timer["RandomizedDelaySec"]) == ("30min", "5min")
    service = directives(shown["/etc/systemd/system/gpuconf-drift.service"])
    argv = service["ExecStart"].split()
    assert argv[1:4] == ["check", "-c", "local"]
    assert argv[argv.index("--limit") + 1] == "node07"
    assert argv[argv.index("--prometheus") + 1] == "/var/lib/node_exporter/textfile_collector/gpuconf.prom"
    assert argv[4] == "playbooks/h100-node.yml"   # the node's gpuconf finds the shipped playbook by name
    assert argv[argv.index("-i") + 1] == "/etc/gpuconf/inventory.yml"
    assert argv[-1] == "--slurm" and service["Type"] == "oneshot"


def test_the_defaults_match_the_role_defaults(capsys):
    shown = units(capsys, "--host", "n1")
    rendered = dict(render_units({}, "n1", ROOT))
    assert shown == {path: text.rstrip() + "\n" for path, text in rendered.items()}
    timer = directives(shown["/etc/systemd/system/gpuconf-drift.timer"])
    assert timer["OnUnitActiveSec"] == "1h" and timer["RandomizedDelaySec"] == "15min"


def test_a_bad_interval_or_deadline_is_a_clear_error(capsys):
    assert main(["schedule", "show", "--interval", "every hour"]) == 1
    assert capsys.readouterr().err.startswith("gpuconf: error: --interval 'every hour': not a systemd time span")
    assert main(["schedule", "show", "--deadline", "-3"]) == 1
    assert "gpuconf: error: --deadline" in capsys.readouterr().err


def test_pull_mode_runs_on_this_machine_with_the_same_exit_codes(tmp_path):
    """`check -c local PLAYBOOK -i INVENTORY --limit NAME`: the node's own name from a fleet inventory."""
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "hosts.yml").write_text(
        "all:\n  vars: {user: nobody, port: 2222, address: 192.0.2.1}\n  children:\n"
        "    gpu:\n      hosts: {node01: {}, node02: {}}\n")
    (tmp_path / "pb.yml").write_text(
        f"- name: pull\n  hosts: gpu\n  tasks:\n    - name: marker\n"
        f"      file: {{path: '{tmp_path}/{{{{ inventory_hostname }}}}.marker', content: 'x'}}\n")
    base = [GPUCONF, "check", "-c", "local", str(tmp_path / "pb.yml"), "-i", str(tmp_path / "inventory")]
    drift = subprocess.run(base + ["--limit", "node01"], capture_output=True, text=True, timeout=60)
    assert drift.returncode == 2, drift.stderr
    assert "[node01]" in drift.stdout and "[node02]" not in drift.stdout  # no SSH to 192.0.2.1 was tried
    (tmp_path / "node01.marker").write_text("x")
    assert subprocess.run(base + ["--limit", "node01"], capture_output=True, timeout=60).returncode == 0


def test_a_run_that_matches_no_host_is_refused_not_a_silent_success(capsys):
    code = main(["apply", "-c", "local", str(ROOT / "playbooks" / "a100-node.yml"), "-i", "localhost,"])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuconf: error: no host of <command line> is in the plays' hosts (a100)")
    assert "-i image" in err
