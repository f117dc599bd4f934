"""Run one fuzz case through `gpuconf.cli.main.main` and judge what the user would see.

Every verb must end in success, a host- or task-level result (exit 2, 4, 8 and
their combinations), or a clean `gpuconf: error: ...` with exit code 1. A
Python traceback, an "internal error", or exit 1 without an error line is a
defect. An error about a YAML file's content must say file:line:column.
"""
from __future__ import annotations

import contextlib
import io
import re
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from gpuconf.cli.main import main
from tests.fuzz.corpus import CONNECTION_FILE, Case

RESULT_BITS = 2 | 4 | 8 | 16
POSITION = re.compile(r"^gpuconf: error: (?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+): \S", re.M)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Outcome:
    verb: str
    code: int
    stdout: str
    stderr: str
    problem: str | None = None


def write_case(root: Path, case: Case, port: int) -> None:
    if root.exists():
        shutil.rmtree(root)
    for path, data in case.files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    connection = root / CONNECTION_FILE
    connection.parent.mkdir(parents=True, exist_ok=True)
    connection.write_text(f"address: 127.0.0.1\nport: {port}\nconnect_retries: 0\nconnect_timeout: 1\n"
                          "user: fuzz\n")


def call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def judge(verb: str, code: int, stdout: str, stderr: str, root: Path) -> str | None:
    """What is wrong with this outcome, or None."""
    text = stdout + stderr
    if "Traceback" in text:
        return "a Python traceback"
    if "internal error" in text:
        return "an internal error"
    if code == 1:
        errors = [line for line in stderr.splitlines() if line.startswith("gpuconf: error: ")]
        if not errors:
            return "exit 1 without a 'gpuconf: error:' line"
        first = errors[0]
        if f"{root}/" in first and "YAML" in first and not POSITION.search(first):
            return "a YAML error without file:line:column"
        return None
    allowed = {0, 1} if verb == "validate" else None
    if allowed is not None and code not in allowed:
        return f"exit {code} from validate"
    if code != 0 and code & ~RESULT_BITS:
        return f"exit {code} is not a result bitmask"
    return None


def run_case(case: Case, root: Path, port: int, verbs: tuple[str, ...] = ("validate", "check", "apply")) -> list[Outcome]:
    write_case(root, case, port)
    site, inventory = str(root / "site.yml"), str(root / "inventory" / "hosts.yml")
    outcomes = []
    for verb in verbs:
        extra = [f"@{root}/{e[1:]}" if e.startswith("@") else e for e in case.extra]
        argv = [verb, site, "-i", inventory, *extra]
        if case.limit:
            argv += ["--limit", case.limit]
        if verb != "validate":
            argv += ["--forks", "4", "--lock-wait", "1"]
        code, out, err = call(argv)
        outcomes.append(Outcome(verb, code, out, err, judge(verb, code, out, err, root)))
    return outcomes


def describe(case: Case, outcome: Outcome) -> str:
    return (f"{outcome.verb}: {outcome.problem} (exit {outcome.code})\nmutations: {case.mutations}\n"
            f"limit={case.limit} extra={case.extra}\n--- stderr ---\n{outcome.stderr[-3000:]}\n"
            f"--- stdout ---\n{outcome.stdout[-1500:]}")
