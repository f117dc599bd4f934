"""One variable layering: every magic variable renders the same in `gpuconf validate` as in a
run over SSH against a lab node (validate cannot know the host's facts, nor whether the run
will be a check or an apply: those are the run's alone)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from gpuconf.engine.validate import validation_magic
from gpuconf.engine.variables import LazyGroups, LazyHostvars, task_variables
from gpuconf.inventory.hosts import load_inventory
from gpuconf.playbook.loader import load_playbook
from gpuconf.templating.render import render_string

MAGIC = ("{{ inventory_hostname }}|{{ inventory_hostname_short }}|{{ group_names | join(',') }}|"
         "{{ groups['a100'] | join(',') }}|{{ groups['all'] | length }}|{{ hostvars[inventory_hostname]['port'] }}|"
         "{{ play_hosts | join(',') }}|{{ ansible_play_hosts | join(',') }}|{{ ansible_play_batch | length }}")


def test_magic_variables_render_the_same_in_validate_and_in_a_run(lab, tmp_path):
    playbook = [{"name": "magic", "hosts": "a100", "tasks": [
        {"name": "what a task sees", "file": {"path": "/tmp/gpuconf-magic-{{ inventory_hostname }}",
                                               "content": MAGIC + "|{{ ansible_check_mode }}|{{ facts.kernel }}\n"}}]}]
    site = tmp_path / "site.yml"
    site.write_text(yaml.safe_dump(playbook))
    inventory_dir = str(lab.inventory_path.parent)
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "gpuconf", "check", str(site), "-i", inventory_dir, "--report",
                           str(report), "--no-retry-file"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    hosts = json.loads(report.read_text())["hosts"]
    assert sorted(hosts) == ["a100-01", "a100-02"]

    inventory = load_inventory(inventory_dir, [Path.cwd()])
    play = load_playbook(str(site), tmp_path).plays[0]
    shared = {"groups": LazyGroups(inventory), "hostvars": LazyHostvars(inventory)}
    for host, result in hosts.items():
        [task] = result["tasks"]
        written = next(line[1:] for line in task["changes"][0]["diff"].splitlines() if line.startswith("+") and
                       not line.startswith("+++"))
        at_run, check_mode, kernel = written.rsplit("|", 2)
        variables = task_variables(validation_magic(inventory, host, sorted(hosts), shared), {}, {}, play.tasks[0],
                                   play, inventory.host_vars(host))
        assert render_string(MAGIC, variables) == at_run
        name, short, groups = at_run.split("|")[:3]
        assert (name, short) == (host, host) and "a100" in groups.split(",") and check_mode == "True" and kernel
