"""What the image gives every node: offline apt, an admin user, and none of the machine's identity."""
from __future__ import annotations

from pathlib import Path

from gpuconf_lab.runtime import REPO_IN_IMAGE


def test_apt_sources_point_only_at_the_lab_repository(lab, ssh):
    rc, out, _ = ssh("a100-01", "test ! -e /etc/apt/sources.list && cat /etc/apt/sources.list.d/*")
    assert rc == 0
    sources = [line for line in out.splitlines() if line.strip() and not line.startswith("#")]
    assert sources and all(f"file:{REPO_IN_IMAGE}" in line for line in sources), sources
    assert any(Path("/etc/apt/sources.list.d").iterdir())   # the machine's own sources are still there
    rc, out, _ = ssh("a100-01", "apt-cache policy")
    assert rc == 0 and f"file:{REPO_IN_IMAGE}" in out
    assert "http" not in out, out


def test_gpuadmin_has_passwordless_sudo_and_no_password(lab, ssh):
    assert ssh("a100-01", "id -un; sudo -n id -un")[1] == "gpuadmin\nroot\n"
    assert ssh("a100-01", "sudo -n getent shadow gpuadmin | cut -d: -f2")[1] == "*\n"


def test_a_node_does_not_carry_the_machines_sshd_host_keys(lab, ssh):
    rc, out, _ = ssh("a100-01", "sudo ls /etc/ssh")
    assert rc == 0 and "ssh_host_" not in out


def test_the_fabric_directory_is_shared_by_the_nodes_and_the_machine(lab, ssh):
    name = "/run/gpuconf-lab-fabric/probe-from-a100-01"
    assert ssh("a100-01", f"echo sm | sudo tee {name} >/dev/null")[0] == 0
    try:
        assert ssh("t4-01", f"cat {name}")[1] == "sm\n"
        assert (lab.paths.fabric / Path(name).name).read_text() == "sm\n"
    finally:
        (lab.paths.fabric / Path(name).name).unlink()
