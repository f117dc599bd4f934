"""systemd unit files as the simulated systemd sees them: search path, drop-ins, [Install].

Unit files are read from ``/etc/systemd/system``, ``/run/systemd/system`` and
``/lib/systemd/system`` (in that order; Debian 12's packages install to /lib), with ``NAME.d/*.conf`` drop-ins, masks (symlinks to
``/dev/null``) and aliases (symlinks to another unit). Enablement is nothing but the real
``*.wants``/``*.requires`` symlinks under ``/etc/systemd/system``, so a task that inspects them
sees what it would see on a real host.

Like systemd, a unit's definition is cached when first loaded and kept until
``daemon-reload``: edit a loaded unit file without reloading and ``NeedDaemonReload=yes``,
``systemctl`` warns, and the old definition still runs. The cache lives under ``/run``.
"""
from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field

import state

UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system")
SUFFIXES = (".service", ".socket", ".target", ".timer", ".mount", ".path", ".slice", ".scope", ".device")
CACHE_DIR = f"{state.RUN}/systemd/cache"
MACHINE_UNITS = "/usr/lib/gpuconf-lab/machine-units.json"


def canonical(name: str) -> str:
    """``docker`` -> ``docker.service``, as systemctl completes unit names."""
    name = os.path.basename(name)
    return name if name.endswith(SUFFIXES) else name + ".service"


def machine_units() -> set[str]:
    """Units the machine's image already had: reported, never executed (see install.py)."""
    return set(state.read_json(MACHINE_UNITS, []) or [])


@dataclass
class UnitFile:
    """A unit's merged definition (fragment plus drop-ins) and where it came from."""

    name: str
    path: str = ""                 # node path of the fragment ("" when not found)
    masked: bool = False
    alias_of: str = ""
    text: str = ""
    dropins: list = field(default_factory=list)
    sections: dict = field(default_factory=dict)   # section -> [(key, value)]
    need_reload: bool = False

    @property
    def found(self) -> bool:
        return bool(self.path) or self.masked

    @property
    def ghost(self) -> bool:
        """A unit whose commands never run inside a node: one of the machine's image, or a
        non-service unit (targets, sockets, timers: they only order and activate services)."""
        return not self.name.endswith(".service") or self.name in machine_units()

    def values(self, section: str, key: str) -> list[str]:
        """All values of ``key``; an empty assignment resets the list (``ExecStart=``)."""
        result: list[str] = []
        for k, v in self.sections.get(section, []):
            if k == key:
                result = [] if v == "" else result + [v]
        return result

    def get(self, section: str, key: str, default: str = "") -> str:
        values = self.values(section, key)
        return values[-1] if values else default

    def words(self, section: str, key: str) -> list[str]:
        return [word for value in self.values(section, key) for word in value.split()]

    @property
    def description(self) -> str:
        """``Description=`` with the specifiers systemd expands there (``%i`` of templates)."""
        instance = self.name.split("@", 1)[1].rsplit(".", 1)[0] if "@" in self.name else ""
        text = self.get("Unit", "Description", self.name)
        for spec, value in (("%i", instance), ("%I", instance), ("%n", self.name), ("%N", self.name.rsplit(".", 1)[0])):
            text = text.replace(spec, value)
        return text

    @property
    def service_type(self) -> str:
        default = "oneshot" if not self.values("Service", "ExecStart") and self.name.endswith(".service") else "simple"
        return self.get("Service", "Type", default)

    @property
    def has_install(self) -> bool:
        return any(self.values("Install", key) for key in ("WantedBy", "RequiredBy", "Alias", "Also"))


def truthy(value: str) -> bool:
    return value.strip().lower() in ("yes", "true", "on", "1")


def parse(text: str) -> dict:
    sections: dict = {}
    current = None
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if pending:
            line = pending + " " + line
            pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        if current is None or "=" not in line:
            continue
        key, _, value = line.partition("=")
        current.append((key.strip(), value.strip()))
    return sections


def _fragment(name: str) -> tuple[str, bool, str]:
    """(node path, masked, alias target) of a unit's fragment file."""
    for directory in UNIT_DIRS:
        candidate = f"{directory}/{name}"
        real = state.path(candidate)
        if os.path.islink(real):
            target = os.readlink(real)
            if target == "/dev/null":
                return candidate, True, ""
            target_name = os.path.basename(target)
            if target_name != name and target_name.endswith(SUFFIXES):
                return _fragment(target_name)[0], False, target_name
        if os.path.isfile(real):
            return candidate, False, ""
    if "@" in name:
        template = name.split("@", 1)[0] + "@." + name.rsplit(".", 1)[-1]
        path, masked, _alias = _fragment(template) if template != name else ("", False, "")
        return path, masked, ""
    return "", False, ""


def _dropins(name: str) -> list[str]:
    chosen: dict = {}
    for directory in reversed(UNIT_DIRS):
        base = state.path(f"{directory}/{name}.d")
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for conf in names:
            if conf.endswith(".conf"):
                chosen[conf] = f"{directory}/{name}.d/{conf}"
    return [chosen[conf] for conf in sorted(chosen)]


def read_from_disk(name: str) -> UnitFile:
    name = canonical(name)
    path, masked, alias = _fragment(name)
    unit = UnitFile(name=alias or name, path=path if not masked else "", masked=masked, alias_of=alias)
    if masked or not path:
        return unit
    texts = [state.read_text(path, "") or ""]
    unit.dropins = _dropins(unit.name)
    texts += [state.read_text(p, "") or "" for p in unit.dropins]
    unit.text = "\n".join(texts)
    return unit


def load(name: str) -> UnitFile:
    """The unit as the running manager knows it: cached definition, NeedDaemonReload flag."""
    disk = read_from_disk(name)
    cache = f"{CACHE_DIR}/{disk.name}"
    cached = state.read_text(cache)
    if cached is None:
        if disk.path:
            try:
                state.write_text(cache, disk.text)
            except OSError:
                pass
        cached = disk.text
    disk.need_reload = bool(disk.path) and cached != disk.text
    disk.sections = parse(cached if disk.path else "")
    return disk


def daemon_reload() -> None:
    shutil.rmtree(state.path(CACHE_DIR), ignore_errors=True)


def exec_lines(unit: UnitFile, key: str) -> list[tuple[str, list[str]]]:
    """Parsed ``ExecStart=``-style lines: (prefix flags, argv), environment expanded later."""
    result = []
    for value in unit.values("Service", key):
        flags = ""
        while value and value[0] in "-@+!:":
            flags += value[0]
            value = value[1:]
        try:
            # systemd unescapes backslashes inside quotes too: '\\.ko' reaches grep as '\.ko'
            lexer = shlex.shlex(value, posix=True)
            lexer.whitespace_split, lexer.escapedquotes, lexer.commenters = True, "\"'", ""
            argv = list(lexer)
        except ValueError:
            argv = value.split()
        if argv:
            result.append((flags, argv))
    return result


# --- enablement -------------------------------------------------------------------------

def wants_links(name: str) -> list[str]:
    """Node paths of every ``*.wants``/``*.requires`` symlink that enables ``name``."""
    found = []
    base = state.path("/etc/systemd/system")
    try:
        entries = os.listdir(base)
    except OSError:
        return found
    for entry in sorted(entries):
        if entry.endswith((".wants", ".requires")):
            if os.path.lexists(os.path.join(base, entry, name)):
                found.append(f"/etc/systemd/system/{entry}/{name}")
    return found


def enablement(unit: UnitFile) -> str:
    """What ``systemctl is-enabled`` prints."""
    if unit.masked:
        return "masked"
    if not unit.path:
        return "not-found"
    if unit.alias_of:
        return "alias"
    if wants_links(unit.name):
        return "enabled"
    if not unit.has_install:
        return "static"
    return "disabled"


def enabled_units(target_dirs=("multi-user.target", "sysinit.target", "basic.target",
                               "network-online.target", "graphical.target", "default.target",
                               "timers.target", "sockets.target")) -> list[str]:
    """Units a boot starts: everything the default targets want."""
    names = []
    for target in target_dirs:
        for kind in (".wants", ".requires"):
            base = state.path(f"/etc/systemd/system/{target}{kind}")
            try:
                entries = sorted(os.listdir(base))
            except OSError:
                continue
            names += [entry for entry in entries if entry not in names]
    return names

