"""Trust on first use in parallel: many first connections at once leave a whole known_hosts file,
one line per node, each the node's real key."""
from __future__ import annotations

import subprocess

import paramiko

from tests.reliability.helpers import GPUCONF, ROOT, write_inventory, write_playbook

PLAYBOOK = "- hosts: all\n  gather_facts: false\n  tasks:\n    - probe: {command: hostname}\n"


def pinned(lab) -> dict[str, paramiko.PKey]:
    keys = paramiko.HostKeys(str(lab.known_hosts))
    return {name: next(iter(keys[name].values())) for name in keys.keys()}


def test_parallel_first_connections_write_one_whole_line_per_node(lab, tmp_path):
    nodes = [info.name for info in lab.nodes]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    inventory = write_inventory(lab, tmp_path / "hosts.yml", nodes, known_hosts_file=str(known_hosts))
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}   # no ~/.ssh/known_hosts to fall back on
    argv = [*GPUCONF, "check", str(playbook), "-i", str(inventory), "--accept-new-host-keys"]
    runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
            for _ in range(4)]   # 4 runs at once, each connecting to every node in parallel
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, out + err
    lines = known_hosts.read_text().splitlines()
    assert len(lines) == len(nodes), lines
    recorded = paramiko.HostKeys(str(known_hosts))   # parses: no torn or merged lines
    expected = pinned(lab)
    assert sorted(recorded.keys()) == sorted(expected)
    for name, key in expected.items():
        assert list(recorded[name].values()) == [key], f"{name}: recorded a key that is not the node's"
    # and now strict: the same runs without the flag trust exactly these keys
    strict = subprocess.run(argv[:-1], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert strict.returncode == 0, strict.stdout + strict.stderr


def test_without_the_flag_an_unknown_node_is_refused_with_its_fingerprint(lab, tmp_path):
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    inventory = write_inventory(lab, tmp_path / "hosts.yml", ["a100-01"], known_hosts_file=str(known_hosts))
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([*GPUCONF, "check", str(playbook), "-i", str(inventory)], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=120)
    assert run.returncode == 8
    assert "is not known" in run.stdout and "SHA256:" in run.stdout and "--accept-new-host-keys" in run.stdout
    assert known_hosts.read_text() == ""
