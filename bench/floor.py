"""The paramiko floor: connect to every host and run one command, in threads.

    python bench/floor.py HOSTS.json [--forks 50] [--command true]
    python bench/floor.py HOSTS.json --command-file CMD --stdin-file BYTES   (floor + request)
    python bench/floor.py HOSTS.json --command-file READS                    (floor + reads)

HOSTS.json is a list of {"address", "port", "user", "key", "known_hosts"}. Each host gets what any
SSH tool must do at least: a TCP connection, the key exchange, strict host key checking against
the pinned known_hosts (parsed once for all hosts), public key authentication, one session channel running one command, and
a clean close. The pool has as many threads as gpuconf's default --forks, so both pay the same
concurrency. Exit status 1 if any host failed.

With --command-file and --stdin-file it runs that command and sends those bytes on its stdin,
then reads all of its output: bench/capture_request.py saves gpuconf's own first request that way.
With --command-file alone it runs that command line: bench/floor_reads.py writes issue 17's floor,
one line that reads the same state as a no-op check, each class of it once.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import paramiko


def one_host(host: dict, command: str, stdin: bytes | None = None) -> str | None:
    client = paramiko.SSHClient()
    client._system_host_keys = known_hosts(host["known_hosts"])  # parsed once, as gpuconf does
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(host["address"], host["port"], username=host["user"], key_filename=host["key"],
                       look_for_keys=False, allow_agent=False, timeout=30, banner_timeout=30, auth_timeout=30)
        channel_in, stdout, stderr = client.exec_command(command)
        if stdin is not None:
            channel_in.write(stdin)
            channel_in.channel.shutdown_write()
        stdout.read()
        stderr.read()
        status = stdout.channel.recv_exit_status()
        return None if status == 0 else f"{host['address']}: exit {status}"
    except Exception as exc:  # noqa: BLE001 - report every host, then fail
        return f"{host['address']}: {type(exc).__name__}: {exc}"
    finally:
        client.close()


@functools.cache
def known_hosts(path: str) -> paramiko.HostKeys:
    return paramiko.HostKeys(path)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("hosts")
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--command", default="true")
    parser.add_argument("--command-file")
    parser.add_argument("--stdin-file")
    args = parser.parse_args()
    command = open(args.command_file).read() if args.command_file else args.command
    stdin = open(args.stdin_file, "rb").read() if args.stdin_file else None
    with open(args.hosts) as handle:
        hosts = json.load(handle)
    for host in hosts:
        known_hosts(host["known_hosts"])
    with ThreadPoolExecutor(max_workers=max(1, min(args.forks, len(hosts)))) as pool:
        errors = [e for e in pool.map(lambda h: one_host(h, command, stdin), hosts) if e]
    for error in errors:
        print(error, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
