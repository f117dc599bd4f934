"""`lab reset` returns a node to a fresh image and keeps its identity (address, host key)."""
from __future__ import annotations

from tests.lab_fixtures import ssh_client, ssh_run


def test_reset_gives_a_fresh_filesystem_with_the_same_host_key(lab, fresh_digests):
    client = ssh_client(lab, "t4-01")
    try:
        host_key = client.get_transport().get_remote_server_key()
        rc, _, err = ssh_run(client, "sudo touch /etc/gpuconf-reset-probe && sudo rm /etc/issue && touch ~/mine")
        assert rc == 0, err
    finally:
        client.close()
    assert lab.digest("t4-01") != fresh_digests["t4-01"]
    lab.reset("t4-01")
    assert lab.digest("t4-01") == fresh_digests["t4-01"]
    client = ssh_client(lab, "t4-01")   # strict host key checking: the pinned key still matches
    try:
        assert client.get_transport().get_remote_server_key() == host_key
        assert ssh_run(client, "ls /etc/gpuconf-reset-probe ~/mine")[0] != 0
        assert ssh_run(client, "test -f /etc/issue")[0] == 0
        assert ssh_run(client, "cat /etc/gpuconf-lab/node.json")[1].startswith('{"name": "t4-01"')
    finally:
        client.close()
