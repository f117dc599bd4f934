"""Issue 37: a node whose sudo wants a password. The become password (GPUCONF_BECOME_PASSWORD,
or -K) reaches `gpuconf collect` and remediate's GPU reset as it reaches check and apply: one
connection resolver (gpuconf/connection/resolve.py). Before, both built their own connection
without it and failed with "sudo wants a password". The login `pwsudo` is made for the test on
a100-02 (sudo with its password: no NOPASSWD) and removed after it."""
from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import yaml

from gpuconf.engine.options import RunOptions
from gpuconf.errors import RemoteError
from gpuconf.inventory.hosts import load_inventory
from gpuconf.playbook.loader import load_playbook
from gpuconf.remediate.command import EngineHooks
from gpuconf.remediate.decision import RESET, Decision

NODE = "a100-02"
USER, PASSWORD = "pwsudo", "lab-sudo-pw-37"
# the lab's client key logs in as any user of a node (its sshd's second AuthorizedKeysFile)
MAKE = (f"{{ userdel -r {USER}; true; }} 2>/dev/null; useradd -m -s /bin/bash {USER} && "
        f"echo '{USER}:{PASSWORD}' | chpasswd && "
        f"echo '{USER} ALL=(ALL) ALL' > /etc/sudoers.d/{USER} && chmod 440 /etc/sudoers.d/{USER}")
REMOVE = f"rm -f /etc/sudoers.d/{USER}; userdel -r {USER} 2>/dev/null; true"


@pytest.fixture
def password_sudo(lab, tmp_path):
    """An inventory whose a100-02 logs in as a user whose sudo asks for its password."""
    rc, _, err = lab.exec(NODE, MAKE)
    assert rc == 0, err
    data = yaml.safe_load(lab.inventory_path.read_text())
    found = [group for group in [data["all"], *data["all"].get("children", {}).values()]
             if NODE in (group.get("hosts") or {})]
    host = dict(found[0]["hosts"][NODE] or {})
    shared = {k: v for k, v in (data["all"].get("vars") or {}).items()}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": shared, "hosts": {NODE: {
        **host, "ansible_user": USER, "user": USER, "become": True}}}}))
    yield inventory
    lab.exec(NODE, REMOVE)


def collect(inventory, state, password: str | None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin"} | ({"GPUCONF_BECOME_PASSWORD": password} if password else {})
    return subprocess.run([sys.executable, "-m", "gpuconf", "collect", NODE, "-i", str(inventory),
                           "--state-dir", str(state)], capture_output=True, text=True, timeout=600, env=env)


def test_collect_and_remediates_reset_use_the_become_password(password_sudo, tmp_path):
    without = collect(password_sudo, tmp_path / "a", None)
    assert without.returncode != 0 and "wants a password" in without.stderr, without.stdout + without.stderr
    given = collect(password_sudo, tmp_path / "b", PASSWORD)
    assert given.returncode == 0, given.stdout + given.stderr
    assert given.stdout.startswith(f"{NODE}: {tmp_path / 'b' / 'bundles'}")

    (tmp_path / "site.yml").write_text("- hosts: all\n  gather_facts: false\n  tasks: []\n")
    playbook = load_playbook(tmp_path / "site.yml", tmp_path)
    inventory = load_inventory(str(password_sudo))
    decision = Decision("reset_gpu", RESET, "Xid 79", "xid_catalog.csv: 79", buses=("0000:17:00.0",))

    def hooks(password: str | None) -> EngineHooks:
        return EngineHooks(inventory, playbook, None, RunOptions(become_password=password, lock_wait=5),
                           threading.Event(), tmp_path / "state")

    with pytest.raises(RemoteError, match="password"):
        hooks(None).node_action(NODE, "reset", decision)
    outcome = hooks(PASSWORD).node_action(NODE, "reset", decision)  # as root: the script reached nvidia-smi
    assert "did not report back" not in outcome.said and "password" not in outcome.said, outcome
