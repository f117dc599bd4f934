"""The upper-dir digest proves whether anything wrote to a node: sessions alone must not."""
from __future__ import annotations

from tests.lab_fixtures import ssh_client, ssh_run

READ_ONLY_COMMANDS = [
    "true",
    "sudo -n true",
    "cat /etc/os-release /etc/gpuconf-lab/node.json >/dev/null",
    "python3 -c 'import json, email.mime.text, http.client'",
    "sudo -n python3 -c 'import json, xml.dom.minidom, logging.handlers'",
    "sudo -n apt-cache policy >/dev/null",
    "dpkg-query -W >/dev/null",
]


def test_non_pty_sessions_and_sudo_leave_the_upper_dir_unchanged(lab):
    before = lab.digest("a100-01")
    client = ssh_client(lab, "a100-01")
    try:
        for command in READ_ONLY_COMMANDS:
            rc, _, err = ssh_run(client, command)
            assert rc == 0, f"{command}: {err}"
        # gpuconf's remote runner arrives on stdin; so does this stand-in.
        stdin, stdout, _ = client.exec_command("python3 -c 'import sys; exec(sys.stdin.read())'")
        stdin.write("import platform, json\nprint(json.dumps(platform.uname()._asdict()))\n")
        stdin.channel.shutdown_write()
        assert stdout.channel.recv_exit_status() == 0
    finally:
        client.close()
    assert lab.digest("a100-01") == before


def test_the_digest_sees_a_write_a_chmod_and_a_delete(lab, ssh):
    before = lab.digest("a100-01")
    assert ssh("a100-01", "sudo touch /etc/gpuconf-digest-probe")[0] == 0
    written = lab.digest("a100-01")
    assert written != before
    assert ssh("a100-01", "sudo chmod 600 /etc/gpuconf-digest-probe")[0] == 0
    assert lab.digest("a100-01") != written
    assert ssh("a100-01", "sudo rm /etc/gpuconf-digest-probe")[0] == 0
    assert lab.digest("a100-01") == before   # the file never existed below: no whiteout is left
