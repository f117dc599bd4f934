"""The unit-file side of ``systemctl``: enable/disable/mask (the real ``*.wants`` and
``/dev/null`` symlinks, with systemd 252's "Created symlink ..." messages), ``cat`` and the
``list-units``/``list-unit-files``/``list-timers`` tables.
"""
from __future__ import annotations

import os
import sys
import time

import lifecycle
import services
import state
import units
import unitstatus


def cmd_enable(names, flags, values, quiet, verb="enable") -> int:
    if not _need_units(names) or _needs_root(verb):
        return 1
    code = 0
    for name in names:
        unit = units.load(name)
        if not unit.path and not unit.masked:
            sys.stderr.write(f"Failed to {verb} unit: Unit file {unit.name} does not exist.\n")
            code = 1
            continue
        if verb == "enable":
            if unit.masked:
                sys.stderr.write(f"Failed to enable unit: Unit file /etc/systemd/system/{unit.name} is masked.\n")
                code = 1
                continue
            _enable(unit, quiet)
            if "--now" in flags:
                code = max(code, _start_now(name))
        else:
            if "--now" in flags:
                lifecycle.stop(name)
            for link in units.wants_links(unit.name):
                state.remove(link)
                if not quiet:
                    sys.stderr.write(f'Removed "{link}".\n')
    return code


def _enable(unit: units.UnitFile, quiet: bool) -> None:
    if not unit.has_install:
        if not quiet:
            sys.stderr.write(
                "The unit files have no installation config (WantedBy=, RequiredBy=, Also=,\n"
                "Alias= settings in the [Install] section, and DefaultInstance= for template\n"
                "units). This means they are not meant to be enabled or disabled using systemctl.\n \n"
                "Possible reasons for having this kind of units are:\n"
                "• A unit may be statically enabled by being symlinked from another unit's\n"
                "  .wants/ or .requires/ directory.\n"
                "• A unit's purpose may be to act as a helper for some other unit which has\n"
                "  a requirement dependency on it.\n"
                "• A unit may be started when needed via activation (socket, path, timer,\n"
                "  D-Bus, udev, scripted systemctl call, ...).\n"
                "• In case of template units, the unit is meant to be enabled with some\n"
                "  instance name specified.\n")
        return
    for kind, key in ((".wants", "WantedBy"), (".requires", "RequiredBy")):
        for target in unit.words("Install", key):
            link = f"/etc/systemd/system/{target}{kind}/{unit.name}"
            if state.exists(link):
                continue
            os.makedirs(os.path.dirname(state.path(link)), exist_ok=True)
            os.symlink(unit.path, state.path(link))
            if not quiet:
                sys.stderr.write(f"Created symlink {link} → {unit.path}.\n")
    for alias in unit.words("Install", "Alias"):
        link = f"/etc/systemd/system/{alias}"
        if not state.exists(link):
            os.symlink(unit.path, state.path(link))
            if not quiet:
                sys.stderr.write(f"Created symlink {link} → {unit.path}.\n")


def cmd_disable(names, flags, values, quiet) -> int:
    return cmd_enable(names, flags, values, quiet, verb="disable")


def cmd_mask(names, flags, values, quiet, unmask=False) -> int:
    if _needs_root("unmask" if unmask else "mask"):
        return 1
    for name in names:
        link = f"/etc/systemd/system/{units.canonical(name)}"
        real = state.path(link)
        if unmask:
            if os.path.islink(real) and os.readlink(real) == "/dev/null":
                os.unlink(real)
                if not quiet:
                    sys.stderr.write(f'Removed "{link}".\n')
        elif not (os.path.islink(real) and os.readlink(real) == "/dev/null"):
            if os.path.isfile(real) and not os.path.islink(real):
                sys.stderr.write(f"Failed to mask unit: File {link} already exists.\n")
                return 1
            if os.path.lexists(real):
                os.unlink(real)
            os.makedirs(os.path.dirname(real), exist_ok=True)
            os.symlink("/dev/null", real)
            if not quiet:
                sys.stderr.write(f"Created symlink {link} → /dev/null.\n")
    return 0


def cmd_unmask(names, flags, values, quiet) -> int:
    return cmd_mask(names, flags, values, quiet, unmask=True)


def cmd_cat(names, flags, values, quiet) -> int:
    code = 0
    for name in names:
        unit = units.read_from_disk(name)
        if not unit.path:
            sys.stderr.write(f"No files found for {unit.name}.\n")
            code = 1
            continue
        print(f"# {unit.path}")
        print((state.read_text(unit.path, "") or "").rstrip("\n"))
        for dropin in unit.dropins:
            print(f"\n# {dropin}")
            print((state.read_text(dropin, "") or "").rstrip("\n"))
    return code


def cmd_list_units(names, flags, values, quiet) -> int:
    types = values.get("--type", [])
    states = values.get("--state", [])
    rows = []
    for name in unitstatus.known_units():
        if types and name.rsplit(".", 1)[-1] not in types:
            continue
        unit = units.load(name)
        data = services.current(unit)
        active, sub = data.get("active", "inactive"), data.get("sub", "dead")
        if states and active not in states and sub not in states:
            continue
        if not states and not ({"-a", "--all"} & flags) and active == "inactive":
            continue
        rows.append((name, unitstatus.load_state(unit), active, sub, unit.description))
    legend = "--no-legend" not in flags
    width = max([len("UNIT")] + [len(r[0]) for r in rows]) + 1
    if legend:
        print(f"{'UNIT':<{width}} LOAD      ACTIVE   SUB       DESCRIPTION")
    for row in rows:
        print(f"{row[0]:<{width}} {row[1]:<9} {row[2]:<8} {row[3]:<9} {row[4]}")
    if legend:
        print("\nLOAD   = Reflects whether the unit definition was properly loaded.\n"
              "ACTIVE = The high-level unit activation state, i.e. generalization of SUB.\n"
              "SUB    = The low-level unit activation state, values depend on unit type.\n")
        print(f"{len(rows)} loaded units listed. Pass --all to see loaded but inactive units, too.\n"
              "To show all installed unit files use 'systemctl list-unit-files'.")
    return 0


def cmd_list_unit_files(names, flags, values, quiet) -> int:
    found = {}
    for directory in reversed(units.UNIT_DIRS):
        try:
            entries = os.listdir(state.path(directory))
        except OSError:
            continue
        for name in entries:
            if name.endswith(units.SUFFIXES):
                found[name] = True
    types = values.get("--type", [])
    rows = []
    for name in sorted(found):
        if types and name.rsplit(".", 1)[-1] not in types:
            continue
        rows.append((name, units.enablement(units.read_from_disk(name))))
    width = max([len("UNIT FILE")] + [len(r[0]) for r in rows]) + 1
    print(f"{'UNIT FILE':<{width}} STATE           VENDOR PRESET")
    for name, result in rows:
        print(f"{name:<{width}} {result:<15} enabled")
    print(f"\n{len(rows)} unit files listed.")
    return 0


def cmd_list_timers(names, flags, values, quiet) -> int:
    timers = [n for n in units.enabled_units() if n.endswith(".timer")]
    midnight = time.mktime(time.localtime()[:3] + (0, 0, 0, 0, 0, -1)) + 86400
    rows = [(unitstatus.timestamp(midnight), f"{int((midnight - time.time()) // 3600)}h left", "n/a", "n/a", t,
             units.load(t).get("Timer", "Unit", t.replace(".timer", ".service"))) for t in timers]
    header = ("NEXT", "LEFT", "LAST", "PASSED", "UNIT", "ACTIVATES")
    widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(6)]
    for row in [header] + rows:
        print(" ".join(f"{col:<{widths[i]}}" for i, col in enumerate(row)).rstrip())
    print(f"\n{len(rows)} timers listed.\nPass --all to see loaded but inactive timers, too.")
    return 0



def _start_now(name: str) -> int:
    try:
        lifecycle.start(name)
    except services.StartError as error:
        if error.message:
            sys.stderr.write(error.message + "\n")
        return error.code
    return 0


def _needs_root(verb: str) -> bool:
    if state.is_root():
        return False
    sys.stderr.write(f"Failed to {verb} unit: Interactive authentication required.\n")
    return True


def _need_units(names: list[str]) -> bool:
    if not names:
        sys.stderr.write("Too few arguments.\n")
        return False
    return True
