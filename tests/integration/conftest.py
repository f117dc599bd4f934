"""A real OpenSSH sshd on loopback, started once per test session.

It serves this machine's own filesystem: tests point their playbooks at a
temporary directory and digest it, so nothing else of the machine is touched.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Sshd:
    port: int
    client_key: Path
    host_key_line: str
    known_hosts: Path
    root: Path

    def inventory(self, path: Path, extra_vars: str = "", known_hosts: Path | None = None) -> Path:
        path.write_text(
            "all:\n"
            "  hosts:\n"
            "    target:\n"
            f"      address: 127.0.0.1\n      port: {self.port}\n      user: root\n"
            f"      ssh_key: {self.client_key}\n"
            f"      known_hosts_file: {known_hosts or self.known_hosts}\n"
            f"{extra_vars}"
        )
        return path


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> Sshd:
    if os.geteuid() != 0 or not Path(SSHD).exists():
        pytest.skip("needs root and openssh-server (make test installs it)")
    root = tmp_path_factory.mktemp("sshd")
    _keygen(root / "host_key")
    _keygen(root / "client_key")
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    port = free_port()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nPidFile {root / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\nPrintMotd no\nMaxStartups 100:30:200\nMaxSessions 100\n"
        "Subsystem sftp internal-sftp\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=open(root / "sshd.log", "w"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("sshd did not start: " + (root / "sshd.log").read_text())
    key_type, key_data = (root / "host_key.pub").read_text().split()[:2]
    line = f"[127.0.0.1]:{port} {key_type} {key_data}\n"
    known_hosts = root / "known_hosts"
    known_hosts.write_text(line)
    yield Sshd(port, root / "client_key", line, known_hosts, root)
    proc.terminate()
    proc.wait(5)
