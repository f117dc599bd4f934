"""bench/floor_reads.py (issue 17's floor) and the ratios bench/report.py computes against it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

import floor_reads  # noqa: E402
import report  # noqa: E402
from measure import Row  # noqa: E402

PROGRAMS = ("dpkg-query", "nvidia-smi", "systemctl", "dkms")


def ops(root: Path) -> list[dict]:
    """The shape of gpuconf's a100 request (bench/capture_request.py), paths under `root`."""
    return [
        {"op": "stat", "path": f"{root}/etc/os-release", "content": True, "follow": True},
        {"op": "stat", "path": f"{root}/etc/modprobe.d/nouveau.conf", "content": True, "follow": False},
        {"op": "stat", "path": f"{root}/etc/no-content", "content": False},
        {"op": "host"},
        {"op": "glob", "patterns": [f"{root}/sys/devices/*/vendor"], "what": "content"},
        {"op": "glob", "patterns": [f"{root}/boot/vmlinuz-*"], "what": "name"},
        {"op": "cpio", "paths": ["/boot/initrd.img-{kernel}"], "members": "etc/modprobe.d/*", "timeout": 60},
        {"op": "exec", "argv": ["dpkg-query", "-W", "-f=${Package}\\t${Version}\\n"], "timeout": 30,
         "unless_exists": "/etc/redhat-release"},
        {"op": "exec", "argv": ["rpm", "-qa"], "timeout": 30, "if_exists": "/etc/redhat-release"},
        {"op": "exec", "argv": ["apt-cache", "policy", "nvidia-*-580"], "timeout": 60},
        {"op": "exec", "argv": ["dkms", "status", "-m", "nvidia"], "timeout": 30},
        {"op": "exec", "argv": ["nvidia-smi", "--query-gpu=index,driver_version", "--format=csv,nounits"],
         "timeout": 10},
        {"op": "sh", "cmd": "bash -lc 'echo \"$LD_LIBRARY_PATH\"'", "timeout": 30},
        {"op": "exec", "argv": ["systemctl", "show", "nvidia-persistenced", "nvidia-dcgm",
                                "--property=LoadState,ActiveState", "--no-pager"], "timeout": 20},
    ]


def test_the_line_reads_each_class_once_with_the_requests_lists(tmp_path):
    """Run the line for real with the four programs stubbed: each runs once, with the request's own
    argv; the files and sysfs globs are read; the name globs listed; nothing else is started."""
    root, stubs, calls = tmp_path / "node", tmp_path / "bin", tmp_path / "calls"
    for path, text in {"etc/os-release": "ID=debian\n", "etc/modprobe.d/nouveau.conf": "blacklist nouveau\n",
                       "etc/no-content": "never read\n", "sys/devices/a/vendor": "0x10de\n",
                       "sys/devices/b/vendor": "0x15b3\n", "boot/vmlinuz-6.1.0-18-amd64": ""}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    stubs.mkdir()
    for program in (*PROGRAMS, "rpm", "apt-cache", "bash"):
        (stubs / program).write_text(f'#!/bin/sh\nprintf "%s|" {program} "$@" >> {calls}\necho >> {calls}\n')
        (stubs / program).chmod(0o755)
    line = floor_reads.reads_command(ops(root))
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PATH=f"{stubs}:/usr/bin:/bin"))
    assert done.returncode == 0, done.stderr
    assert "ID=debian" in done.stdout and "blacklist nouveau" in done.stdout
    assert "0x10de" in done.stdout and "0x15b3" in done.stdout and "never read" not in done.stdout
    assert f"{root}/boot/vmlinuz-6.1.0-18-amd64" in done.stdout
    assert calls.read_text().splitlines() == [
        "dpkg-query|-W|-f=${Package}\\t${Version}\\n|",
        "nvidia-smi|--query-gpu=index,driver_version|--format=csv,nounits|",
        "systemctl|show|nvidia-persistenced|nvidia-dcgm|--property=LoadState,ActiveState|--no-pager|",
        "dkms|status|-m|nvidia|"]


def test_a_failing_program_fails_the_line_and_a_missing_file_does_not(tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for program in PROGRAMS:
        (stubs / program).write_text("#!/bin/sh\nexit 0\n" if program != "nvidia-smi" else "#!/bin/sh\nexit 9\n")
        (stubs / program).chmod(0o755)
    line = floor_reads.reads_command(ops(tmp_path / "absent"))
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PATH=f"{stubs}:/usr/bin:/bin"))
    assert done.returncode == 9


def test_a_request_without_one_of_the_programs_is_refused(tmp_path):
    without = [op for op in ops(tmp_path) if op.get("argv", [""])[0] != "systemctl"]
    with pytest.raises(ValueError, match="systemctl"):
        floor_reads.reads_command(without)


def test_the_ops_come_from_after_the_runner_in_the_captured_stdin(tmp_path):
    request = {"readonly": True, "ops": ops(tmp_path)}
    stdin = "#--gpuconf-runner--\nimport json\n#--gpuconf-request--\n" + json.dumps(request)
    assert floor_reads.request_ops(stdin) == request["ops"]
    with pytest.raises(ValueError, match="marker"):
        floor_reads.request_ops(json.dumps(request))


def row(tool: str, workload: str, hosts: int, wall: float, cpu: float, **extra) -> Row:
    return Row(tool=tool, workload=workload, hosts=hosts, rc=0, wall_s=wall, cpu_s=cpu, peak_rss_mb=50,
               processes=1, machine_busy=1.0, connections=1.0, round_trips=1.0, round_trips_max=1,
               kib_to_host=None, **extra)


def test_the_controller_targets_are_judged_against_floor_reads_beside_the_plain_floor():
    rows = [row("floor", "after apply", 20, 1.0, 0.20, node_processes=4.0),
            row("floor+reads", "no-op check", 20, 2.5, 0.50, node_processes=9.0),
            row("gpuconf", "no-op check", 20, 3.0, 2.00, lines_printed=12, node_processes=15.0)]
    text = report.controller_targets(rows, {})
    assert "CPU per host 100 ms ÷ floor+reads's 25 ms = 4.00 (**missed**: target ≤ 2, over by 2.00×)" in text
    assert "÷ the plain floor's 10 ms = 10.00" in text
    assert "wall 3.00 s ÷ floor+reads's 2.50 s = 1.20 (met)" in text
    assert "wall ÷ the plain floor 3.00" in text
    assert "| 20 | 3.00 / 2.50 | 1.20 (met) | 100 / 25 | 4.00 (**missed**, 2.00× over) | 12 | 15.0 / 9.0 |" in text


def test_without_a_floor_reads_row_there_is_no_side_by_side_table():
    rows = [row("floor", "after apply", 20, 1.0, 0.20), row("gpuconf", "no-op check", 20, 3.0, 2.00)]
    text = report.controller_targets(rows, {})
    assert "floor+reads" not in text and "÷ the plain floor's 10 ms = 10.00" in text
