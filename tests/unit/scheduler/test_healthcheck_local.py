"""gpuconf as the HealthCheckProgram, on this machine: the wrapper slurmd would run (no
arguments, no environment but SLURMD_NODENAME), the real CLI, engine and local connection,
with a stand-in `scontrol` first on PATH that keeps one node's state in a file and prints it as
Slurm 22.05 does. The real slurmd and slurmctld run it in tests/slurm/test_healthcheck_lab.py.
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.paths import ROOT

WRAPPER = ROOT / "scripts" / "gpuconf-healthcheck"
GPUCONF = Path(sys.executable).parent / "gpuconf"

SCONTROL = '''\
#!/usr/bin/env python3
"""scontrol show node NAME / update NodeName=NAME State=DRAIN Reason=... | State=RESUME, for one node."""
import json, os, sys, time
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node.json")
node = json.load(open(path)) if os.path.exists(path) else {"state": "IDLE", "reason": None, "stamp": None}
with open(path + ".calls", "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
if args[:2] == ["show", "node"]:
    reason = f"\\n   Reason={node['reason']} [{node['stamp']}]" if node["reason"] else ""
    print(f"NodeName={args[2]} Arch=x86_64 CoresPerSocket=1\\n   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.01\\n"
          f"   State={node['state']} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\\n"
          f"   Partitions=gpu\\n   BootTime=2026-12-04T07:00:00 SlurmdStartTime=2026-12-04T07:00:05{reason}\\n")
    sys.exit(0)
if args[:1] == ["update"]:
    fields = dict(a.split("=", 1) for a in args[1:])
    if fields["State"] == "DRAIN":
        node.update(state="IDLE+DRAIN", reason=fields["Reason"],
                    stamp=f"{os.environ.get('SCONTROL_USER', 'root')}@{time.strftime('%Y-%m-%dT%H:%M:%S')}")
    elif fields["State"] == "RESUME" and "DRAIN" in node["state"]:
        node.update(state="IDLE", reason=None, stamp=None)
    else:
        print("slurm_update error: Invalid node state specified", file=sys.stderr)
        sys.exit(1)
    json.dump(node, open(path, "w"))
    sys.exit(0)
sys.exit(f"scontrol: unsupported here: {args}")
'''


@pytest.fixture
def node(tmp_path):
    """A stand-in scontrol, a health playbook whose one probe fails while `fault` exists, and the
    wrapper's settings (the lock, the report and the check's memory all under tmp_path)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    (tmp_path / "health.yml").write_text(textwrap.dedent(f"""\
        - name: health
          hosts: all
          tasks:
            - name: no fault
              probe: {{command: "test ! -e {tmp_path}/fault", pending_in_check: false, timeout: 5}}
            - name: marker
              file: {{path: "{tmp_path}/marker", content: "x\\n"}}
        """))
    (tmp_path / "settings").write_text(textwrap.dedent(f"""\
        PATH={bin_dir}:$PATH
        GPUCONF={shlex.quote(str(GPUCONF))}
        GPUCONF_HEALTHCHECK_PLAYBOOK={tmp_path}/health.yml
        GPUCONF_HEALTHCHECK_REPORT={tmp_path}/report.json
        GPUCONF_HEALTHCHECK_LOCK={tmp_path}/lock
        GPUCONF_HEALTHCHECK_ARGS="--slurm-state {tmp_path}/state/healthcheck.json"
        """))
    return tmp_path


def healthcheck(root: Path) -> tuple[int, dict]:
    """One run as slurmd makes it: the wrapper, no arguments, an empty environment but the node name."""
    done = subprocess.run(["env", "-i", "SLURMD_NODENAME=gpu-n1", f"GPUCONF_HEALTHCHECK_SETTINGS={root}/settings",
                           str(WRAPPER)], capture_output=True, text=True, timeout=60, cwd="/")
    report = json.loads((root / "report.json").read_text())
    return done.returncode, report


def slurm(root: Path) -> dict:
    return json.loads((root / "bin" / "node.json").read_text()) if (root / "bin" / "node.json").exists() else \
        {"state": "IDLE", "reason": None}


def test_drains_on_a_failure_resumes_after_two_healthy_runs_and_drift_alone_never_drains(node):
    code, report = healthcheck(node)  # drift only: the marker file is missing
    assert code == 2 and report["inventory"] == "<command line>" and list(report["hosts"]) == ["gpu-n1"]
    assert report["deadline"] == 35 and report["slurm"][0]["action"] == "none" and slurm(node)["state"] == "IDLE"
    assert not (node / "state").exists()  # nothing to remember: nothing written

    (node / "fault").touch()
    code, report = healthcheck(node)
    assert code == 4 and report["slurm"][0]["action"] == "drain"
    assert slurm(node)["state"] == "IDLE+DRAIN" and slurm(node)["reason"].startswith("gpuconf: failed: no fault: ")
    assert json.loads((node / "state" / "healthcheck.json").read_text())["stamp"] == slurm(node)["stamp"]

    (node / "fault").unlink()
    code, report = healthcheck(node)
    assert code == 2 and report["slurm"][0] | {"healthy": 1} == report["slurm"][0]
    assert report["slurm"][0]["action"] == "wait" and slurm(node)["state"] == "IDLE+DRAIN"  # healthy once
    code, report = healthcheck(node)
    assert report["slurm"][0]["action"] == "resume" and slurm(node) | {"state": "IDLE", "reason": None} == slurm(node)
    calls = [json.loads(line)[:3] for line in (node / "bin" / "node.json.calls").read_text().splitlines()]
    assert [c for c in calls if c[0] == "update"] == [["update", "NodeName=gpu-n1", "State=DRAIN"],
                                                      ["update", "NodeName=gpu-n1", "State=RESUME"]]


def test_a_persons_drain_is_left_alone_failing_or_healthy(node):
    subprocess.run([str(node / "bin" / "scontrol"), "update", "NodeName=gpu-n1", "State=DRAIN",
                    "Reason=bad DIMM, ticket 4411"], check=True, env={"SCONTROL_USER": "alice"})
    (node / "fault").touch()
    assert healthcheck(node)[1]["slurm"][0]["action"] == "kept"
    (node / "fault").unlink()
    assert [healthcheck(node)[1]["slurm"][0]["action"] for _ in range(3)] == ["kept", "kept", "kept"]
    assert slurm(node)["reason"] == "bad DIMM, ticket 4411"
    calls = (node / "bin" / "node.json.calls").read_text().splitlines()
    assert sum(json.loads(c)[0] == "update" for c in calls) == 1  # the person's; gpuconf only read


def test_a_run_still_going_makes_the_next_one_a_no_op(node):
    import fcntl

    with open(node / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        done = subprocess.run(["env", "-i", f"GPUCONF_HEALTHCHECK_SETTINGS={node}/settings", str(WRAPPER)],
                              capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and not (node / "report.json").exists()
