"""`gpuconf check --slurm` against the lab's real Slurm: it drains a drifted node with its own
reason, resumes its own drain once the node is back in sync twice in a row, and never undoes or overwrites a
drain that a person set. `scontrol` runs on the node over SSH, as the product does it."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema

from gpuconf.scheduler.slurm import parse_show_node
from tests.lab_fixtures import slurm_idle, wait_until

ROOT = Path(__file__).parents[2]
GPUCONF = str(Path(sys.executable).with_name("gpuconf"))
SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())
NODE = "t4-04"


def gpuconf(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([GPUCONF, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def node_slurm(lab, node: str) -> tuple[str, str | None]:
    """State and reason as `scontrol show node` inside the node prints them."""
    rc, out, err = lab.exec(node, ["scontrol", "show", "node", node])
    assert rc == 0, err
    state = parse_show_node(out)
    return state.state, state.reason


def controller_log_size(lab) -> int:
    return (lab.slurm_paths.log / "slurmctld.log").stat().st_size


def controller_updates(lab, node: str, since: int = 0) -> list[str]:
    """What slurmctld logged for state and reason updates of `node` (whoever sent them), from byte
    `since` of its log on: the session's Slurm lab is shared, and other tests drain this node too."""
    with open(lab.slurm_paths.log / "slurmctld.log", "rb") as handle:
        handle.seek(since)
        log = handle.read().decode(errors="replace")
    return re.findall(rf"update_node: node {re.escape(node)} (.*)", log)


def test_slurm_drain_resume_and_a_manual_drain_is_never_undone(slurm_lab, tmp_path):
    lab = slurm_lab
    playbook = tmp_path / "slurm.yml"
    playbook.write_text(textwrap.dedent("""\
        - name: slurm node
          hosts: t4
          tasks:
            - name: marker file
              file: {path: /etc/gpuconf-slurm-marker, content: "in sync\\n"}
        """))
    inventory = str(lab.inventory_path.parent)
    check = ["check", str(playbook), "-i", inventory, "--limit", NODE, "--slurm"]
    since = controller_log_size(lab)
    try:
        assert node_slurm(lab, NODE) == ("IDLE", None)
        drifted = gpuconf(*check, "--report", str(tmp_path / "r.json"))
        assert drifted.returncode == 2, drifted.stdout + drifted.stderr
        state, reason = node_slurm(lab, NODE)
        assert state == "IDLE+DRAIN" and reason == "gpuconf: drift: create /etc/gpuconf-slurm-marker"
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["deadline"] == 35 and report["slurm"][0]["action"] == "drain"
        jsonschema.validate(report, SCHEMA)

        assert gpuconf("apply", str(playbook), "-i", inventory, "--limit", NODE).returncode == 0
        assert gpuconf(*check).returncode == 0
        assert node_slurm(lab, NODE)[0] == "IDLE+DRAIN"  # healthy once: its own drain waits for a second run
        assert gpuconf(*check).returncode == 0
        # resumed: gpuconf had drained it (Slurm shows IDLE+NOT_RESPONDING until it pinged slurmd)
        assert node_slurm(lab, NODE)[1] is None
        assert wait_until(lambda: node_slurm(lab, NODE) == ("IDLE", None), 20, 0.2)
        assert controller_updates(lab, NODE, since) == [
            "reason set to: gpuconf: drift: create /etc/gpuconf-slurm-marker", "state set to DRAINED",
            "state set to IDLE"]

        # an operator drains it from another node: the controller is the cluster's
        rc, _, err = lab.exec("t4-05", ["scontrol", "update", f"NodeName={NODE}", "State=DRAIN",
                                        "Reason=bad DIMM, ticket 4411"])
        assert rc == 0, err
        assert gpuconf(*check, "--report", str(tmp_path / "r2.json")).returncode == 0
        assert node_slurm(lab, NODE) == ("IDLE+DRAIN", "bad DIMM, ticket 4411")
        assert json.loads((tmp_path / "r2.json").read_text())["slurm"][0]["action"] == "kept"
        lab.exec(NODE, "rm /etc/gpuconf-slurm-marker")
        assert gpuconf(*check).returncode == 2
        assert node_slurm(lab, NODE) == ("IDLE+DRAIN", "bad DIMM, ticket 4411")  # not overwritten
        assert controller_updates(lab, NODE, since)[3:] == ["reason set to: bad DIMM, ticket 4411", "state set to DRAINED"]
    finally:
        lab.exec(NODE, "rm -f /etc/gpuconf-slurm-marker /var/lib/gpuconf/healthcheck.json")
        slurm_idle(lab, NODE)
