"""systemd parsers (show, is-active, is-enabled, list-units, start failure) on every
real capture of those kinds."""
from __future__ import annotations

import pytest

from gpuconf.facts.common import Unparseable, incomplete
from gpuconf.facts.systemd import (
    UnitProperties,
    parse_is_active,
    parse_is_enabled,
    parse_list_units,
    parse_start_failure,
    parse_systemctl_show,
    parse_systemctl_show_all,
)
from tests.real import read_real as read

S = "systemctl/"
IS_ACTIVE = {
    S + "systemctl-is-active-active-check-systemd.txt": "active",
    S + "systemctl-is-active-failed-check-systemd.txt": "failed",
    S + "systemctl-is-active-inactive-check-systemd.txt": "inactive",
}


@pytest.mark.parametrize("rel", sorted(IS_ACTIVE))
def test_is_active(rel: str) -> None:
    assert parse_is_active(read(rel)) == IS_ACTIVE[rel]


def test_is_enabled_and_garbage() -> None:
    assert parse_is_enabled("enabled\n") == "enabled"
    assert parse_is_enabled("masked\n") == "masked"
    assert parse_is_enabled(
        "Failed to get unit file state for nvidia-persistenced.service: No such file or directory\n") == "not-found"
    assert isinstance(parse_is_active("Something else entirely"), Unparseable)


# file -> (Id, LoadState, ActiveState, SubState, UnitFileState, MainPID, Result, property count)
SHOW = {
    S + "systemctl-show-apt-daily.timer-check-systemd.txt":
        ("apt-daily.timer", "loaded", "active", "waiting", "enabled", None, "success", 69),
    S + "systemctl-show-nginx.service-full-check-systemd.txt":
        ("nginx.service", "loaded", "active", "running", "enabled", 1129, "success", 253),
    S + "systemctl-show-property-Id-ActiveState-SubState-LoadState-nginx-check-systemd.txt":
        ("nginx.service", "loaded", "active", "running", None, None, None, 4),
}


@pytest.mark.parametrize("rel", sorted(SHOW))
def test_systemctl_show(rel: str) -> None:
    unit = parse_systemctl_show(read(rel))
    assert isinstance(unit, UnitProperties)
    assert (unit.id, unit.load_state, unit.active_state, unit.sub_state, unit.unit_file_state,
            unit.main_pid, unit.result, len(unit.properties)) == SHOW[rel]


def test_systemctl_show_values_with_equals_and_structs() -> None:
    nginx = parse_systemctl_show(read(S + "systemctl-show-nginx.service-full-check-systemd.txt"))
    assert isinstance(nginx, UnitProperties)
    assert nginx.get("ExecStart", "").startswith("{ path=/usr/sbin/nginx ; argv[]=/usr/sbin/nginx -g daemon on;")
    assert (nginx.get("UID"), nginx.get("WatchdogTimestamp"), nginx.get("TimeoutStartUSec")) == (
        "[not set]", "n/a", "1min 30s")
    timer = parse_systemctl_show(read(S + "systemctl-show-apt-daily.timer-check-systemd.txt"))
    assert isinstance(timer, UnitProperties) and timer.get("Unit") == "apt-daily.service"
    two = parse_systemctl_show_all("Id=a.service\nActiveState=active\n\nId=b.service\nActiveState=failed\n")
    assert [(u.id, u.active_state) for u in two] == [("a.service", "active"), ("b.service", "failed")]
    assert isinstance(parse_systemctl_show(""), Unparseable)


def test_list_units() -> None:
    listing = parse_list_units(read(S + "systemctl-list-units-failed-masked-check-systemd.txt"))
    assert [(u.unit, u.load, u.active, u.sub) for u in listing.units] == [
        ("rtkit-daemon.service", "loaded", "inactive", "running"),
        ("setvtrgb.service", "loaded", "active", "exited"),
        ("smartd.service", "masked", "failed", "dead")]
    assert [u.unit for u in listing.failed] == ["smartd.service"]
    assert listing.listed_count is None  # "xxx loaded units listed" was anonymised
    assert listing.incomplete == ""      # ... but the closing line is there
    text = read(S + "systemctl-list-units-failed-masked-check-systemd.txt")
    cut = parse_list_units(text[: text.index("xxx loaded units listed")])   # at the line end before it
    assert cut.units == listing.units and "loaded units listed" in incomplete(cut)
    # SYNTHETIC (documented shape, not a capture): a failed unit with its marker, as systemd 249+ prints it
    failed = parse_list_units(
        "  UNIT                         LOAD   ACTIVE SUB    DESCRIPTION\n"
        "● nvidia-fabricmanager.service loaded failed failed NVIDIA fabric manager service\n\n"
        "LOAD   = Reflects whether the unit definition was properly loaded.\n\n1 loaded units listed.\n")
    assert [(u.unit, u.marked) for u in failed.failed] == [("nvidia-fabricmanager.service", True)]
    assert failed.listed_count == 1
    no_legend = parse_list_units("nvidia-fabricmanager.service loaded failed failed NVIDIA fabric manager service\n")
    assert no_legend.failed and no_legend.incomplete == ""   # --no-legend: no header, no closing line


def test_start_failure() -> None:
    failure = parse_start_failure(read(S + "systemctl-start-nvidia-fabricmanager-failed-gpu-operator-356.txt"))
    assert failure is not None
    assert (failure.unit, failure.reason) == ("nvidia-fabricmanager.service", "control_process_failed")
    missing = parse_start_failure("Failed to start nvidia-fabricmanager.service: Unit nvidia-fabricmanager.service not found.\n")
    assert missing is not None and missing.reason == "not_found"
    assert parse_start_failure("") is None


CASES = sorted(IS_ACTIVE) + sorted(SHOW) + [S + "systemctl-list-units-failed-masked-check-systemd.txt",
                                            S + "systemctl-start-nvidia-fabricmanager-failed-gpu-operator-356.txt"]
