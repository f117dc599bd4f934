"""A reboot ends every session, clears volatile state and comes back with a new boot id."""
from __future__ import annotations

from tests.lab_fixtures import ssh_client, ssh_run, wait_until

BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


def test_reboot_ends_sessions_clears_volatile_state_and_changes_the_boot_id(lab):
    client = ssh_client(lab, "a100-02")
    boots = lab.node_state("a100-02")["boots"]
    try:
        rc, old_boot_id, _ = ssh_run(client, f"touch /tmp/volatile ~/persistent && sudo touch /run/volatile && {BOOT_ID}")
        assert rc == 0
        _, stdout, _ = client.exec_command("sleep 60; echo survived")
        # what the simulated `reboot` does (docs/lab-contract.md): SIGUSR1 to PID 1, from inside
        reboot = ssh_client(lab, "a100-02")
        reboot.exec_command("sudo -n kill -USR1 1")
        assert stdout.channel.status_event.wait(10), "the session outlived the reboot"
        assert stdout.read() == b""
        reboot.close()
    finally:
        client.close()
    lab.wait_ssh("a100-02", timeout=30)
    assert lab.node_state("a100-02")["boots"] == boots + 1
    client = ssh_client(lab, "a100-02")
    try:
        rc, new_boot_id, _ = ssh_run(client, BOOT_ID)
        assert rc == 0 and new_boot_id.strip() and new_boot_id != old_boot_id
        assert ssh_run(client, "ls /tmp/volatile /run/volatile")[0] != 0
        assert ssh_run(client, "ls ~/persistent")[0] == 0
        assert ssh_run(client, "mountpoint -q /run/gpuconf-lab-fabric")[0] == 0   # bound again in the new /run
        assert "sleep 60" not in ssh_run(client, "ps -eo args")[1]
    finally:
        ssh_run(client, "rm -f ~/persistent")
        client.close()


def test_the_api_reboot_brings_the_node_back_by_itself(lab):
    boots = lab.node_state("a100-02")["boots"]
    lab.reboot("a100-02")
    assert wait_until(lambda: lab.node_state("a100-02").get("boots") == boots + 1
                      and lab.node_state("a100-02").get("state") == "up", timeout=30)
    lab.wait_ssh("a100-02", timeout=30)
