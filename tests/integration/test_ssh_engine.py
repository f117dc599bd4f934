"""The engine end to end over a real sshd: converge, idempotence, read-only check."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

GPUCONF = [sys.executable, "-m", "gpuconf"]


def gpuconf(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*GPUCONF, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def digest(root: Path) -> str:
    """Paths, modes, owners and contents of everything under root."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        h.update(f"{path.relative_to(root)} {st.st_mode:o} {st.st_uid}:{st.st_gid}\n".encode())
        if path.is_file() and not path.is_symlink():
            h.update(path.read_bytes())
    return h.hexdigest()


PLAYBOOK = """
- name: converge a target tree
  hosts: all
  vars:
    greeting: hello
  tasks:
    - name: config file
      file:
        path: "{{ target }}/etc/app.conf"
        content: "greeting={{ greeting }}\\nhost={{ inventory_hostname }}\\n"
        mode: "0640"
      notify: record restart
    - name: directory
      directory: {path: "{{ target }}/var/lib/app", mode: "0750"}
    - name: a line
      line: {path: "{{ target }}/etc/limits", line: "memlock=unlimited", regexp: "^memlock="}
    - name: one-off command
      command: {cmd: ["sh", "-c", "echo done > {{ target }}/var/lib/app/marker"],
                creates: "{{ target }}/var/lib/app/marker"}
  handlers:
    - name: record restart
      line: {path: "{{ target }}/restarts", line: "restarted"}
"""


@pytest.fixture()
def project(tmp_path: Path, sshd):
    target = tmp_path / "target"
    (target / "etc").mkdir(parents=True)
    (target / "etc" / "limits").write_text("memlock=64\nnofile=1024\n")
    (tmp_path / "site.yml").write_text(PLAYBOOK)
    inventory = sshd.inventory(tmp_path / "hosts.yml")
    inventory.write_text(inventory.read_text() + f"  vars:\n    target: {target}\n")
    return tmp_path, target


def test_apply_converges_and_second_apply_changes_nothing(project):
    root, target = project
    first = gpuconf("apply", str(root / "site.yml"), "-i", str(root / "hosts.yml"), "--detailed-exitcodes")
    assert first.returncode == 2, first.stdout + first.stderr
    assert (target / "etc" / "app.conf").read_text() == "greeting=hello\nhost=target\n"
    assert oct((target / "etc" / "app.conf").stat().st_mode & 0o777) == "0o640"
    assert (target / "etc" / "limits").read_text() == "memlock=unlimited\nnofile=1024\n"
    assert (target / "var" / "lib" / "app" / "marker").read_text() == "done\n"
    assert (target / "restarts").read_text() == "restarted\n"
    second = gpuconf("apply", str(root / "site.yml"), "-i", str(root / "hosts.yml"), "--detailed-exitcodes")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "changed=0" in second.stdout
    check = gpuconf("check", str(root / "site.yml"), "-i", str(root / "hosts.yml"))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "1/1 in sync" in check.stdout


def test_check_reports_drift_and_never_modifies_the_target(project):
    root, target = project
    before = digest(target)
    check = gpuconf("check", str(root / "site.yml"), "-i", str(root / "hosts.yml"), "--diff")
    assert check.returncode == 2, check.stdout + check.stderr
    assert "would change: [target] config file" in check.stdout
    assert "+greeting=hello" in check.stdout  # --diff shows the content
    assert "-memlock=64" in check.stdout and "+memlock=unlimited" in check.stdout
    assert digest(target) == before
    gpuconf("apply", str(root / "site.yml"), "-i", str(root / "hosts.yml"))
    (target / "etc" / "app.conf").write_text("edited by hand\n")
    converged = digest(target)
    drift = gpuconf("check", str(root / "site.yml"), "-i", str(root / "hosts.yml"))
    assert drift.returncode == 2
    assert "update content of" in drift.stdout
    assert digest(target) == converged


def test_one_connection_and_two_round_trips_for_a_noop_check(project, tmp_path):
    root, _ = project
    gpuconf("apply", str(root / "site.yml"), "-i", str(root / "hosts.yml"))
    report = tmp_path / "report.json"
    check = gpuconf("check", str(root / "site.yml"), "-i", str(root / "hosts.yml"), "--report", str(report))
    assert check.returncode == 0, check.stdout + check.stderr
    import json

    host = json.loads(report.read_text())["hosts"]["target"]
    assert host["connections"] == 1
    assert host["round_trips"] <= 2


def test_unknown_host_key_is_refused_unless_accepted(project, tmp_path, sshd):
    root, _ = project
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    inventory = sshd.inventory(tmp_path / "strict.yml", known_hosts=empty)
    inventory.write_text(inventory.read_text() + f"  vars:\n    target: {root / 'target'}\n")
    refused = gpuconf("check", str(root / "site.yml"), "-i", str(inventory))
    assert refused.returncode == 8, refused.stdout + refused.stderr
    assert "is not known" in refused.stdout and "--accept-new-host-keys" in refused.stdout
    assert empty.read_text() == ""
    accepted = gpuconf("check", str(root / "site.yml"), "-i", str(inventory), "--accept-new-host-keys")
    assert accepted.returncode == 2, accepted.stdout + accepted.stderr
    assert empty.read_text().strip() == sshd.host_key_line.strip()


def test_changed_host_key_is_always_refused(project, tmp_path, sshd):
    root, _ = project
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    key_type, data = (tmp_path / "other_key.pub").read_text().split()[:2]
    wrong = tmp_path / "wrong_known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {key_type} {data}\n")
    inventory = sshd.inventory(tmp_path / "changed.yml", known_hosts=wrong)
    inventory.write_text(inventory.read_text() + f"  vars:\n    target: {root / 'target'}\n")
    result = gpuconf("check", str(root / "site.yml"), "-i", str(inventory), "--accept-new-host-keys")
    assert result.returncode == 8
    assert "CHANGED" in result.stdout and "SHA256:" in result.stdout


def test_unreachable_host_sets_bit_8_and_others_finish(project, tmp_path, sshd):
    root, target = project
    from tests.integration.conftest import free_port

    inventory = tmp_path / "two.yml"
    inventory.write_text(
        "all:\n  vars:\n"
        f"    target: {target}\n    user: root\n    ssh_key: {sshd.client_key}\n"
        f"    known_hosts_file: {sshd.known_hosts}\n    address: 127.0.0.1\n    connect_retries: 1\n"
        "    connect_timeout: 2\n"
        f"  hosts:\n    good:\n      port: {sshd.port}\n    dead:\n      port: {free_port()}\n"
    )
    result = gpuconf("check", str(root / "site.yml"), "-i", str(inventory))
    assert result.returncode == 2 | 8, result.stdout + result.stderr
    assert "UNREACHABLE: [dead]" in result.stdout
    assert "would change: [good] config file" in result.stdout
    assert "1 unreachable (dead)" in result.stdout


def test_jump_host_tunnels_through_a_bastion(project, tmp_path, sshd):
    """The bastion is the same sshd: the target is reached over a direct-tcpip channel."""
    root, target = project
    inventory = sshd.inventory(tmp_path / "jump.yml", f"      jump_host: root@127.0.0.1:{sshd.port}\n")
    inventory.write_text(inventory.read_text() + f"  vars:\n    target: {target}\n")
    log = sshd.root / "sshd.log"
    logins_before = log.read_text().count("Accepted publickey")
    result = gpuconf("apply", str(root / "site.yml"), "-i", str(inventory))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (target / "etc" / "app.conf").exists()
    # one login for the bastion, one for the target through the tunnel
    assert log.read_text().count("Accepted publickey") - logins_before == 2
