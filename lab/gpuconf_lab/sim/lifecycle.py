"""Unit jobs: what ``systemctl start/stop/restart`` do, step by step, with systemd's messages.

A start runs dependencies (``Requires=``/``Wants=``), checks ``Condition*=`` (``|`` marks a
triggering one) and ``ExecCondition=``, then
``ExecStartPre``, ``ExecStart`` according to ``Type=``, ``ExecStartPost``, and logs the same
journal lines systemd 252 logs. A failed start leaves the unit ``failed`` with a ``Result``,
and systemctl prints the real "Job for ... failed" text.
"""
from __future__ import annotations

import os
import time

import logs
import services
import state
import units
from services import StartError

CONDITIONS = ("ConditionPathExists", "ConditionPathIsDirectory", "ConditionFileNotEmpty",
              "ConditionFileIsExecutable", "ConditionDirectoryNotEmpty", "ConditionPathExistsGlob")


def _job_failed(name: str) -> str:
    return (f'Job for {name} failed because the control process exited with error code.\n'
            f'See "systemctl status {name}" and "journalctl -xeu {name}" for details.')


def _condition_holds(key: str, value: str) -> bool:
    negate = value.startswith("!")
    target = state.path(value.lstrip("!|"))
    if key == "ConditionPathExists":
        result = os.path.exists(target)
    elif key == "ConditionPathIsDirectory":
        result = os.path.isdir(target)
    elif key == "ConditionFileNotEmpty":
        result = os.path.isfile(target) and os.path.getsize(target) > 0
    elif key == "ConditionFileIsExecutable":
        result = os.path.isfile(target) and os.access(target, os.X_OK)
    elif key == "ConditionDirectoryNotEmpty":
        result = os.path.isdir(target) and bool(os.listdir(target))
    else:
        import glob

        result = bool(glob.glob(target))
    return result != negate


def start(name: str, _chain: tuple = ()) -> None:
    """Start a unit; raises StartError with systemctl's message when it fails."""
    unit = units.load(name)
    if unit.masked:
        raise StartError(f"Failed to start {unit.name}: Unit {unit.name} is masked.", 1)
    if not unit.path:
        raise StartError(f"Failed to start {unit.name}: Unit {unit.name} not found.", 5)
    if unit.name in _chain:
        return
    if services.current(unit).get("active") == "active":
        return
    for dep in unit.words("Unit", "Requires") + unit.words("Unit", "BindsTo"):
        try:
            start(dep, _chain + (unit.name,))
        except StartError:
            logs.systemd(f"Dependency failed for {unit.description}.", unit.name, 3)
            logs.systemd(f"{unit.name}: Job {unit.name}/start failed with result 'dependency'.", unit.name, 4)
            raise StartError(f"A dependency job for {unit.name} failed. See 'journalctl -xe' for details.",
                             1) from None
    for dep in unit.words("Unit", "Wants"):
        try:
            start(dep, _chain + (unit.name,))
        except StartError:
            pass
    if unit.ghost:
        _start_ghost(unit)
        return
    with state.locked(f"job-{unit.name}"):
        _start_locked(unit)


def _start_ghost(unit: units.UnitFile) -> None:
    remain = unit.service_type == "oneshot" and not units.truthy(unit.get("Service", "RemainAfterExit"))
    services.save(unit.name, {"active": "inactive" if remain else "active", "sub": "dead" if remain else
                              ("exited" if unit.service_type == "oneshot" else "running"),
                              "result": "success", "main_pid": 0, "since": time.time(), "ghost": True,
                              "invocation": services.new_invocation()})


def _skip(unit: units.UnitFile, why: str) -> None:
    logs.systemd(f"{unit.description} was skipped because of an unmet condition check ({why}).", unit.name)
    services.save(unit.name, {"active": "inactive", "sub": "dead", "result": "success",
                              "condition": False, "since": time.time()})


def _start_locked(unit: units.UnitFile) -> None:
    triggers = []
    for key in CONDITIONS:
        for value in unit.values("Unit", key):
            holds = _condition_holds(key, value)
            if value.lstrip("!").startswith("|"):
                # a triggering condition: the unit runs if any one of them holds
                triggers.append((holds, f"{key}={value}"))
            elif not holds:
                _skip(unit, f"{key}={value}")
                return
    if triggers and not any(holds for holds, _ in triggers):
        _skip(unit, triggers[0][1])
        return
    invocation = services.new_invocation()
    env = services.environment(unit, invocation)
    for _flags, argv in units.exec_lines(unit, "ExecCondition"):
        # exit 1-254 skips the unit as an unmet condition does, 255 or a signal fails it
        code, pid = services.run_sync(unit, services.expand(unit, argv, env), env)
        if 0 < code < 255 and pid:   # pid 0: it never ran (203/EXEC), a failure
            _skip(unit, f"ExecCondition={' '.join(argv)}")
            return
        if code:
            _fail(unit, {"invocation": invocation, "since": time.time()}, code, "Control process")
    kind = unit.service_type
    logs.systemd(f"Starting {unit.description}...", unit.name)
    base = {"invocation": invocation, "type": kind, "since": time.time(), "condition": True}
    for flags, argv in units.exec_lines(unit, "ExecStartPre"):
        code, _pid = services.run_sync(unit, services.expand(unit, argv, env), env)
        if code and "-" not in flags:
            _fail(unit, base, code, "Control process")
    lines = units.exec_lines(unit, "ExecStart")
    if kind == "oneshot":
        pid = 0
        for flags, argv in lines:
            code, pid = services.run_sync(unit, services.expand(unit, argv, env), env)
            if code and "-" not in flags:
                _fail(unit, dict(base, main_pid=pid), code, "Main process")
        if units.truthy(unit.get("Service", "RemainAfterExit")):
            services.save(unit.name, dict(base, active="active", sub="exited", result="success", exec_pid=pid, exec_status=0))
        else:
            services.save(unit.name, dict(base, active="inactive", sub="dead", result="success", exec_pid=pid, exec_status=0))
            logs.systemd(f"{unit.name}: Deactivated successfully.", unit.name)
        logs.systemd(f"Finished {unit.description}.", unit.name)
        _post(unit, env, base)
        return
    if not lines:
        raise StartError(f"Failed to start {unit.name}: Unit {unit.name} has a bad unit file setting.", 1)
    argv = services.expand(unit, lines[0][1], env)
    if kind == "forking":
        _start_forking(unit, argv, env, base)
    else:
        _start_simple(unit, argv, env, base, notify=kind == "notify")
    logs.systemd(f"Started {unit.description}.", unit.name)
    _post(unit, env, base)


def _start_forking(unit, argv, env, base) -> None:
    code, pid = services.run_sync(unit, argv, env, detach_output=True)
    if code:
        _fail(unit, dict(base, exec_pid=pid), code, "Control process")
    main_pid = 0
    pid_file = unit.get("Service", "PIDFile")
    for _ in range(100):
        if pid_file:
            text = state.read_text(pid_file.replace("/var/run/", "/run/")) or state.read_text(pid_file)
            if text and text.strip().isdigit():
                main_pid = int(text.strip())
                break
        else:
            left = services.session_pids(pid)
            main_pid = left[0] if left else 0
            break
        time.sleep(0.01)
    services.save(unit.name, dict(base, active="active", sub="running", result="success", sid=pid,
                                  main_pid=main_pid, exec_pid=pid, exec_status=0))


def _start_simple(unit, argv, env, base, notify: bool) -> None:
    ready = f"{state.RUN}/systemd/run/{unit.name}.ready"
    state.remove(ready)
    env = dict(env, GPUCONF_SIM_READY=state.path(ready)) if notify else env
    try:
        spawned = services.spawn(unit, argv, env)
    except StartError:
        logs.systemd(f"{unit.name}: Failed to locate executable {argv[0]}: No such file or directory", unit.name, 3)
        _fail(unit, base, 203, "Main process")
    data = dict(base, active="active", sub="running", result="success", **spawned)
    if notify:
        deadline = time.time() + 10
        while time.time() < deadline and not state.exists(ready):
            text = state.read_text(spawned["exit_file"])
            if text is not None and text.strip():
                _journal_output(unit, argv[0], spawned["main_pid"])
                _fail(unit, data, int(text.strip()), "Main process")
            time.sleep(0.01)
    services.save(unit.name, data)


def _journal_output(unit, argv0: str, pid: int) -> None:
    """What a failed main process printed, as the journal would have collected it."""
    text = state.read_text(f"{state.RUN}/systemd/run/{unit.name}.out", "") or ""
    for line in text.splitlines():
        if line.strip():
            logs.journal(line, os.path.basename(argv0), pid, unit.name, 3)


def _post(unit, env, base) -> None:
    for flags, argv in units.exec_lines(unit, "ExecStartPost"):
        code, _pid = services.run_sync(unit, services.expand(unit, argv, env), env)
        if code and "-" not in flags:
            stop(unit.name)
            _fail(unit, base, code, "Control process")


def _fail(unit: units.UnitFile, data: dict, code: int, who: str) -> None:
    logs.systemd(f"{unit.name}: {who} exited, code=exited, status={services.status_text(code)}", unit.name, 4)
    logs.systemd(f"{unit.name}: Failed with result 'exit-code'.", unit.name, 4)
    logs.systemd(f"Failed to start {unit.description}.", unit.name, 3)
    services.save(unit.name, dict(data, active="failed", sub="failed", result="exit-code", exec_status=code,
                                  main_pid=0))
    raise StartError(_job_failed(unit.name), 1)


def stop(name: str) -> None:
    """Stop a unit: ExecStop, then SIGTERM its session (SIGKILL after a grace period)."""
    unit = units.load(name)
    data = services.current(unit)
    if data.get("active") != "active":
        return
    with state.locked(f"job-{unit.name}"):
        if not unit.ghost:
            logs.systemd(f"Stopping {unit.description}...", unit.name)
            env = services.environment(unit, data.get("invocation", ""))
            env["MAINPID"] = str(data.get("main_pid", ""))
            for _flags, argv in units.exec_lines(unit, "ExecStop"):
                services.run_sync(unit, services.expand(unit, argv, env), env)
            services.kill_unit(data)
            for _flags, argv in units.exec_lines(unit, "ExecStopPost"):
                services.run_sync(unit, services.expand(unit, argv, env), env)
            logs.systemd(f"{unit.name}: Deactivated successfully.", unit.name)
            logs.systemd(f"Stopped {unit.description}.", unit.name)
        data.update(active="inactive", sub="dead", main_pid=0, since=time.time())
        services.save(unit.name, data)


def restart(name: str) -> None:
    stop(name)
    start(name)


def reset_failed(name: str) -> None:
    unit = units.load(name)
    data = services.runtime(unit.name)
    if data.get("active") == "failed":
        data.update(active="inactive", sub="dead", result="success")
        services.save(unit.name, data)
