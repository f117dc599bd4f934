"""The `ansible-playbook` (and `ansible`, `ansible-*`) that a target's runme.sh finds on PATH.

    python -m tests.conformance.shim TOOL ARGS...     (tests/conformance/bin/TOOL runs this)

Each call is one run of the target, numbered in the order the target makes them
(CONFORMANCE_LOG/count). In the oracle pass (CONFORMANCE_MODE=oracle) the shim runs ansible-core's
own tool and records what it printed and its exit status. In the gpuconf pass it runs gpuconf on the
same files with the same arguments (gpuconf_argv) and prints the result as Ansible's default output
does (tests/conformance/ansible_output.py), so that the target's own checks (grep, diff, exit status)
judge gpuconf as they judge Ansible. Where gpuconf's exit status differs from the oracle's (one
succeeds, the other fails), the run has failed already: the shim prints what the oracle printed and
exits as it did, so that the target goes on to its next run instead of stopping there. The helper
tools (ansible-config, ansible-inventory, ...) are no runs: the oracle's output is replayed.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.conformance.ansible_output import render_adhoc, render_playbook
from tests.conformance.translate import Refusal, adhoc_playbook, gpuconf_argv, untranslated

RUNS = ("ansible-playbook", "ansible")   # a run of the target; the other tools are helpers
TIMEOUT = 600


def next_index(log: Path) -> int:
    with open(log / "count", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        index = int(handle.read().strip() or 0) + 1
        handle.seek(0)
        handle.truncate()
        handle.write(str(index))
    return index


def emit(stdout: str, stderr: str) -> None:
    sys.stdout.write(stdout)
    sys.stdout.flush()
    sys.stderr.write(stderr)
    sys.stderr.flush()


def run_oracle(tool: str, args: list[str]) -> dict[str, Any]:
    real = Path(os.environ["CONFORMANCE_ANSIBLE_BIN"]) / tool
    try:
        done = subprocess.run([str(real), *args], capture_output=True, text=True, timeout=TIMEOUT,
                              errors="replace")
        return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
    except subprocess.TimeoutExpired as exc:
        return {"rc": 124, "stdout": str(exc.stdout or ""), "stderr": f"timed out after {TIMEOUT} s"}


def exit_class(rc: int) -> str:
    return "ok" if rc == 0 else "failed"


def run_gpuconf(tool: str, args: list[str], work: Path) -> dict[str, Any]:
    """gpuconf on the run's files: its exit status mapped to Ansible's, its result printed as Ansible
    prints one; `kind` says what happened (ok, failed, refused, crashed, unsupported)."""
    report = work / "report.json"
    try:
        if tool == "ansible":
            playbook = adhoc_playbook(args, work)
            argv, verbosity = gpuconf_argv(playbook.argv, os.environ, report)
        else:
            argv, verbosity = gpuconf_argv(args, os.environ, report)
    except Refusal as exc:
        return {"rc": 1, "stdout": "", "stderr": f"ERROR! {exc}\n", "kind": "unsupported", "why": str(exc)}
    python = os.environ.get("CONFORMANCE_GPUCONF_PYTHON", sys.executable)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if os.environ.get("CONFORMANCE_GPUCONF_PATH"):   # another checkout's gpuconf (the table's "before")
        env["PYTHONPATH"] = os.environ["CONFORMANCE_GPUCONF_PATH"]
    try:
        done = subprocess.run([python, "-m", "gpuconf", *argv], capture_output=True, text=True, timeout=TIMEOUT,
                              errors="replace", env=env)
    except subprocess.TimeoutExpired:
        return {"rc": 124, "stdout": "", "stderr": f"gpuconf timed out after {TIMEOUT} s", "kind": "failed",
                "why": "timed out"}
    code = done.returncode
    crashed = "Traceback (most recent call last)" in done.stderr or "internal error" in done.stderr
    if code == 1 or not report.exists() or "--list-tasks" in argv or "--list-hosts" in argv \
            or "--syntax-check" in argv:
        if code == 1:   # refused at load: Ansible's wording for an error
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            why = lines[-1] if lines else done.stdout.strip()[-300:]
            kind = "crashed" if crashed else "refused"
            return {"rc": 1, "stdout": done.stdout, "stderr": "".join(f"ERROR! {line}\n" for line in lines),
                    "kind": kind, "why": why, "gpuconf_rc": code}
        rc = 0 if code in (0, 2) else 2
        return {"rc": rc, "stdout": done.stdout, "stderr": done.stderr, "kind": "ok" if rc == 0 else "failed",
                "why": "", "gpuconf_rc": code}
    data = json.loads(report.read_text())
    # gpuconf's warnings as Ansible prints its own
    done.stderr = re.sub(r"(?m)^gpuconf: warning: ", "[WARNING]: ", done.stderr)
    rc = (2 if code & 4 else 0) | (4 if code & 8 else 0)
    stdout = render_adhoc(data, verbosity) if tool == "ansible" else render_playbook(data, verbosity, argv[1])
    kind = "crashed" if crashed or any(t.get("traceback") for h in data["hosts"].values() for t in h["tasks"]) \
        else "ok" if rc == 0 else "failed"
    why = next((f"{t['task']}: {t['error']}" for h in data["hosts"].values() for t in h["tasks"]
                if t["status"] in ("failed", "unknown", "unreachable") and t["error"]), "")
    return {"rc": rc, "stdout": stdout, "stderr": done.stderr, "kind": kind, "why": why, "gpuconf_rc": code}


def main(argv: list[str]) -> int:
    tool, args = Path(argv[0]).name, argv[1:]
    os.environ.pop("PYTHONPATH", None)   # set for the shim alone (bin/ansible-playbook)
    log = Path(os.environ["CONFORMANCE_LOG"])
    mode = os.environ["CONFORMANCE_MODE"]
    index = next_index(log)
    record: dict[str, Any] = {"index": index, "tool": tool, "argv": args, "cwd": os.getcwd(), "run": tool in RUNS,
                              "env": {k: v for k, v in os.environ.items() if k.startswith("ANSIBLE_")}}
    if mode == "oracle":
        record.update(run_oracle(tool, args))
        out = record
    else:
        oracle_file = Path(os.environ["CONFORMANCE_ORACLE_LOG"]) / "runs" / f"{index}.json"
        oracle = json.loads(oracle_file.read_text()) if oracle_file.exists() else None
        record["oracle_rc"] = None if oracle is None else oracle["rc"]
        if tool not in RUNS:   # a helper: what the oracle's printed
            out = oracle or {"rc": 127, "stdout": "", "stderr": f"{tool}: no oracle record for call {index}\n"}
            record.update(rc=out["rc"], kind="helper")
        else:
            with tempfile.TemporaryDirectory(prefix="shim-", dir=log) as work:
                result = run_gpuconf(tool, args, Path(work))
            record.update(result, settings=untranslated(os.environ))
            out = result
            if oracle is not None and exit_class(result["rc"]) != exit_class(oracle["rc"]):
                record["replayed"] = True   # failed already; the target goes on with the oracle's output
                out = oracle
    (log / "runs").mkdir(exist_ok=True)
    (log / "runs" / f"{index}.json").write_text(json.dumps(record))
    emit(out["stdout"], out["stderr"])
    return int(out["rc"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
