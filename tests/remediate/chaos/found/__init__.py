"""Minimised chaos scenarios that broke an invariant once: each file is one, as JSON (the scenario
and what broke); tests/remediate/test_ladder_lab.py replays every one."""
from __future__ import annotations

import json
from pathlib import Path

from tests.remediate.chaos.scenario import Scenario

FOUND = Path(__file__).resolve().parent


def keep(scenario: Scenario, broke: list[str]) -> Path:
    path = FOUND / f"seed-{scenario.seed}.json"
    path.write_text(json.dumps({"scenario": json.loads(scenario.text()), "broke": broke}, indent=1) + "\n")
    return path


def kept() -> list[Scenario]:
    return [Scenario(**json.loads(p.read_text())["scenario"]) for p in sorted(FOUND.glob("seed-*.json"))]
