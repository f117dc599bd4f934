"""The remediation's pure rules: budget arithmetic, durations, what to do with a node, waves,
the lemon rule and the replay of a journal left by a stopped run."""
from __future__ import annotations

import pytest

from gpuconf.errors import UsageError
from gpuconf.remediate import plan
from gpuconf.remediate.history import Record
from gpuconf.scheduler.interface import Node

DAY = 86400.0
NOW = 1_800_000_000.0


@pytest.mark.parametrize("text, total, limit", [
    ("1", 6, 1), ("2", 6, 2), ("50%", 6, 3), ("34%", 6, 2), ("10%", 6, 1), ("100%", 4, 4), ("25%", 1000, 250),
])
def test_the_budget_is_a_count_or_a_percentage_rounded_down_but_at_least_one(text, total, limit):
    assert plan.parse_budget(text).limit(total) == limit


@pytest.mark.parametrize("text", ["0", "-1", "0%", "150%", "x", "", "1.5"])
def test_a_budget_that_allows_nothing_or_is_not_a_number_is_refused(text):
    with pytest.raises(UsageError, match="--max-unavailable"):
        plan.parse_budget(text)


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("7d", 7 * DAY),
                                           ("1w", 7 * DAY), ("0.5m", 30)])
def test_durations(text, seconds):
    assert plan.parse_duration(text, "--drain-timeout") == seconds


@pytest.mark.parametrize("text", ["", "x", "5y", "-3m", "0"])
def test_a_bad_duration_names_its_flag(text):
    with pytest.raises(UsageError, match="--lemon-window"):
        plan.parse_duration(text, "--lemon-window")


def node(name: str, state: str = "IDLE", reason: str | None = None) -> Node:
    return Node(name, state, reason)


def test_nodes_already_down_or_drained_count_against_the_budget():
    states = {"n1": node("n1", "DOWN*", "Not responding"), "n2": node("n2"), "n3": node("n3"), "n4": node("n4")}
    assert plan.next_wave(["n2", "n3"], states, states, 2, 1).nodes == ["n2"]
    assert plan.next_wave(["n2", "n3"], states, states, 1, 1).nodes == []
    assert plan.next_wave(["n2", "n3"], states, states, 3, 1).nodes == ["n2", "n3"]


def test_a_node_gpuconf_already_drained_costs_no_budget():
    states = {"n1": node("n1", "IDLE+DRAIN", "gpuconf: remediation failed: x"), "n2": node("n2"),
              "n3": node("n3", "MIXED+DRAIN", "maintenance")}
    # two out of service already, limit 2: n1 (already out) goes, n2 (in service) waits
    assert plan.next_wave(["n1", "n2"], states, states, 2, 1).nodes == ["n1"]


def test_the_wave_counts_only_the_nodes_in_scope():
    states = {"n1": node("n1"), "other": node("other", "DOWN", "dead")}
    assert plan.next_wave(["n1"], states, ["n1"], 1, 1).nodes == ["n1"]


@pytest.mark.parametrize("state, reason, in_service, busy, ours", [
    ("IDLE", None, True, False, False),
    ("MIXED", None, True, True, False),
    ("ALLOCATED+DRAIN", "gpuconf: drift: x", False, True, True),
    ("IDLE+DRAIN", "gpuconf: drift: x", False, False, True),
    ("IDLE+COMPLETING+DRAIN", "gpuconf: drift: x", False, True, True),
    ("DOWN*+DRAIN", "maintenance", False, False, False),
    ("DOWN", "gpuconf: drift: x : reboot complete", False, False, True),
    ("IDLE*", None, False, False, False),
    ("IDLE+DRAIN+REBOOT_ISSUED", "gpuconf: drift: x", False, False, True),
])
def test_node_states(state, reason, in_service, busy, ours):
    n = node("n", state, reason)
    assert (n.in_service, n.busy, n.ours, n.foreign) == (in_service, busy, ours, not in_service and not ours)


CLEAN, DRIFT = plan.Verdict("h", True), plan.Verdict("h", False, "gpuconf: drift: x")


@pytest.mark.parametrize("verdict, state, reason, lemon, action", [
    (CLEAN, "IDLE", None, False, plan.NOTHING),
    (DRIFT, "MIXED", None, False, plan.REMEDIATE),
    (DRIFT, "MIXED", None, True, plan.LEMON),
    (DRIFT, "IDLE+DRAIN", "maintenance by bob", False, plan.FOREIGN),
    (CLEAN, "IDLE+DRAIN", "maintenance by bob", False, plan.FOREIGN),
    (CLEAN, "IDLE+DRAIN", "gpuconf: remediation failed: x", False, plan.RESUME),
    (DRIFT, "IDLE+DRAIN", "gpuconf: remediation failed: x", False, plan.REMEDIATE),
    (DRIFT, "IDLE+DRAIN", "gpuconf: lemon (3 remediations in 7d: ...)", True, plan.STILL_LEMON),
    (CLEAN, "IDLE+DRAIN", "gpuconf: lemon (3 remediations in 7d: ...)", True, plan.STILL_LEMON),
    (CLEAN, "IDLE+DRAIN", "gpuconf: lemon (3 remediations in 7d: ...)", False, plan.RESUME),
    (plan.Verdict("h", False, "gpuconf: unreachable: x", unreachable=True), "IDLE", None, False, plan.UNREACHABLE),
])
def test_what_to_do_with_a_node(verdict, state, reason, lemon, action):
    assert plan.decide(verdict, node("h", state, reason), lemon) == action


def test_a_node_the_scheduler_does_not_know():
    assert plan.decide(DRIFT, None, False) == plan.NOT_IN_SCHEDULER


def test_a_failed_reason_keeps_one_prefix_and_one_line():
    assert plan.failed_reason("gpuconf: failed: Xid 79\nmore") == "gpuconf: remediation failed: failed: Xid 79"
    assert len(plan.failed_reason("x" * 500)) <= 120


@pytest.mark.parametrize("step, state, reason, closing", [
    ("apply", "DOWN", "gpuconf: drift: x : reboot complete", None),   # still ours: carried on
    ("wait", "MIXED+DRAIN", "gpuconf: drift: x", None),
    ("drain", "MIXED", None, "interrupted"),                          # killed before the drain took
    ("resume", "IDLE", None, "resumed"),                              # killed after the resume
    ("undrain", "MIXED", None, "skipped_busy"),
    ("apply", "IDLE+DRAIN", "bob: bad fan", "foreign"),               # someone else took it over
    ("resume", "IDLE+DRAIN", "bob: bad fan", "foreign"),
])
def test_a_journal_left_open_is_carried_on_or_closed(step, state, reason, closing):
    left = Record(1, "h", "h", NOW, None, None, "gpuconf: drift: x", "", step, "r")
    assert plan.replay(left, node("h", state, reason)) == closing


def test_a_hosts_check_result_becomes_its_verdict():
    from gpuconf.remediate.command import verdict
    from gpuconf.results import ChangeReport, Finding, HostResult, Status, TaskResult

    drifted = HostResult("h", [TaskResult("h", "p", "gsp", Status.WOULD_CHANGE,
                                          changes=[ChangeReport("remove the GSP override /etc/x")])])
    found = verdict(drifted, "h", False)
    assert (found.clean, found.finding, found.cause) == (False, "gpuconf: drift: remove the GSP override /etc/x", "drift")
    assert len(found.fingerprint) == 16
    broken = HostResult("h", [*drifted.tasks, TaskResult("h", "p", "xid", Status.FAILED, error="Xid 79")])
    assert (verdict(broken, "h", False).cause, verdict(broken, "h", False).fingerprint) == ("fault", "")
    assert verdict(HostResult("h", [TaskResult("h", "p", "t", Status.OK)]), "h", False).clean
    assert verdict(None, "h", False).clean  # no play of the playbook runs on it
    gone = verdict(HostResult("h", unreachable=True, error="timed out\nmore"), "h", False)
    assert (gone.unreachable, gone.finding) == (True, "gpuconf: unreachable: timed out")
    warm = HostResult("h", [TaskResult("h", "p", "temp", Status.OK,
                                       findings=[Finding("temperature", "warning", "GPU 0 at 82 C")])])
    assert verdict(warm, "h", False).clean and not verdict(warm, "h", True).clean
