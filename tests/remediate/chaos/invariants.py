"""The five invariants of issue 35, judged on what one scenario's run left (an `Observation`): pure,
so each is tested on its own (tests/unit/remediate/test_chaos_invariants.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

from tests.remediate.chaos.scenario import Scenario

# what remediate says right before it acts on a node (gpuconf/remediate/loop.py, steps.py, ladder.py)
ACTS = ("apply", "recovery: ", "reboot", "resume", "drain: ", "hardware hold")
RACE = 0.5  # seconds: Slurm has no compare-and-set of a reason; remediate reads the node right before each act


@dataclass(frozen=True)
class Line:
    at: float  # when the harness read it
    run: str  # which remediate said it: main, rerun, concurrent
    text: str


@dataclass(frozen=True)
class Job:
    id: str
    state: str  # Slurm's JobState at the end
    node: str  # NodeList
    started: float | None  # StartTime, when it ran
    submitted: float
    cancelled_by_us: bool = False  # pending at the end: the harness cancelled it (it never ran)


@dataclass
class Observation:
    scenario: Scenario
    node: str
    injected: float | None  # when the fault went into the kernel log
    rebooted: bool  # the node's boot id changed during the scenario
    answered: bool  # a completed reset of the GPU logged after the fault (gpuconf's reset lines)
    in_service: bool
    reason: str | None
    operator_reason: str | None = None
    operator_at: float | None = None
    lines: list[Line] = field(default_factory=list)
    holds: list[str] = field(default_factory=list)  # the hosts `gpuconf hardware` lists
    jobs: list[Job] = field(default_factory=list)
    breaker: list[tuple[set[str], set[str]]] = field(default_factory=list)  # (counted, needed) per state dir

    @property
    def faulty(self) -> bool:
        """The lab's ground truth now: an injected failing Xid that nothing answered (sticky: nothing does)."""
        s = self.scenario
        return s.faulty and (s.sticky or not (self.rebooted or (self.answered and s.fault != "79")))

    def resumed_at(self) -> float | None:
        """When remediate put the node back after verifying it (its `resume` line)."""
        times = [line.at for line in self.lines if line.text == f"{self.node}: resume"]
        return max(times) if times else None


def violations(o: Observation) -> list[str]:
    found = []
    s = o.scenario
    if o.faulty and o.in_service:
        found.append(f"1: {o.node} is in service with a faulty GPU (Xid {s.fault}{', sticky' if s.sticky else ''})")
    if s.faulty and s.sticky and o.rebooted and o.operator_reason is None:
        if o.node not in o.holds or not (o.reason or "").startswith("gpuconf: hardware:"):
            found.append(f"2: the sticky Xid {s.fault} survived a reboot, yet {o.node} is no hold "
                         f"(reason {o.reason!r}, holds {o.holds})")
    if o.operator_reason is not None and o.operator_at is not None:
        # remediate's own drain in the milliseconds of the person's (read, then command: Slurm has no
        # compare-and-set of a reason) is the race docs/remediate.md names, which no tool can close
        raced = any(abs(line.at - o.operator_at) <= RACE and line.text.startswith(f"{o.node}: drain: ")
                    for line in o.lines)
        if o.reason != o.operator_reason and not raced:
            found.append(f"3: the person's reason {o.operator_reason!r} became {o.reason!r}")
        late = [line for line in o.lines if line.at > o.operator_at + RACE
                and line.text.startswith(tuple(f"{o.node}: {act}" for act in ACTS))]
        if late:
            found.append(f"3: acted on {o.node} after the person's drain: {late[0].run}: {late[0].text}")
    for job in o.jobs:
        if job.started is not None and job.state not in ("COMPLETED", "RUNNING") and not job.cancelled_by_us:
            found.append(f"4: job {job.id} was killed ({job.state})")
        if o.injected is not None and s.faulty and job.node == o.node and job.started is not None \
                and job.started > o.injected and job.submitted > o.injected:
            resumed = o.resumed_at()
            if o.faulty or resumed is None or job.started < resumed - RACE:
                found.append(f"4: job {job.id} started on {o.node} after its fault was in the kernel log")
    for counted, needed in o.breaker:
        if counted != needed:
            found.append(f"5: the breaker counts {sorted(counted)}, the journal's hardware actions are {sorted(needed)}")
    return found
