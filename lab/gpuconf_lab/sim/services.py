"""Running units: start, stop and watch services the way systemd does, without systemd.

``ExecStart`` really runs, honouring ``Type=``: ``oneshot`` runs to completion (so a unit a
playbook installs, such as a power-limit unit, really applies its command); ``forking`` waits
for the starter to exit and takes ``PIDFile=``; ``simple``/``exec``/``notify`` leave a process
running in its own session. Each unit's processes are one session, so ``stop`` kills exactly
them. State (``active``/``failed``, main PID, result) lives in ``/run/gpuconf-lab/systemd``.

Units that came with the machine's image (``units.machine_units``) are never executed: they
are reported as started so a node looks like a booted cloud image, and the node can never
run the machine's own services.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid

import logs
import state
import units

STATE_DIR = f"{state.RUN}/systemd/units"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STATUS_NAMES = {1: "FAILURE", 2: "INVALIDARGUMENT", 3: "NOTIMPLEMENTED", 4: "NOPERMISSION",
                5: "NOTINSTALLED", 6: "NOTCONFIGURED", 7: "NOTRUNNING", 203: "EXEC"}


class StartError(Exception):
    """A start that failed; ``message`` is what systemctl prints, ``code`` its exit status."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.message = message
        self.code = code


def runtime(name: str) -> dict:
    return state.read_json(f"{STATE_DIR}/{name}.json") or {"active": "inactive", "sub": "dead",
                                                           "result": "success"}


def save(name: str, data: dict) -> None:
    data["changed"] = time.time()
    state.write_json(f"{STATE_DIR}/{name}.json", data)


def session_pids(sid: int) -> list[int]:
    """Live (non-zombie) processes of session ``sid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry))
    return sorted(found)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def status_text(code: int) -> str:
    return f"{code}/{STATUS_NAMES.get(code, str(code))}"


def current(unit: units.UnitFile) -> dict:
    """The unit's state now, noticing a main process that has exited since it started."""
    data = runtime(unit.name)
    if data.get("active") != "active" or data.get("sub") != "running" or not data.get("sid"):
        return data
    code = None
    exit_file = data.get("exit_file")
    if exit_file:
        text = state.read_text(exit_file)
        if text is not None and text.strip().lstrip("-").isdigit():
            code = int(text.strip())
    if code is None and (session_pids(data["sid"]) or alive(data.get("main_pid", 0))):
        return data
    try:
        return _record_exit(unit, code)
    except OSError:   # an unprivileged reader cannot record it; report what happened anyway
        failed = code != 0
        return dict(data, active="failed" if failed else "inactive", sub="failed" if failed else "dead",
                    result="exit-code" if failed else "success", main_pid=0)


def _record_exit(unit: units.UnitFile, code: int | None) -> dict:
    with state.locked(f"unit-{unit.name}"):
        data = runtime(unit.name)
        if data.get("active") != "active":
            return data
        if code == 0:
            data.update(active="inactive", sub="dead", result="success", exec_status=0)
            logs.systemd(f"{unit.name}: Deactivated successfully.", unit.name)
        else:
            how = f"code=exited, status={status_text(code)}" if code is not None else "code=killed, status=9/KILL"
            data.update(active="failed", sub="failed", result="exit-code" if code is not None else "signal",
                        exec_status=code if code is not None else 9)
            logs.systemd(f"{unit.name}: Main process exited, {how}", unit.name, 4)
            logs.systemd(f"{unit.name}: Failed with result '{data['result']}'.", unit.name, 4)
        data["main_pid"] = 0
        save(unit.name, data)
    return data


def is_active(name: str) -> bool:
    return current(units.load(name)).get("active") == "active"


# --- environment and command lines -----------------------------------------------------

def environment(unit: units.UnitFile, invocation: str) -> dict:
    env = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", "INVOCATION_ID": invocation, "HOME": "/root",
           "USER": "root", "LOGNAME": "root", "SHELL": "/bin/sh"}
    for name in ("GPUCONF_SIM_ROOT", "GPUCONF_SIM_FABRIC"):
        if name in os.environ:
            env[name] = os.environ[name]
    for value in unit.values("Service", "Environment"):
        for word in _split_words(value):
            key, eq, val = word.partition("=")
            if eq:
                env[key] = val
    # after Environment=: "settings from these files override settings made with Environment="
    for value in unit.values("Service", "EnvironmentFile"):
        optional = value.startswith("-")
        text = state.read_text(value.lstrip("-"))
        if text is None and not optional:
            raise StartError(f"{unit.name}: Failed to load environment files: No such file or directory")
        for line in (text or "").splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, val = line.partition("=")
                env[key.strip()] = val.strip().strip('"').strip("'")
    return env


def _split_words(value: str) -> list[str]:
    import shlex

    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def expand(unit: units.UnitFile, argv: list[str], env: dict) -> list[str]:
    """Specifiers (%n, %i, %t, %v) and $VAR / ${VAR} expansion, with systemd's word rules."""
    instance = unit.name.split("@", 1)[1].rsplit(".", 1)[0] if "@" in unit.name else ""
    specifiers = {"n": unit.name, "N": unit.name.rsplit(".", 1)[0], "p": unit.name.split("@")[0].rsplit(".", 1)[0],
                  "i": instance, "I": instance, "t": "/run", "v": state.running_kernel(), "%": "%"}
    result = []
    for arg in argv:
        arg = re.sub(r"%(.)", lambda m: specifiers.get(m.group(1), m.group(0)), arg)
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", arg)
        if whole:
            result.extend(env.get(whole.group(1), "").split())
            continue
        result.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)",
                             lambda m: env.get(m.group(1) or m.group(2), ""), arg))
    return result


def _resolve(argv0: str, env: dict) -> str | None:
    candidates = [argv0] if "/" in argv0 else [f"{d}/{argv0}" for d in env.get("PATH", DEFAULT_PATH).split(":")]
    for candidate in candidates:
        real = state.resolve_command(candidate)
        if real and os.access(real, os.X_OK):
            return real
    return None


def run_sync(unit: units.UnitFile, argv: list[str], env: dict, *, detach_output: bool = False,
             timeout: float = 90.0) -> tuple[int, int]:
    """Run one command line to completion in its own session; log its output to the journal.

    Returns (exit status, pid). ``detach_output`` sends output to a file instead of a pipe, for
    forking daemons whose children keep the descriptors open.
    """
    real = _resolve(argv[0], env)
    ident = os.path.basename(argv[0])
    if real is None:
        logs.systemd(f"{unit.name}: Failed to locate executable {argv[0]}: No such file or directory", unit.name, 3)
        logs.systemd(f"{unit.name}: Failed at step EXEC spawning {argv[0]}: No such file or directory", unit.name, 3)
        return 203, 0
    out_path = state.path(f"{state.RUN}/systemd/output/{unit.name}.out")
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w+b") as out:
        process = subprocess.Popen([real] + argv[1:], env=env, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True, cwd="/" if not state.TEST_MODE else None)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
        out.seek(0)
        text = out.read().decode(errors="replace")
    for line in text.splitlines():
        if line.strip():
            logs.journal(line, ident, process.pid, unit.name)
    return (code if code >= 0 else 128 - code), process.pid


def spawn(unit: units.UnitFile, argv: list[str], env: dict) -> dict:
    """Start a long-running main process in a new session, recording its exit status."""
    real = _resolve(argv[0], env)
    if real is None:
        raise StartError("", 203)
    base = f"{state.RUN}/systemd/run/{unit.name}"
    pid_file, exit_file = f"{base}.pid", f"{base}.exit"
    for stale in (pid_file, exit_file):
        state.remove(stale)
    os.makedirs(os.path.dirname(state.path(pid_file)), exist_ok=True)
    env = dict(env, GPUCONF_SIM_PIDF=state.path(pid_file), GPUCONF_SIM_EXITF=state.path(exit_file))
    script = '"$@" & echo $! > "$GPUCONF_SIM_PIDF"; wait $!; echo $? > "$GPUCONF_SIM_EXITF"'
    out = open(state.path(f"{base}.out"), "wb")
    wrapper = subprocess.Popen(["/bin/sh", "-c", script, "sh", real] + argv[1:], env=env, stdin=subprocess.DEVNULL,
                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    out.close()
    main_pid = 0
    for _ in range(200):
        text = state.read_text(pid_file)
        if text and text.strip().isdigit():
            main_pid = int(text.strip())
            break
        time.sleep(0.005)
    return {"sid": wrapper.pid, "main_pid": main_pid, "exit_file": exit_file}


def kill_unit(data: dict, sig: int = signal.SIGTERM, wait: float = 5.0) -> None:
    """Signal every process of the unit, then SIGKILL what is left after ``wait`` seconds."""
    targets = set(session_pids(data["sid"])) if data.get("sid") else set()
    if data.get("main_pid"):
        targets.add(data["main_pid"])
    for pid in targets:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.time() + wait
    while time.time() < deadline and any(alive(pid) for pid in targets):
        time.sleep(0.02)
    for pid in targets:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def new_invocation() -> str:
    return uuid.uuid4().hex
