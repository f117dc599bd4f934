"""`backup: true` on `file` and `json_merge`, over SSH: the replaced file is kept beside it as
PATH.YYYYmmddTHHMMSS.gpuconf~, with its content, mode and owner; a check makes none, and an
apply that changes nothing makes none."""
from __future__ import annotations

import json
import re

import pytest

from tests.reliability.helpers import check_run, gpuconf, no_traceback, node_file, write_inventory, write_playbook

DIR = "/var/tmp/gpuconf-rel/backup"
PLAYBOOK = f"""\
- hosts: all
  gather_facts: false
  tasks:
    - name: nccl.conf
      file: {{path: {DIR}/nccl.conf, content: "NCCL_IB_HCA=mlx5\\n", backup: true}}
    - name: daemon.json
      json_merge: {{path: {DIR}/daemon.json, merge: {{default-runtime: nvidia}}, backup: true}}
"""
BACKUP = re.compile(r"^(?P<name>nccl\.conf|daemon\.json)\.\d{8}T\d{6}(-\d+)?\.gpuconf~$")


def listing(lab) -> list[str]:
    return sorted(lab.exec("a100-01", ["ls", "-A", DIR])[1].split())


def backups(lab) -> dict[str, str]:
    found = {}
    for name in listing(lab):
        match = BACKUP.match(name)
        if match:
            found[match["name"]] = name
    return found


@pytest.fixture
def old_files(lab):
    """Two files of gpuadmin's, mode 0640, that the play replaces."""
    rc, out, err = lab.exec("a100-01", f"""set -e; mkdir -p {DIR}; cd {DIR}
printf 'NCCL_DEBUG=INFO\\n' > nccl.conf
printf '{{"data-root": "/srv/docker"}}\\n' > daemon.json
chown gpuadmin:gpuadmin nccl.conf daemon.json; chmod 0640 nccl.conf daemon.json""")
    assert rc == 0, out + err
    yield
    lab.exec("a100-01", ["rm", "-rf", "/var/tmp/gpuconf-rel"])


def test_backup_keeps_a_timestamped_copy_with_the_old_content_mode_and_owner(lab, tmp_path, old_files):
    inventory = write_inventory(lab, tmp_path / "hosts.yml", ["a100-01"])
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    check = check_run(lab, ["a100-01"], playbook, inventory)
    assert check.code == 2, check.stdout + check.stderr
    assert backups(lab) == {}

    apply = gpuconf("apply", playbook, inventory)
    no_traceback(apply)
    assert apply.code == 0, apply.stdout + apply.stderr
    assert apply.statuses("a100-01") == {"nccl.conf": "changed", "daemon.json": "changed"}
    kept = backups(lab)
    assert sorted(kept) == ["daemon.json", "nccl.conf"], listing(lab)
    assert node_file(lab, "a100-01", f"{DIR}/{kept['nccl.conf']}") == "NCCL_DEBUG=INFO\n"
    assert json.loads(node_file(lab, "a100-01", f"{DIR}/{kept['daemon.json']}")) == {"data-root": "/srv/docker"}
    assert node_file(lab, "a100-01", f"{DIR}/nccl.conf") == "NCCL_IB_HCA=mlx5\n"
    assert json.loads(node_file(lab, "a100-01", f"{DIR}/daemon.json")) == {"data-root": "/srv/docker",
                                                                            "default-runtime": "nvidia"}
    for name in (*kept.values(), "nccl.conf", "daemon.json"):
        assert lab.exec("a100-01", ["stat", "-c", "%a %U:%G", f"{DIR}/{name}"])[1].strip() == "640 gpuadmin:gpuadmin"
    assert len(listing(lab)) == 4, listing(lab)   # the files and their backups; no temp file left

    again = gpuconf("apply", playbook, inventory)
    assert again.code == 0 and set(again.statuses("a100-01").values()) == {"ok"}, again.stdout
    assert backups(lab) == kept and len(listing(lab)) == 4   # nothing replaced, nothing backed up
