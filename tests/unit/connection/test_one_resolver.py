"""Every verb reaches a host the same way (gpuconf/connection/resolve.py): the become password
(GPUCONF_BECOME_PASSWORD or -K), the connection variables of -e and the project's become reach
remediate's serial read, its GPU reset and its evidence bundle, `gpuconf collect` and `gpuconf
facts`, as they reach check and apply. Each test stops at the SSH connection's first step (what it
was told to connect with); nothing here connects anywhere."""
from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import pytest

from gpuconf.cli.main import main
from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.ssh import SSHConnection
from gpuconf.engine.options import RunOptions
from gpuconf.errors import ConnectError
from gpuconf.inventory.hosts import load_inventory
from gpuconf.playbook.loader import load_playbook
from gpuconf.remediate.command import EngineHooks
from gpuconf.remediate.decision import RESET, Decision


class Stop(ConnectError):
    pass


@pytest.fixture
def opened(monkeypatch) -> list[ConnectionSpec]:
    """The specs the SSH connections were opened with; each open then fails, as a host down would."""
    specs: list[ConnectionSpec] = []

    def record(self: SSHConnection) -> None:
        specs.append(self.spec)
        raise Stop(f"cannot connect to {self.spec.host}: stopped by the test")

    monkeypatch.setattr(SSHConnection, "open", record)
    monkeypatch.setattr(SSHConnection, "_connect", record)
    return specs


def project(tmp_path: Path) -> tuple[Path, Path]:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    n1: {ansible_host: 10.0.0.9, ansible_user: ops}\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text(textwrap.dedent("""\
        - hosts: all
          gather_facts: false
          tasks:
            - name: fine
              assert: {that: "true"}
        """))
    return inventory, playbook


def hooks(tmp_path: Path, options: RunOptions) -> EngineHooks:
    inventory, playbook = project(tmp_path)
    loaded = load_playbook(playbook, tmp_path)
    return EngineHooks(load_inventory(str(inventory)), loaded, None, options, threading.Event(), tmp_path / "state")


def test_remediates_serial_read_reset_and_bundle_carry_the_become_password_and_the_extra_vars(tmp_path, opened):
    options = RunOptions(become_password="s3cret", become=True, extra_vars={"ansible_port": 2222})
    remediation = hooks(tmp_path, options)
    decision = Decision("reset_gpu", RESET, "Xid 79", "xid_catalog.csv: 79", buses=("0000:17:00.0",))
    assert remediation.serials("n1") == {}  # unreachable: the serials stay unknown
    for step in (lambda: remediation.collect("n1"), lambda: remediation.node_action("n1", "reset", decision)):
        with pytest.raises(ConnectError):
            step()
    assert len(opened) == 3
    for spec in opened:
        assert spec.become_password is not None and spec.become_password.get_secret_value() == "s3cret"
        assert (spec.address, spec.port, spec.user, spec.become) == ("10.0.0.9", 2222, "ops", True)


def test_collect_and_facts_carry_the_become_password_from_the_environment(tmp_path, opened, monkeypatch, capsys):
    inventory, _ = project(tmp_path)
    monkeypatch.setenv("GPUCONF_BECOME_PASSWORD", "s3cret")
    main(["collect", "n1", "-i", str(inventory), "--state-dir", str(tmp_path / "state")])
    main(["facts", "n1", "-i", str(inventory)])
    capsys.readouterr()
    assert [spec.host for spec in opened] == ["n1", "n1"]
    for spec in opened:
        assert spec.become_password is not None and spec.become_password.get_secret_value() == "s3cret"


def test_check_and_the_other_verbs_resolve_a_host_alike(tmp_path, opened, monkeypatch, capsys):
    """The same spec from `check` (the runner) and from remediate's own connections."""
    inventory, playbook = project(tmp_path)
    # a play that asks its host something (an assert alone never connects, as in Ansible)
    playbook.write_text(playbook.read_text().replace("gather_facts: false", "gather_facts: true"))
    monkeypatch.setenv("GPUCONF_BECOME_PASSWORD", "s3cret")
    main(["check", str(playbook), "-i", str(inventory), "-e", "ansible_port=2222", "--no-retry-file"])
    capsys.readouterr()
    remediation = hooks(tmp_path, RunOptions(become_password="s3cret", extra_vars={"ansible_port": 2222}))
    remediation.serials("n1")
    assert len(opened) == 2 and opened[0] == opened[1]
