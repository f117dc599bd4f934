"""systemd facts: ``systemctl show``, ``is-active``, ``is-enabled``, ``list-units``, and
the message ``systemctl start`` prints when a unit fails.

Format notes:

* ``systemctl show [--property=X ...] UNIT...`` prints ``Key=value`` lines, one block
  per unit separated by a blank line. Values may contain ``=`` and ``{ ... ; ... }``
  structs (``ExecStart=``); only the first ``=`` splits. ``[not set]``, ``n/a`` and
  empty values are kept as printed (they are different answers).
* ``is-active``/``is-enabled`` print one word per unit; ``is-enabled`` on a missing unit
  prints "Failed to get unit file state for X: No such file or directory".
* ``list-units`` (``--failed``/``--all``) prints a table, failed rows prefixed ``●``
  (or ``*`` without UTF-8), then a legend and "N loaded units listed.".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import Unparseable, reads_whole_lines, unparseable

ACTIVE_STATES = ("active", "reloading", "inactive", "failed", "activating", "deactivating",
                 "maintenance", "refreshing", "unknown")
ENABLED_STATES = ("enabled", "enabled-runtime", "linked", "linked-runtime", "alias", "masked",
                  "masked-runtime", "static", "indirect", "disabled", "generated", "transient",
                  "bad", "not-found")


@dataclass(frozen=True)
class UnitProperties:
    """One unit's ``systemctl show`` properties, with the common ones as fields."""

    properties: dict[str, str]
    id: str | None
    load_state: str | None
    active_state: str | None
    sub_state: str | None
    unit_file_state: str | None
    main_pid: int | None
    result: str | None

    def get(self, key: str, default: str | None = None) -> str | None:
        """Any property by its systemd name (``FragmentPath``, ``NRestarts``)."""
        return self.properties.get(key, default)


def _unit(properties: dict[str, str]) -> UnitProperties:
    pid = properties.get("MainPID")
    return UnitProperties(
        properties=properties,
        id=properties.get("Id"),
        load_state=properties.get("LoadState"),
        active_state=properties.get("ActiveState"),
        sub_state=properties.get("SubState"),
        unit_file_state=properties.get("UnitFileState"),
        main_pid=int(pid) if pid and pid.isdigit() else None,
        result=properties.get("Result"),
    )


@reads_whole_lines
def parse_systemctl_show_all(text: str) -> tuple[UnitProperties, ...]:
    """Parse ``systemctl show`` for several units (blocks separated by blank lines)."""
    blocks: list[dict[str, str]] = [{}]
    for line in text.splitlines():
        if not line.strip():
            if blocks[-1]:
                blocks.append({})
            continue
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key):
            blocks[-1][key] = value
    return tuple(_unit(block) for block in blocks if block)


@reads_whole_lines
def parse_systemctl_show(text: str) -> UnitProperties | Unparseable:
    """Parse ``systemctl show [--property ...] UNIT`` for one unit."""
    units = parse_systemctl_show_all(text)
    if not units:
        return unparseable("expected Key=value lines", text)
    return units[0]


def _single_word(text: str, allowed: tuple[str, ...], what: str) -> str | Unparseable:
    words = [line.strip() for line in text.splitlines() if line.strip()]
    if words and words[0] in allowed:
        return words[0]
    if words and re.search(r"No such file or directory|not found|not loaded", words[0], re.I):
        return "not-found" if "not-found" in allowed else "unknown"
    return unparseable(f"expected one of {', '.join(allowed)} ({what})", text)


def parse_is_active(text: str) -> str | Unparseable:
    """``systemctl is-active UNIT``: one of :data:`ACTIVE_STATES` (first unit only)."""
    return _single_word(text, ACTIVE_STATES, "systemctl is-active")


def parse_is_enabled(text: str) -> str | Unparseable:
    """``systemctl is-enabled UNIT``: one of :data:`ENABLED_STATES`; a missing unit
    ("Failed to get unit file state ...: No such file or directory") is ``not-found``."""
    return _single_word(text, ENABLED_STATES, "systemctl is-enabled")


@dataclass(frozen=True)
class UnitRow:
    """A ``systemctl list-units`` row; ``marked`` is the ``●`` failed-unit marker."""

    unit: str
    load: str
    active: str
    sub: str
    description: str
    marked: bool = False


@dataclass(frozen=True)
class UnitList:
    """Rows of ``list-units``; ``listed_count`` from "N loaded units listed." (None when
    absent or anonymised, as in some captures: "xxx loaded units listed")."""

    units: tuple[UnitRow, ...]
    listed_count: int | None = None
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common

    @property
    def failed(self) -> tuple[UnitRow, ...]:
        """Rows whose ACTIVE column is ``failed``."""
        return tuple(row for row in self.units if row.active == "failed")


_ROW = re.compile(r"^(?P<mark>[●*×]\s*)?(?P<unit>\S+)\s+(?P<load>\S+)\s+(?P<active>\S+)\s+(?P<sub>\S+)\s*(?P<desc>.*)$")


@reads_whole_lines
def parse_list_units(text: str) -> UnitList:
    """Parse ``systemctl list-units [--failed|--all]`` (with or without ``--no-legend``).

    With its legend (a ``UNIT`` header), systemctl closes the listing with "N loaded units
    listed.": a listing with the header and without that line was cut short, even at a line
    end, and says so (``incomplete``); with ``--no-legend`` there is neither."""
    rows: list[UnitRow] = []
    count: int | None = None
    header = summary = False
    in_table = True  # the table ends at the first blank line; the legend follows
    for line in text.splitlines():
        stripped = line.strip()
        if match := re.match(r"^(\S+) loaded units? listed", stripped):
            count, summary = int(match.group(1)) if match.group(1).isdigit() else None, True
        header = header or stripped.startswith("UNIT ")
        if not stripped:
            in_table = in_table and not rows
            continue
        if not in_table or stripped.startswith("UNIT "):
            continue
        match = _ROW.match(stripped)
        if match and match.group("load") in ("loaded", "not-found", "masked", "error", "bad-setting", "stub", "merged"):
            rows.append(UnitRow(match.group("unit"), match.group("load"), match.group("active"),
                                match.group("sub"), match.group("desc").strip(), bool(match.group("mark"))))
    cut = header and not summary
    return UnitList(tuple(rows), count, "systemctl list-units ends before its 'loaded units listed' line: cut short"
                    if cut else "")


@dataclass(frozen=True)
class StartFailure:
    """What ``systemctl start/restart`` printed when the unit did not start.

    ``reason`` is ``control_process_failed``, ``not_found``, ``masked``, ``timeout``,
    ``dependency`` or ``other``; ``unit`` is the unit named in the message.
    """

    unit: str | None
    reason: str
    message: str


_START_FAILURES = (
    (re.compile(r"Job for (\S+?) failed because the control process exited with error code"), "control_process_failed"),
    (re.compile(r"Job for (\S+?) failed because a timeout was exceeded"), "timeout"),
    (re.compile(r"Job for (\S+?) failed because of unavailable resources"), "other"),
    (re.compile(r"A dependency job for (\S+?) failed"), "dependency"),
    (re.compile(r"Failed to (?:re)?start (\S+?): Unit \S+ not found"), "not_found"),
    (re.compile(r"Failed to (?:re)?start (\S+?): Unit \S+ is masked"), "masked"),
    (re.compile(r"Job for (\S+?) failed"), "other"),
    (re.compile(r"Failed to (?:re)?start (\S+?):"), "other"),
)


def parse_start_failure(text: str) -> StartFailure | None:
    """The failure in ``systemctl start`` output, or None when it printed no failure."""
    for line in text.splitlines():
        for pattern, reason in _START_FAILURES:
            match = pattern.search(line)
            if match:
                return StartFailure(match.group(1).rstrip("."), reason, line.strip())
    return None


__all__ = [
    "ACTIVE_STATES", "ENABLED_STATES", "StartFailure", "UnitList", "UnitProperties", "UnitRow",
    "parse_is_active", "parse_is_enabled", "parse_list_units", "parse_start_failure",
    "parse_systemctl_show", "parse_systemctl_show_all",
]
