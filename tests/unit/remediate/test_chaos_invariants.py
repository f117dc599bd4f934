"""The chaos harness's own checks (tests/remediate/chaos/): each of issue 35's five invariants fires
on an observation that breaks it and stays quiet on one that keeps it; scenarios are reproducible
from their seed and minimised one dimension at a time."""
from __future__ import annotations

import dataclasses

from tests.remediate.chaos.invariants import Job, Line, Observation, violations
from tests.remediate.chaos.scenario import Scenario, generate, minimise, simpler

NODE = "t4-01"


def seen(**changes) -> Observation:
    base = Observation(Scenario(1, fault="79", sticky=True), NODE, injected=100.0, rebooted=True, answered=False,
                       in_service=False, reason="gpuconf: hardware: Xid 79 GPU S 0000:3b:00.0", holds=[NODE])
    return dataclasses.replace(base, **changes)


def numbers(observation: Observation) -> list[str]:
    return [v.split(":")[0] for v in violations(observation)]


def test_a_held_sticky_fault_keeps_every_invariant():
    assert violations(seen()) == []


def test_each_invariant_fires_when_broken():
    assert numbers(seen(in_service=True, reason=None, holds=[])) == ["1", "2"]
    assert numbers(seen(reason="reboot issued", holds=[])) == ["2"]
    person = "admin: RMA"
    assert numbers(seen(operator_reason=person, operator_at=150.0, reason=person)) == []
    assert numbers(seen(operator_reason=person, operator_at=150.0, reason=person,
                        lines=[Line(151.0, "main", f"{NODE}: apply")])) == ["3"]
    assert numbers(seen(operator_reason=person, operator_at=150.0, reason="gpuconf: x")) == ["3"]
    assert numbers(seen(jobs=[Job("7", "NODE_FAIL", NODE, 90.0, 80.0)])) == ["4"]
    assert numbers(seen(jobs=[Job("8", "COMPLETED", NODE, 120.0, 110.0)])) == ["4"]  # started on the faulty node
    assert numbers(seen(jobs=[Job("9", "CANCELLED", "", None, 110.0, cancelled_by_us=True)])) == []
    assert numbers(seen(breaker=[({NODE}, {NODE})])) == []
    assert numbers(seen(breaker=[(set(), {NODE})])) == ["5"]


def test_a_fault_a_reboot_answered_leaves_the_node_free_to_serve():
    fixed = seen(scenario=Scenario(2, fault="48"), in_service=True, reason=None, holds=[],
                 lines=[Line(200.0, "main", f"{NODE}: resume")], jobs=[Job("3", "COMPLETED", NODE, 210.0, 150.0)])
    assert violations(fixed) == []


def test_scenarios_come_from_their_seed_and_shrink_one_dimension_at_a_time():
    assert generate(42) == generate(42) and Scenario.from_text(generate(42).text()) == generate(42)
    busy = Scenario(5, fault="119", sticky=True, job="long", operator="reset", gates=2, concurrent=True)
    assert all(sum(getattr(c, f) != getattr(busy, f) for f in ("job", "operator", "gates", "concurrent", "sticky"))
               <= 1 for c in simpler(busy) if c.fault)
    assert all(not c.sticky for c in simpler(busy) if not c.fault)
    smallest = minimise(busy, lambda s: s.operator == "reset")  # only the operator's step matters
    assert smallest == Scenario(5, operator="reset")


def test_a_drain_of_remediate_in_the_milliseconds_of_the_persons_is_the_named_race():
    person = "admin: RMA"
    raced = seen(operator_reason=person, operator_at=150.0, reason="gpuconf: hardware: Xid 79 GPU S 0000:3b:00.0",
                 lines=[Line(149.997, "main", f"{NODE}: drain: gpuconf: hardware: Xid 79 GPU S 0000:3b:00.0")])
    assert numbers(raced) == []
