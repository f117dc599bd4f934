"""Capture the first request gpuconf sends a host: its command line and its stdin bytes.

    .venv/bin/python bench/capture_request.py OUT_DIR check PLAYBOOK -i INV --limit HOST

The "floor + request" row replays exactly these bytes over a bare paramiko connection
(bench/floor.py --command-file/--stdin-file): the same remote work as gpuconf's no-op check, with
none of gpuconf's own controller work, so that the two rows together say how much of gpuconf's
time is the engine and how much is the work on the host.
"""
from __future__ import annotations

import sys
from pathlib import Path

import paramiko

from gpuconf.cli.main import main

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
captured: dict[str, bytes] = {}
exec_command, sendall = paramiko.Channel.exec_command, paramiko.Channel.sendall


def capture_exec(self, command):
    captured.setdefault("command", command.encode() if isinstance(command, str) else command)
    return exec_command(self, command)


def capture_send(self, data):
    if "stdin" not in captured and "command" in captured:
        captured["stdin"] = bytes(data)
    return sendall(self, data)


paramiko.Channel.exec_command = capture_exec
paramiko.Channel.sendall = capture_send
code = main(sys.argv[2:])
for name, data in captured.items():
    (out / name).write_bytes(data)
sys.exit(0 if {"command", "stdin"} <= set(captured) else 1)
