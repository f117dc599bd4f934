"""The runner that serves a host's run (gpuconf/connection/served.py, SERVE_BOOTSTRAP): started as
SSH would start it, it reads the script up to the separator's line, skipping a sudo password line
before it, then answers one request per line, each up to its done line, until stdin closes."""
from __future__ import annotations

import json
import subprocess
import sys

from gpuconf.connection.base import SEPARATOR, SERVE_BOOTSTRAP, START, runner_script


def replies(text: str) -> list[list[dict]]:
    """The reply lines, split at each done line."""
    requests, current = [], []
    for line in text.splitlines():
        current.append(json.loads(line))
        if "done" in current[-1]:
            requests.append(current)
            current = []
    assert not current, text
    return requests


def test_one_runner_answers_each_request_in_turn_until_stdin_closes():
    preamble = "not-a-password-sudo-did-not-read\n" + START + runner_script() + SEPARATOR
    first = {"readonly": False, "ops": [{"op": "run", "cmd": "echo one"}]}
    second = {"readonly": False, "ops": [{"op": "run", "cmd": "echo two", "check": False}, {"op": "no-such-op"}]}
    third = {"readonly": True, "ops": [{"op": "run", "cmd": "echo three"}]}  # each request's own readonly
    done = subprocess.run([sys.executable, "-B", "-S", "-c", SERVE_BOOTSTRAP], text=True, capture_output=True,
                          input=preamble + json.dumps(first) + "\n\n" + json.dumps(second) + "\n" + json.dumps(third)
                          + "\n", timeout=60)
    assert done.returncode == 0, done.stderr
    one, two, three = replies(done.stdout)
    assert one[0]["i"] == 0 and one[0]["out"] == "one\n" and one[-1] == {"done": True}
    assert two[0]["out"] == "two\n" and two[1] == {"i": 1, "error": "unknown op 'no-such-op'"}, two
    assert three == [{"i": 0, "error": "refused: 'run' in a read-only (check) request"}, {"done": True}], three
