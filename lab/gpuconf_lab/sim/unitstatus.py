"""How systemctl describes units: ``status``, ``show`` properties and ``list-units`` tables.

Formats are systemd 252's (Debian 12), checked against ``fixtures/real/systemctl``: ``show``
prints properties in systemd's own order whatever order ``-p`` asked for, and timestamps
as ``Wed 2024-02-28 21:22:28 UTC``.
"""
from __future__ import annotations

import os
import time

import logs
import services
import state
import units

PROPERTY_ORDER = (
    "Type", "Restart", "PIDFile", "RemainAfterExit", "GuessMainPID", "MainPID", "ControlPID", "StatusErrno",
    "Result", "NRestarts", "ExecMainStartTimestamp", "ExecMainExitTimestamp", "ExecMainPID", "ExecMainCode",
    "ExecMainStatus", "ExecStartPre", "ExecStart", "ExecStop", "ExecReload", "Slice", "ControlGroup",
    "Environment", "EnvironmentFiles", "User", "Id", "Names", "Requires", "Wants", "BindsTo", "RequiredBy",
    "WantedBy", "Conflicts", "Before", "After", "Documentation", "Description", "LoadState", "ActiveState",
    "FreezerState", "SubState", "FragmentPath", "DropInPaths", "UnitFileState", "UnitFilePreset",
    "StateChangeTimestamp", "InactiveExitTimestamp", "ActiveEnterTimestamp", "ActiveExitTimestamp",
    "InactiveEnterTimestamp", "CanStart", "CanStop", "CanReload", "CanIsolate", "NeedDaemonReload",
    "ConditionResult", "AssertResult", "InvocationID", "CollectMode",
)


def timestamp(epoch: float | None) -> str:
    if not epoch:
        return "n/a"
    return time.strftime("%a %Y-%m-%d %H:%M:%S %Z", time.localtime(epoch))


def ago(epoch: float) -> str:
    delta = max(0, int(time.time() - epoch))
    if delta < 60:
        return f"{delta}s ago"
    if delta < 3600:
        return f"{delta // 60}min {delta % 60}s ago" if delta % 60 else f"{delta // 60}min ago"
    if delta < 86400:
        return f"{delta // 3600}h {delta % 3600 // 60}min ago"
    return f"{delta // 86400} day{'s' if delta >= 172800 else ''} ago"


def load_state(unit: units.UnitFile) -> str:
    if unit.masked:
        return "masked"
    return "loaded" if unit.path else "not-found"


def _exec_property(unit: units.UnitFile, key: str, data: dict) -> str:
    parts = []
    for flags, argv in units.exec_lines(unit, key):
        ran = key == "ExecStart" and data.get("since")
        pid = data.get("exec_pid") or data.get("main_pid") or 0
        code = "exited" if ran and data.get("sub") != "running" else ("(null)" if not ran else "running")
        parts.append(f"{{ path={argv[0]} ; argv[]={' '.join(argv)} ; ignore_errors={'yes' if '-' in flags else 'no'} ; "
                     f"start_time=[{timestamp(data.get('since')) if ran else 'n/a'}] ; stop_time=[n/a] ; "
                     f"pid={pid if ran else 0} ; code={code} ; status={data.get('exec_status', 0) if ran else '0/0'} }}")
    return " ".join(parts)


def properties(unit: units.UnitFile) -> dict:
    data = services.current(unit) if unit.path else services.runtime(unit.name)
    active, sub = data.get("active", "inactive"), data.get("sub", "dead")
    since = data.get("since")
    props = {
        "Id": unit.name, "Names": unit.name, "Description": unit.description,
        "LoadState": load_state(unit), "ActiveState": active, "FreezerState": "running", "SubState": sub,
        "FragmentPath": unit.path, "DropInPaths": " ".join(unit.dropins),
        "UnitFileState": units.enablement(unit) if unit.path or unit.masked else "",
        "UnitFilePreset": "enabled" if unit.path else "", "NeedDaemonReload": "yes" if unit.need_reload else "no",
        "StateChangeTimestamp": timestamp(data.get("changed")),
        "ActiveEnterTimestamp": timestamp(since if active == "active" else data.get("active_enter")),
        "InactiveExitTimestamp": timestamp(since), "ActiveExitTimestamp": "n/a", "InactiveEnterTimestamp": "n/a",
        "CanStart": "yes" if unit.path else "no", "CanStop": "yes" if unit.path else "no",
        "CanReload": "yes" if unit.values("Service", "ExecReload") else "no", "CanIsolate": "no",
        "ConditionResult": "no" if data.get("condition") is False else "yes", "AssertResult": "yes",
        "InvocationID": data.get("invocation", ""), "CollectMode": "inactive",
        "Requires": " ".join(unit.words("Unit", "Requires")), "Wants": " ".join(unit.words("Unit", "Wants")),
        "BindsTo": " ".join(unit.words("Unit", "BindsTo")), "Before": " ".join(unit.words("Unit", "Before")),
        "After": " ".join(unit.words("Unit", "After")), "Conflicts": " ".join(unit.words("Unit", "Conflicts")),
        "WantedBy": " ".join(unit.words("Install", "WantedBy")), "RequiredBy": " ".join(unit.words("Install", "RequiredBy")),
        "Documentation": " ".join(f'"{d}"' for d in unit.words("Unit", "Documentation")),
    }
    if unit.name.endswith(".service"):
        props.update({
            "Type": unit.service_type, "Restart": unit.get("Service", "Restart", "no"),
            "PIDFile": unit.get("Service", "PIDFile"), "GuessMainPID": "yes",
            "RemainAfterExit": "yes" if units.truthy(unit.get("Service", "RemainAfterExit")) else "no",
            "MainPID": str(data.get("main_pid", 0) if active == "active" else 0), "ControlPID": "0", "StatusErrno": "0",
            "Result": data.get("result", "success"), "NRestarts": "0",
            "ExecMainStartTimestamp": timestamp(since), "ExecMainExitTimestamp": "n/a",
            "ExecMainPID": str(data.get("exec_pid") or data.get("main_pid") or 0),
            "ExecMainCode": "0" if sub == "running" or not since else "1",
            "ExecMainStatus": str(data.get("exec_status", 0)),
            "ExecStartPre": _exec_property(unit, "ExecStartPre", data),
            "ExecStart": _exec_property(unit, "ExecStart", data),
            "ExecStop": _exec_property(unit, "ExecStop", data), "ExecReload": _exec_property(unit, "ExecReload", data),
            "Slice": "system.slice", "ControlGroup": f"/system.slice/{unit.name}" if active == "active" else "",
            "Environment": " ".join(unit.values("Service", "Environment")),
            "EnvironmentFiles": " ".join(unit.values("Service", "EnvironmentFile")),
            "User": unit.get("Service", "User"),
        })
    return props


def show(unit: units.UnitFile, wanted: list[str], value_only: bool, show_all: bool) -> list[str]:
    props = properties(unit)
    names = [p for p in PROPERTY_ORDER if p in props]
    if wanted:
        names = [p for p in names if p in wanted]
    lines = []
    for name in names:
        value = props[name]
        if not value and not wanted and not show_all and name not in ("FragmentPath", "UnitFileState"):
            continue
        lines.append(value if value_only else f"{name}={value}")
    return lines


def status(unit: units.UnitFile, lines_of_journal: int = 10) -> tuple[list[str], int]:
    if not unit.path and not unit.masked:
        return [f"Unit {unit.name} could not be found."], 4
    props = properties(unit)
    data = services.current(unit)
    active = props["ActiveState"]
    dot = {"active": "●", "failed": "×"}.get(active, "○")
    out = [f"{dot} {unit.name} - {unit.description}"]
    if unit.masked:
        out.append("     Loaded: masked (Reason: Unit " + unit.name + " is masked.)")
    else:
        out.append(f"     Loaded: loaded ({unit.path}; {props['UnitFileState']}; preset: enabled)")
        if unit.dropins:
            out.append("    Drop-In: " + "\n             ".join(unit.dropins))
    since = data.get("since")
    when = f" since {timestamp(since)}; {ago(since)}" if since else ""
    if active == "active":
        out.append(f"     Active: active ({props['SubState']}){when}")
    elif active == "failed":
        out.append(f"     Active: failed (Result: {data.get('result', 'exit-code')}){when}")
    else:
        out.append(f"     Active: inactive (dead){when if since else ''}")
    if active != "active" and since and unit.values("Service", "ExecStart"):
        _flags, argv = units.exec_lines(unit, "ExecStart")[0]
        code = data.get("exec_status", 0)
        out.append(f"    Process: {data.get('exec_pid', 0)} ExecStart={' '.join(argv)} "
                   f"(code=exited, status={services.status_text(code) if code else '0/SUCCESS'})")
    main = data.get("main_pid", 0) if active == "active" else 0
    if main:
        out.append(f"   Main PID: {main} ({_comm(main)})")
        out.append("      Tasks: 1 (limit: 4915)")
        out.append(f"     CGroup: /system.slice/{unit.name}")
        out.append(f"             └─{main} {_cmdline(main)}")
    if unit.need_reload:
        out.append("")
        out.append(f"Warning: The unit file, source configuration file or drop-ins of {unit.name} changed on disk. "
                   "Run 'systemctl daemon-reload' to reload units.")
    journal = [e for e in logs.journal_entries() if e.get("u") == unit.name][-lines_of_journal:]
    if journal:
        import journalctl

        out.append("")
        out.extend(journalctl.format_entry(e, "short") for e in journal)
    return out, 0 if active == "active" else 3


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return "?"


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def known_units() -> list[str]:
    """Units the manager has loaded: those with runtime state, plus every enabled one."""
    names = set(units.enabled_units())
    try:
        names.update(n[:-5] for n in os.listdir(state.path(services.STATE_DIR)) if n.endswith(".json"))
    except OSError:
        pass
    return sorted(names)
