"""Issue 29, finding 10: an apply and an ad hoc command without become, as the lab's plain
login `gpuadmin`, over SSH. Such a run cannot write /run/gpuconf.lock (root's run lock): it
takes its user's own lock (gpuconf/connection/lock.py) and does its work; before, it failed
with a remote Python traceback."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

BASE = "/tmp/gpuconf-nobecome"


def gpuconf(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuconf", *argv], capture_output=True, text=True, timeout=300)


def test_apply_without_become_takes_its_users_own_lock_and_writes_as_that_user(lab, ssh, tmp_path):
    ssh("a100-01", f"sudo rm -rf {BASE}")
    playbook = tmp_path / "site.yml"
    playbook.write_text(textwrap.dedent(f"""\
        - hosts: a100-01
          gather_facts: false
          tasks:
            - name: a directory of the login user
              directory: {{path: {BASE}}}
            - name: a file in it
              file: {{path: {BASE}/note, content: "written without root\\n"}}
        """))
    inventory = str(lab.inventory_path)
    argv = ["apply", str(playbook), "-i", inventory, "-e", "ansible_become=false", "--no-retry-file"]
    first = gpuconf(*argv)
    shown = first.stdout + first.stderr
    assert first.returncode == 0, shown
    assert "Traceback" not in shown
    status, out, _ = ssh("a100-01", f"stat -c '%U %a' {BASE}/note; cat {BASE}/note; "
                                    "stat -c '%U %a' /tmp/gpuconf-$(id -u)/gpuconf.lock")
    assert status == 0
    assert out.splitlines() == ["gpuadmin 644", "written without root", "gpuadmin 644"]
    second = gpuconf(*argv, "--report", str(tmp_path / "second.json"))
    assert second.returncode == 0, second.stdout + second.stderr
    tasks = json.loads((tmp_path / "second.json").read_text())["hosts"]["a100-01"]["tasks"]
    assert [t["status"] for t in tasks] == ["ok", "ok"]   # the second apply changes nothing


def test_ad_hoc_without_become_runs_as_the_login_user(lab):
    done = gpuconf("run", "a100-01", "-i", str(lab.inventory_path), "-e", "ansible_become=false", "-a", "id -un")
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    assert "gpuadmin" in done.stdout and "Traceback" not in shown
