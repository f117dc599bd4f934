"""The apply floor: one hand-written script per host over one SSH session, then the reboot's wait.

    python bench/floor_apply.py HOSTS.json [--forks 50] [--script bench/peers/floor/apply.sh]

For each host, in a pool of --forks threads (gpuconf's default): connect as bench/floor.py does
(pinned host keys, public key), run `sudo -n sh -s` with the script on its stdin (the first host,
the fabric's subnet manager as in the lab's inventories, gets SUBNET_MANAGER=1), read its output,
close. The script prints the boot id first and ends by rebooting the node, detached; the host is
done when a new login reads another boot id. Logins are retried every --poll seconds from the
moment the session closed (gpuconf pauses 2 s, then polls every 1 s): the least waiting a
controller can do to know the node came back. `--first-pause 2 --poll 1` waits as gpuconf does
(bench/run.py's floor+wait row: how much of gpuconf's apply is that wait). Exit status 1 if any
host failed.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import paramiko
from floor import known_hosts

SCRIPT = Path(__file__).resolve().parent / "peers" / "floor" / "apply.sh"


def connect(host: dict) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client._system_host_keys = known_hosts(host["known_hosts"])
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(host["address"], host["port"], username=host["user"], key_filename=host["key"],
                   look_for_keys=False, allow_agent=False, timeout=30, banner_timeout=30, auth_timeout=30)
    return client


def run(client: paramiko.SSHClient, command: str, stdin: bytes = b"") -> tuple[int, str, str]:
    channel_in, stdout, stderr = client.exec_command(command)
    channel_in.write(stdin)
    channel_in.channel.shutdown_write()
    out, err = stdout.read().decode(errors="replace"), stderr.read().decode(errors="replace")
    return stdout.channel.recv_exit_status(), out, err


def one_host(host: dict, script: bytes, subnet_manager: bool, poll: float, timeout: float,
             first_pause: float = 0.0) -> str | None:
    name = host.get("name", host["address"])
    try:
        client = connect(host)
        try:
            env = "env SUBNET_MANAGER=1 " if subnet_manager else ""
            status, out, err = run(client, f"sudo -n {env}sh -s", script)
        finally:
            client.close()
        if status != 0:
            return f"{name}: the script exited {status}: {err.strip()[-500:]}"
        old_boot = out.split("\n", 1)[0].strip()
        until = time.monotonic() + timeout
        time.sleep(first_pause)
        while time.monotonic() < until:
            try:
                client = connect(host)
                try:
                    _, boot, _ = run(client, "cat /proc/sys/kernel/random/boot_id")
                finally:
                    client.close()
                if boot.strip() and boot.strip() != old_boot:
                    return None
            except (OSError, EOFError, paramiko.SSHException):
                pass
            time.sleep(poll)
        return f"{name}: no new boot within {timeout:.0f} s"
    except Exception as exc:  # noqa: BLE001 - report every host, then fail
        return f"{name}: {type(exc).__name__}: {exc}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("hosts")
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--script", default=str(SCRIPT))
    parser.add_argument("--poll", type=float, default=0.25)
    parser.add_argument("--first-pause", type=float, default=0.0)
    parser.add_argument("--reboot-timeout", type=float, default=600)
    args = parser.parse_args()
    script = Path(args.script).read_bytes()
    hosts = json.loads(Path(args.hosts).read_text())
    for host in hosts:
        known_hosts(host["known_hosts"])
    with ThreadPoolExecutor(max_workers=max(1, min(args.forks, len(hosts)))) as pool:
        errors = [e for e in pool.map(lambda ih: one_host(ih[1], script, ih[0] == 0, args.poll, args.reboot_timeout,
                                                                  args.first_pause),
                                      enumerate(hosts)) if e]
    for error in errors:
        print(error, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
