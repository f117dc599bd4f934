"""A chaos scenario, drawn from a seed: a fault (an Xid, its GPU, sticky or not), a job (none, short,
or longer than the drain timeout), an operator's drain at a step of the remediation (or none), a
signal to remediate at a step and then a rerun (or none), gates run beside it as prologs would, a
job submitted to the node after the fault, and a concurrent remediate with another state directory.
Pure: no lab here. `simpler` gives the one-step simplifications a failing scenario is minimised by."""
from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass

# Xids the lab can log, with the catalog's action: 79 reboot_node, 48 and 119 reset_gpu (a reset
# answers them), 74 drain (carried out as a reset), 94 restart_app (a warning: the GPU is fine)
FAULTS = ("79", "48", "119", "74", "94", "")
FAILING = ("79", "48", "119", "74")  # the shipped catalog fails these: the GPU is faulty until answered
STEPS = ("drain", "wait", "collect", "reset", "reboot", "apply", "verify")
SIGNALS = ("INT", "KILL")
JOBS = ("none", "short", "long")


@dataclass(frozen=True)
class Scenario:
    seed: int
    fault: str = ""  # the Xid code, "" for none
    gpu: int = 0
    sticky: bool = False  # failed hardware: the fault comes back at every boot and after a reset
    job: str = "none"  # a job on the node before the fault: none, short (seconds), long (past --drain-timeout)
    operator: str = ""  # the step at which a person drains the node ("" for never)
    signal: str = ""  # "INT@step" or "KILL@step": remediate is signalled there, then run again
    gates: int = 0  # gates run on the node while remediate works (as concurrent prologs)
    late_job: bool = False  # a job submitted to the node after the fault
    concurrent: bool = False  # a second remediate, with another state directory, at the same time
    drift: bool = False  # the node also drifted in a way whose apply reboots it (a second reboot)

    def text(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @staticmethod
    def from_text(text: str) -> Scenario:
        return Scenario(**json.loads(text))

    @property
    def faulty(self) -> bool:
        """The lab's ground truth at injection: the GPU is faulty (not an application's fault)."""
        return self.fault in FAILING


def generate(seed: int, gpus: int = 1) -> Scenario:
    rng = random.Random(seed)
    fault = rng.choice(FAULTS)
    return Scenario(
        seed=seed, fault=fault, gpu=rng.randrange(gpus), sticky=bool(fault) and rng.random() < 0.4,
        job=rng.choice(JOBS), operator=rng.choice(STEPS) if rng.random() < 0.3 else "",
        signal=f"{rng.choice(SIGNALS)}@{rng.choice(STEPS)}" if rng.random() < 0.3 else "",
        gates=rng.choice((0, 0, 1, 2)), late_job=rng.random() < 0.3, concurrent=rng.random() < 0.25,
        drift=rng.random() < 0.3)


def simpler(scenario: Scenario) -> list[Scenario]:
    """Each scenario one dimension simpler than this one, the likeliest culprits' removal last."""
    plain = Scenario(scenario.seed)
    candidates = []
    for field in ("concurrent", "late_job", "gates", "drift", "signal", "operator", "job", "sticky", "gpu", "fault"):
        if getattr(scenario, field) != getattr(plain, field):
            simplified = dataclasses.replace(scenario, **{field: getattr(plain, field)})
            candidates.append(simplified if simplified.fault else dataclasses.replace(simplified, sticky=False))
    return candidates


def minimise(scenario: Scenario, fails) -> Scenario:
    """The simplest scenario that still fails (`fails(s)` runs it), one dimension at a time."""
    current = scenario
    shrunk = True
    while shrunk:
        shrunk = False
        for candidate in simpler(current):
            if fails(candidate):
                current, shrunk = candidate, True
                break
    return current
