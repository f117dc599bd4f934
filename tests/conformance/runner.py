"""Run ansible-core's integration targets twice, as ansible-test runs them: once with ansible-core
2.19.14 (the oracle) and once with gpuconf behind the same `ansible-playbook` (tests/conformance/shim.py),
each in a fresh copy of targets/, and judge every run.

As ansible-test does: the targets live in WORK/<pass>/integration/targets, `../../inventory` holds
`testhost` with a local connection, a target with runme.sh runs it from its own folder, one without
is a role applied by a generated playbook; OUTPUT_DIR is a fresh folder, the ANSIBLE_* settings are
ansible-test's. A run is one call of ansible-playbook or ansible. It passes when the target's checks
after it hold (preamble.sh records each that fails, with the run before it) and its exit status is
the oracle's (zero or not).
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
TARGETS = HERE / "targets"
BIN = HERE / "bin"
ANSIBLE_VENV = Path(os.environ.get("GPUCONF_ANSIBLE_VENV", ROOT / "tests" / ".ansible-venv"))
TARGET_TIMEOUT = 3600


@dataclass
class Run:
    index: int
    tool: str
    argv: list[str]
    where: str                      # the target's folder, or a path below it
    oracle: str                     # pass, fail (a check after it failed, or it exited otherwise)
    gpuconf: str = "not reached"    # pass, refused, failed, crashed, unsupported, not reached
    why: str = ""
    checks: list[str] = field(default_factory=list)   # the target's checks that failed after it (gpuconf)
    seconds: float = 0.0


@dataclass
class TargetResult:
    name: str
    runs: list[Run]
    oracle_seconds: float
    gpuconf_seconds: float
    note: str = ""


def integration_env(work: Path, mode: str, log: Path, oracle_log: Path) -> dict[str, str]:
    """ansible-test's environment for a target's script (its ansible_environment and
    integration_environment), plus the shim's own settings."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("ANSIBLE_", "GPUCONF_", "CONFORMANCE_", "PYTHON", "VIRTUAL_ENV", "BASH_ENV"))}
    pybin = work / "pybin"
    return {
        **base,
        "PATH": f"{BIN}:{pybin}:{base.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(work / "home"), "LC_ALL": "C.UTF-8", "PAGER": "/bin/cat",
        "ANSIBLE_FORCE_COLOR": "false", "ANSIBLE_FORCE_HANDLERS": "true", "ANSIBLE_HOST_PATTERN_MISMATCH": "error",
        "ANSIBLE_INVENTORY": "/dev/null", "ANSIBLE_DEPRECATION_WARNINGS": "false", "ANSIBLE_HOST_KEY_CHECKING": "false",
        "ANSIBLE_RETRY_FILES_ENABLED": "false", "ANSIBLE_CONFIG": str(work / "ansible.cfg"),
        "ANSIBLE_LIBRARY": "/dev/null", "ANSIBLE_DEVEL_WARNING": "false",
        "ANSIBLE_PYTHON_INTERPRETER": "/set/ansible_python_interpreter/in/inventory",
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"), "ANSIBLE_HOME": str(work / "home" / ".ansible"),
        "OUTPUT_DIR": str(work / "output"), "INVENTORY_PATH": str(work / "integration" / "inventory"),
        "JUNIT_OUTPUT_DIR": str(work / "junit"),
        "GPUCONF_CACHE_DIR": str(work / "gpuconf-cache"), "GPUCONF_STATE_DIR": str(work / "gpuconf-state"),
        "CONFORMANCE_MODE": mode, "CONFORMANCE_LOG": str(log), "CONFORMANCE_ORACLE_LOG": str(oracle_log),
        "CONFORMANCE_ROOT": str(ROOT), "CONFORMANCE_SHIM_PYTHON": sys.executable,
        "CONFORMANCE_GPUCONF_PYTHON": sys.executable, "CONFORMANCE_ANSIBLE_BIN": str(ANSIBLE_VENV / "bin"),
        "CONFORMANCE_EMPTY_INVENTORY": str(work / "empty-inventory"),
        "BASH_ENV": str(HERE / "preamble.sh"), "CONFORMANCE_GPUCONF_PATH": os.environ.get("CONFORMANCE_GPUCONF_PATH", ""), "LOCPATH": str(work.parent.parent / "locale"),
    }


def locales(folder: Path) -> None:
    """en_US.UTF-8, which the tags target asks for, compiled into `folder` (LOCPATH) if this
    machine lacks it: the machine's own locales are left alone."""
    if (folder / "en_US.UTF-8").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["localedef", "-i", "en_US", "-f", "UTF-8", str(folder / "en_US.UTF-8")], check=False,
                   capture_output=True)


def prepare(work: Path) -> None:
    """A fresh integration folder, as ansible-test lays one out."""
    locales(work.parent.parent / "locale")
    if work.exists():
        shutil.rmtree(work)
    integration = work / "integration"
    shutil.copytree(TARGETS, integration / "targets", symlinks=True)
    python = ANSIBLE_VENV / "bin" / "python"
    (integration / "inventory").write_text(
        "[testgroup]\ntesthost ansible_connection=local ansible_pipelining=yes "
        f"ansible_python_interpreter={shlex.quote(str(python))}\n")  # the clone may live at a path with a space
    for folder in ("output", "home", "tmp", "junit", "pybin", "gpuconf-cache", "gpuconf-state"):
        (work / folder).mkdir(parents=True, exist_ok=True)
    (work / "ansible.cfg").write_text("")
    (work / "empty-inventory").write_text("")
    for name in ("python", "python3"):   # the targets' own helper scripts (#!/usr/bin/env python)
        (work / "pybin" / name).symlink_to(python)


def command(target: str, work: Path) -> tuple[list[str], Path]:
    """How ansible-test runs the target: its runme.sh, or its role in a generated playbook."""
    folder = work / "integration" / "targets" / target
    if (folder / "runme.sh").exists():
        return ["./runme.sh"], folder
    play = {"hosts": "testhost", "gather_facts": True, "vars_files": [], "vars": {"output_dir": str(work / "output")},
            "roles": [target]}
    playbook = work / "integration" / f"{target}-conformance.yml"
    playbook.write_text(json.dumps([play], indent=4, sort_keys=True))
    line = f"set -e; ANSIBLE_ROLES_PATH={work / 'integration' / 'targets'} ansible-playbook {playbook.name} -i inventory"
    return ["bash", "-c", line], work / "integration"


def private_run(argv: list[str]) -> list[str]:
    """As root, the pass runs with a /run of its own (a mount namespace): gpuconf's run lock,
    /run/gpuconf.lock, is this machine's, and other runs of gpuconf on it must neither wait for
    the targets' runs nor hold them up. Without root the lock is the user's own already."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return argv
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        return argv
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs tmpfs /run && exec "$0" "$@"', *argv]


def run_pass(target: str, work: Path, mode: str, oracle_log: Path) -> tuple[Path, float]:
    prepare(work)
    log = work / "log"
    log.mkdir()
    argv, cwd = command(target, work)
    argv = private_run(argv)
    started = time.monotonic()
    with open(log / "script.out", "w") as out:
        try:
            subprocess.run(argv, cwd=cwd, env=integration_env(work, mode, log, oracle_log), stdout=out,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=TARGET_TIMEOUT)
        except subprocess.TimeoutExpired:
            (log / "failures").open("a").write(f"{_count(log)}\t-\t-\ttarget timed out\n")
    return log, time.monotonic() - started


def _count(log: Path) -> int:
    try:
        return int((log / "count").read_text().strip() or 0)
    except FileNotFoundError:
        return 0


def _failures(log: Path) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    path = log / "failures"
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            index, _, rest = line.partition("\t")
            source, _, rest = rest.partition("\t")
            lineno, _, what = rest.partition("\t")
            found.setdefault(int(index or 0), []).append(f"{Path(source).name}:{lineno}: {what}")
    return found


def _records(log: Path) -> dict[int, dict[str, Any]]:
    folder = log / "runs"
    if not folder.exists():
        return {}
    return {int(p.stem): json.loads(p.read_text()) for p in folder.glob("*.json")}


def judge(target: str, oracle_log: Path, gpuconf_log: Path, work: Path) -> list[Run]:
    oracle, gpuconf = _records(oracle_log), _records(gpuconf_log)
    oracle_failed, gpuconf_failed = _failures(oracle_log), _failures(gpuconf_log)
    root = str(work)
    runs = []
    for index in sorted(oracle):
        record = oracle[index]
        if not record["run"]:
            continue
        where = record["cwd"].split("/integration/targets/", 1)[-1]
        run = Run(index, record["tool"], [a.replace(root + "/oracle", "WORK") for a in record["argv"]], where,
                  "fail" if index in oracle_failed else "pass")
        mine = gpuconf.get(index)
        if mine is not None:
            run.checks = gpuconf_failed.get(index, [])
            if mine.get("replayed") or mine.get("kind") in ("unsupported", "crashed"):
                kind = mine.get("kind", "failed")
                run.gpuconf = kind if kind in ("refused", "crashed", "unsupported") else "failed"
                run.why = mine.get("why", "") or f"exit status {mine.get('rc')} where Ansible's was {record['rc']}"
            elif run.checks:
                run.gpuconf = "failed"
                run.why = mine.get("why", "") or f"the target's check failed: {run.checks[0]}"
            else:
                run.gpuconf = "pass"
            if run.gpuconf != "pass" and mine.get("settings"):   # what gpuconf was not told
                run.why += f" [Ansible settings gpuconf has no equivalent of: {', '.join(mine['settings'])}]"
        runs.append(run)
    return runs


def run_target(target: str, work_root: Path, reuse_oracle: bool = False) -> TargetResult:
    """Both passes of a target; with `reuse_oracle`, the oracle's pass of an earlier call with the
    same work folder, where there is one (its runs do not change while gpuconf does)."""
    work = work_root / target
    done = work / "oracle" / "log" / "done"
    if reuse_oracle and done.exists():
        oracle_log, oracle_seconds = work / "oracle" / "log", float(done.read_text())
    else:
        oracle_log, oracle_seconds = run_pass(target, work / "oracle", "oracle", work / "oracle" / "log")
        done.write_text(str(oracle_seconds))
    gpuconf_log, gpuconf_seconds = run_pass(target, work / "gpuconf", "gpuconf", oracle_log)
    runs = judge(target, oracle_log, gpuconf_log, work)
    return TargetResult(target, runs, round(oracle_seconds, 1), round(gpuconf_seconds, 1))


def save(results: list[TargetResult], path: Path) -> None:
    path.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
