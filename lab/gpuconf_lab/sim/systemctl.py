"""``systemctl``: the simulated systemd's command line, with systemd 252's messages and codes.

Verbs: start stop restart try-restart reload-or-restart reload enable disable mask unmask
is-active is-enabled is-failed status show cat daemon-reload list-units list-unit-files
list-timers reset-failed kill is-system-running reboot poweroff.
"""
from __future__ import annotations

import signal
import sys

import entry
import lifecycle
import logs
import services
import state
import systemctl_files as files
import units
import unitstatus
from services import StartError

VALUE_OPTIONS = ("-p", "--property", "-t", "--type", "--state", "-n", "--lines", "-s", "--signal",
                 "-o", "--output", "-H", "--host", "-M", "--machine", "--root", "--kill-whom")


def parse_args(argv: list[str]) -> tuple[set, dict, list]:
    flags, values, rest = set(), {}, []
    i = 0
    while i < len(argv):
        arg = argv[i]
        key, eq, value = arg.partition("=")
        if arg.startswith("--") and key in VALUE_OPTIONS:
            if not eq:
                i += 1
                value = argv[i] if i < len(argv) else ""
            values.setdefault(key, []).extend(value.split(",") if key in ("--property", "--type", "--state") else [value])
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            if arg[:2] in VALUE_OPTIONS:
                value = arg[2:] or (argv[i + 1] if i + 1 < len(argv) else "")
                if not arg[2:]:
                    i += 1
                long = {"-p": "--property", "-t": "--type", "-n": "--lines", "-s": "--signal", "-o": "--output"}
                values.setdefault(long.get(arg[:2], arg[:2]), []).extend(value.split(","))
            else:
                flags.update("-" + letter for letter in arg[1:])
        elif arg.startswith("--"):
            flags.add(arg)
        else:
            rest.append(arg)
        i += 1
    return flags, values, rest


def main(argv: list[str]) -> int:
    flags, values, rest = parse_args(argv)
    if "--version" in flags:
        print("systemd 252 (252.38-1~deb12u1)\n+PAM +AUDIT +SELINUX +APPARMOR +IMA +SMACK +SECCOMP +GCRYPT "
              "-GNUTLS +OPENSSL +ACL +BLKID +CURL +ELFUTILS +FIDO2 +IDN2 -IDN +IPTC +KMOD +LIBCRYPTSETUP "
              "+LIBFDISK +PCRE2 -PWQUALITY +P11KIT +QRENCODE +TPM2 +BZIP2 +LZ4 +XZ +ZLIB +ZSTD -BPF_FRAMEWORK "
              "-XKBCOMMON +UTMP +SYSVINIT default-hierarchy=unified")
        return 0
    verb, names = (rest[0], rest[1:]) if rest else ("list-units", [])
    quiet = bool({"-q", "--quiet"} & flags)
    handler = VERBS.get(verb)
    if handler is None:
        sys.stderr.write(f"Unknown command verb {verb}.\n")
        return 1
    return handler(names, flags, values, quiet)


def _need_units(verb: str, names: list[str]) -> bool:
    if not names:
        sys.stderr.write("Too few arguments.\n")
        return False
    return True


def _warn_reload(unit: units.UnitFile) -> None:
    if unit.need_reload:
        sys.stderr.write(f"Warning: The unit file, source configuration file or drop-ins of {unit.name} changed on "
                         "disk. Run 'systemctl daemon-reload' to reload units.\n")


def _needs_root(verb: str) -> bool:
    if state.is_root():
        return False
    sys.stderr.write(f"Failed to {verb.split('-')[0]} unit: Interactive authentication required.\n")
    return True


def cmd_start(names, flags, values, quiet, verb="start") -> int:
    if not _need_units(verb, names) or _needs_root(verb):
        return 1
    code = 0
    for name in names:
        unit = units.load(name)
        _warn_reload(unit)
        try:
            if verb in ("restart", "reload-or-restart", "force-reload"):
                lifecycle.restart(name)
            elif verb in ("try-restart", "condrestart"):
                if services.is_active(name):
                    lifecycle.restart(name)
            else:
                lifecycle.start(name)
        except StartError as error:
            if error.message:
                sys.stderr.write(error.message.replace("Failed to start", f"Failed to {verb.split('-')[0]}") + "\n")
            code = max(code, error.code)
    return code


def cmd_stop(names, flags, values, quiet) -> int:
    if not _need_units("stop", names) or _needs_root("stop"):
        return 1
    code = 0
    for name in names:
        unit = units.load(name)
        if not unit.found:
            sys.stderr.write(f"Failed to stop {unit.name}: Unit {unit.name} not loaded.\n")
            code = 5
            continue
        lifecycle.stop(name)
    return code


def cmd_reload(names, flags, values, quiet) -> int:
    code = 0
    for name in names:
        unit = units.load(name)
        lines = units.exec_lines(unit, "ExecReload")
        if not unit.path:
            sys.stderr.write(f"Failed to reload {unit.name}: Unit {unit.name} not found.\n")
            code = 5
        elif not lines:
            sys.stderr.write(f"Failed to reload {unit.name}: Job type reload is not applicable for unit {unit.name}.\n")
            code = 1
        elif not services.is_active(name):
            sys.stderr.write(f"{unit.name} is not active, cannot reload.\n")
            code = 1
        else:
            env = services.environment(unit, "")
            env["MAINPID"] = str(services.runtime(unit.name).get("main_pid", ""))
            for _flags, argv in lines:
                services.run_sync(unit, services.expand(unit, argv, env), env)
            logs.systemd(f"Reloaded {unit.description}.", unit.name)
    return code


def cmd_is_active(names, flags, values, quiet, failed=False) -> int:
    if not names:
        sys.stderr.write("Too few arguments.\n")
        return 1
    hit = False
    for name in names:
        unit = units.load(name)
        current = services.current(unit).get("active", "inactive") if unit.path else "inactive"
        if not quiet:
            print(current)
        hit = hit or current == ("failed" if failed else "active")
    return 0 if hit else (1 if failed else 3)


def cmd_is_failed(names, flags, values, quiet) -> int:
    return cmd_is_active(names, flags, values, quiet, failed=True)


def cmd_is_enabled(names, flags, values, quiet) -> int:
    code = 1
    for name in names:
        unit = units.load(name)
        result = units.enablement(unit)
        if result == "not-found":
            sys.stderr.write(f"Failed to get unit file state for {unit.name}: No such file or directory\n")
            continue
        if not quiet:
            print(result)
        if result in ("enabled", "enabled-runtime", "static", "alias", "indirect", "generated"):
            code = 0
    return code


def cmd_status(names, flags, values, quiet) -> int:
    lines = int((values.get("--lines") or ["10"])[-1])
    code = 0
    names = names or []
    for i, name in enumerate(names):
        output, unit_code = unitstatus.status(units.load(name), lines)
        print(("\n" if i else "") + "\n".join(output))
        code = max(code, unit_code)
    return code


def cmd_show(names, flags, values, quiet) -> int:
    wanted = values.get("--property", [])
    if not names:
        props = {"Version": "252.38-1~deb12u1", "Architecture": "x86-64", "SystemState": _system_state(),
                 "DefaultStandardOutput": "journal"}
        for key, value in props.items():
            if not wanted or key in wanted:
                print(value if "--value" in flags else f"{key}={value}")
        return 0
    for i, name in enumerate(names):
        if i:
            print()
        print("\n".join(unitstatus.show(units.load(name), wanted, "--value" in flags,
                                        bool({"-a", "--all"} & flags))))
    return 0


def cmd_daemon_reload(names, flags, values, quiet) -> int:
    if _needs_root("reload"):
        return 1
    units.daemon_reload()
    logs.systemd("Reloading.")
    return 0


def _system_state() -> str:
    for name in unitstatus.known_units():
        if services.runtime(name).get("active") == "failed":
            return "degraded"
    return "running"


def cmd_is_system_running(names, flags, values, quiet) -> int:
    current = _system_state()
    if not quiet:
        print(current)
    return 0 if current == "running" else 1


def cmd_reset_failed(names, flags, values, quiet) -> int:
    for name in names or unitstatus.known_units():
        lifecycle.reset_failed(name)
    return 0


def cmd_kill(names, flags, values, quiet) -> int:
    sig_name = (values.get("--signal") or ["SIGTERM"])[-1]
    sig = getattr(signal, sig_name if sig_name.startswith("SIG") else "SIG" + sig_name, None)
    if sig is None and sig_name.isdigit():
        sig = int(sig_name)
    for name in names:
        data = services.runtime(units.canonical(name))
        if data.get("active") == "active":
            services.kill_unit(data, sig, wait=0)
    return 0


def cmd_power(names, flags, values, quiet, verb="reboot") -> int:
    import power

    return power.main([verb])


def cmd_poweroff(names, flags, values, quiet) -> int:
    return cmd_power(names, flags, values, quiet, verb="poweroff")


VERBS = {
    "start": cmd_start, "stop": cmd_stop,
    "restart": lambda n, f, v, q: cmd_start(n, f, v, q, verb="restart"),
    "try-restart": lambda n, f, v, q: cmd_start(n, f, v, q, verb="try-restart"),
    "condrestart": lambda n, f, v, q: cmd_start(n, f, v, q, verb="try-restart"),
    "reload-or-restart": lambda n, f, v, q: cmd_start(n, f, v, q, verb="reload-or-restart"),
    "force-reload": lambda n, f, v, q: cmd_start(n, f, v, q, verb="restart"),
    "reload": cmd_reload, "enable": files.cmd_enable, "disable": files.cmd_disable, "reenable": files.cmd_enable,
    "mask": files.cmd_mask, "unmask": files.cmd_unmask, "is-active": cmd_is_active, "is-failed": cmd_is_failed,
    "is-enabled": cmd_is_enabled, "status": cmd_status, "show": cmd_show, "cat": files.cmd_cat,
    "daemon-reload": cmd_daemon_reload, "daemon-reexec": cmd_daemon_reload,
    "list-units": files.cmd_list_units, "list-unit-files": files.cmd_list_unit_files, "list-timers": files.cmd_list_timers,
    "reset-failed": cmd_reset_failed, "kill": cmd_kill, "is-system-running": cmd_is_system_running,
    "reboot": cmd_power, "poweroff": cmd_poweroff, "halt": cmd_poweroff,
}


if __name__ == "__main__":
    entry.run(main)
