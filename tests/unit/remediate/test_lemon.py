"""The lemon rule (issue 31, defect 5): a node is a lemon when it keeps failing or its fault keeps
coming back, not when the fleet's own playbook changes made it drift; each remediation says
whether it counted and why."""
from __future__ import annotations

import sqlite3

import pytest

from gpuconf.remediate.command import drift_fingerprint
from gpuconf.remediate.history import MIGRATIONS, SCHEMA_VERSION, History, Record
from gpuconf.remediate.lemon import LemonRule, judge
from gpuconf.results import ChangeReport, HostResult, Status, TaskResult

DAY = 86400.0
NOW = 1_800_000_000.0
DRIFT, XID = "gpuconf: drift: update content of /etc/fleet-version", "gpuconf: failed: Xid errors: GPU 0: Xid 79"


def record(outcome: str | None, days_ago: float, finding: str = DRIFT, fingerprint: str = "",
           cause: str = "", step: str = "done", number: int = 0) -> Record:
    return Record(number or int(days_ago * 1000), "h", "h", NOW - days_ago * DAY, None, outcome, finding,
                  "", step, "r", cause, fingerprint)


def test_drift_from_playbook_changes_never_makes_a_lemon():
    rule = LemonRule(2, 7 * DAY)  # the setting: two in a week
    changes = [record("resumed", 3, fingerprint="v1"), record("resumed", 2, fingerprint="v2"),
               record("resumed", 1, fingerprint="v3")]
    assert not rule.is_lemon(changes, NOW)
    assert [j.counted for j in judge(changes)] == [False, False, False]
    assert all("a change of the playbook" in j.why for j in judge(changes))


def test_three_failed_verifications_make_a_lemon_and_the_reason_names_them():
    rule = LemonRule(3, 7 * DAY)
    failed = [record("failed", 3, XID), record("failed", 2, XID)]
    assert not rule.is_lemon(failed, NOW)
    assert rule.is_lemon([*failed, record("failed", 1, XID)], NOW)
    assert not rule.is_lemon([*failed, record("failed", 7.5, XID)], NOW)  # out of the window
    reason = rule.reason([*failed, record("failed", 1, XID)], NOW)
    assert reason.startswith("gpuconf: lemon (3 remediations in 7d: ") and reason.count("failed") == 3, reason


def test_a_fixed_fault_counts_as_a_hardware_action():
    judged = judge([record("resumed", 1, XID)])
    assert judged[0].counted and "a fault needed fixing" in judged[0].why and judged[0].label == "fault"


def test_the_same_drift_back_after_it_was_fixed_counts_from_its_second_time():
    history = [record("resumed", 5, fingerprint="gsp"), record("resumed", 2, fingerprint="gsp"),
               record("resumed", 1, fingerprint="gsp")]
    judged = judge(list(reversed(history)))  # the order given does not matter: oldest first
    assert [j.counted for j in judged] == [False, True, True]
    assert "the same drift came back (fixed " in judged[1].why and judged[1].label == "drift back"
    assert LemonRule(2, 7 * DAY).is_lemon(history, NOW) and not LemonRule(3, 7 * DAY).is_lemon(history, NOW)


def test_a_playbook_rolled_back_is_the_fleets_change_not_drift_back():
    versions = [record("resumed", 3, fingerprint="v1"), record("resumed", 2, fingerprint="v2"),
                record("resumed", 1, fingerprint="v1")]
    assert [j.counted for j in judge(versions)] == [False, False, False]


def test_a_failed_fix_in_between_does_not_hide_the_drift_coming_back():
    history = [record("resumed", 3, fingerprint="gsp"), record("failed", 2, XID), record("resumed", 1, fingerprint="gsp")]
    assert [j.counted for j in judge(history)] == [False, True, True]


@pytest.mark.parametrize("outcome, why", [
    ("verified", "found clean"), ("skipped_busy", "jobs still running"), ("lemon", "a lemon drain"),
    ("interrupted", "interrupted"), ("foreign", "someone else's drain"), (None, "open"),
])
def test_what_applied_nothing_never_counts(outcome, why):
    (judged,) = judge([record(outcome, 1, XID, step="apply" if outcome is None else "done")])
    assert not judged.counted and why in judged.why


def test_a_drift_recorded_before_fingerprints_does_not_count():
    (judged,) = judge([record("resumed", 1)])  # a version 1 history row: drift by its finding
    assert not judged.counted and "without the changes' fingerprint" in judged.why


def drifted(*tasks: tuple[str, list[ChangeReport]], secret: bool = False) -> HostResult:
    return HostResult("h", [TaskResult("h", "play", name, Status.WOULD_CHANGE, type="file", changes=changes,
                                       secret=secret) for name, changes in tasks])


def update(before: str, after: str) -> ChangeReport:
    return ChangeReport("update content of /etc/fleet-version",
                        f"--- /etc/fleet-version\n+++ /etc/fleet-version\n@@ -1 +1 @@\n-{before}\n+{after}\n")


def test_the_fingerprint_is_what_the_drift_wants_not_what_the_node_had():
    v2 = drift_fingerprint(drifted(("Fleet version", [update("1", "2")])))
    assert v2 == drift_fingerprint(drifted(("Fleet version", [update("7", "2")])))  # the same drift back
    assert v2 != drift_fingerprint(drifted(("Fleet version", [update("2", "3")])))  # a new version
    assert v2 != drift_fingerprint(drifted(("Another task", [update("1", "2")])))


def test_a_secret_tasks_wanted_content_stays_out_of_the_fingerprint():
    one = drifted(("Token", [update("old", "secret-one")]), secret=True)
    two = drifted(("Token", [update("old", "secret-two")]), secret=True)
    assert drift_fingerprint(one) == drift_fingerprint(two)


def test_a_version_1_history_is_migrated_with_each_rows_cause(tmp_path):
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    db.execute("INSERT INTO schema_version VALUES (1)")
    for statement in MIGRATIONS[0]:
        db.execute(statement)
    for finding in (DRIFT, XID):
        db.execute("INSERT INTO remediations (host, node, started, outcome, finding, step, run) "
                   "VALUES ('h', 'h', ?, 'resumed', ?, 'done', 'old')", (NOW, finding))
    db.commit()
    db.close()
    with History(tmp_path) as history:
        assert history.version == SCHEMA_VERSION  # migrated to the newest schema, through version 2's causes
        assert [(r.cause, r.fingerprint) for r in history.records("h")] == [("drift", ""), ("fault", "")]
        assert [j.counted for j in judge(history.records("h"))] == [False, True]
