"""Health probes through the real engine and CLI on this machine (`-c local`), with a
fake nvidia-smi first on PATH: one nvidia-smi call serves every probe; a failure
finding fails its task (exit 4) while the other probes still run; warnings fail only
with --strict; a hung nvidia-smi is killed with its process group and reported as
driver_unresponsive."""
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from gpuconf.cli.main import main
from tests.unit.tasks.health.fakes import smi_csv

PROBES = [
    {"name": "temperature", "health_temperature": {"nvidia_smi_timeout": "{{ timeout }}"}},
    {"name": "ecc", "health_ecc": {"nvidia_smi_timeout": "{{ timeout }}"}},
    {"name": "memory", "health_memory": {"nvidia_smi_timeout": "{{ timeout }}"}},
    {"name": "persistence", "health_persistence": {"nvidia_smi_timeout": "{{ timeout }}"}},
    {"name": "power", "health_power": {"nvidia_smi_timeout": "{{ timeout }}"}},
]


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A playbook of five nvidia-smi probes and a fake nvidia-smi that serves `answer.csv`
    (or sleeps forever when `hang` exists), logging each call and its pid."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "$$ $*" >> {tmp_path}/calls.log
        [ -e {tmp_path}/hang ] && exec sleep 600
        cat {tmp_path}/answer.csv
        """))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    (tmp_path / "site.yml").write_text(yaml.safe_dump([{"name": "health", "hosts": "all", "tasks": PROBES}]))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"python": sys.executable}}}}))
    return tmp_path


def gpuconf(root: Path, *extra: str, timeout: int = 10) -> tuple[int, dict]:
    report = root / "report.json"
    code = main(["check", str(root / "site.yml"), "-i", str(root / "hosts.yml"), "-c", "local",
                 "-e", f"timeout={timeout}", "--report", str(report), *extra])
    tasks = json.loads(report.read_text())["hosts"]["localhost"]["tasks"]
    return code, {t["task"]: t for t in tasks}


def calls(root: Path) -> list[str]:
    return (root / "calls.log").read_text().splitlines()


def test_one_nvidia_smi_call_serves_every_probe_and_a_hot_gpu_fails_only_its_probe(host):
    (host / "answer.csv").write_text(smi_csv(8, gpu3={"temperature.gpu": "91"}))
    code, tasks = gpuconf(host)
    assert code == 4
    assert {name: t["status"] for name, t in tasks.items()} == {
        "temperature": "failed", "ecc": "ok", "memory": "ok", "persistence": "ok", "power": "ok"}
    hot = [f for f in tasks["temperature"]["findings"] if f["severity"] == "failure"]
    assert hot == [{"probe": "temperature", "severity": "failure", "gpu": 3, "bus_id": "0000:4e:00.0", "value": 91,
                    "message": "GPU 3 (0000:4e:00.0) at 91 °C (limit 85 °C)", "action": None, "code": None,
                    "count": None, "rule": None}]
    assert len(tasks["power"]["findings"]) == 8
    assert len(calls(host)) == 1


def test_warnings_pass_unless_strict(host):
    (host / "answer.csv").write_text(smi_csv(8, gpu1={"memory.used": "80000"}))
    code, tasks = gpuconf(host)
    assert code == 0 and tasks["memory"]["status"] == "ok"
    assert [f["gpu"] for f in tasks["memory"]["findings"] if f["severity"] == "warning"] == [1]
    strict, _ = gpuconf(host, "--strict")
    assert strict == 4


def test_a_hung_nvidia_smi_is_killed_and_every_probe_reports_driver_unresponsive(host):
    (host / "hang").touch()
    code, tasks = gpuconf(host, "--deadline", "120", timeout=1)
    assert code == 4
    assert {t["status"] for t in tasks.values()} == {"unknown"}
    for task in tasks.values():
        (finding,) = task["findings"]
        assert (finding["severity"], finding["value"]) == ("failure", "driver_unresponsive")
    (call,) = calls(host)   # hung once, for every probe
    pid = int(call.split()[0])
    assert not Path(f"/proc/{pid}").exists() or "sleep" not in Path(f"/proc/{pid}/cmdline").read_text(), \
        "the hung nvidia-smi survived its timeout"
