"""Read-only verification: a command's output must match, in check and apply."""
from __future__ import annotations

import re
from typing import TypedDict

from pydantic import Field, model_validator

from gpuconf.facts.base import Fact, Output, user_command
from gpuconf.tasks.base import Change, Facts, Params, Refused, TaskType, Unknown, Verdict, drift, in_sync


class Registered(TypedDict):
    """What `register` keeps of the probe's command, as a shell task's."""

    stdout: str
    stderr: str
    rc: int


class ProbeParams(Params):
    command: str
    contains: str | None = None
    matches: str | None = None
    rc: int = 0
    timeout: float = Field(30, gt=0)
    pending_in_check: bool = True

    @model_validator(mode="after")
    def _regex(self) -> ProbeParams:
        if self.matches is not None:
            try:
                re.compile(self.matches)
            except re.error as exc:
                raise ValueError(f"bad regexp in matches: {exc}") from None
        return self


class Probe(TaskType[ProbeParams]):
    """Run a read-only command (it runs in check mode too: it must not change
    anything) and require its exit code and output (`contains`, `matches`).
    In check mode a mismatch is reported as what apply will verify, since the
    tasks before it have not run yet; in apply it is a failure. Its stdout,
    stderr and rc are registered."""

    name = "probe"
    Params = ProbeParams

    def _fact(self, params: ProbeParams) -> Fact[Output]:
        return user_command(params.command, lambda out: out, timeout=params.timeout)

    def reads(self, params: ProbeParams) -> list[Fact]:
        return [self._fact(params)]

    def check(self, params: ProbeParams, facts: Facts) -> Verdict:
        out: Output = facts[self._fact(params)]
        if out.timed_out:
            raise Unknown(f"timed out after {out.timeout or params.timeout:g} s: {params.command}")
        problem = None
        if out.rc != params.rc:
            problem = f"exit {out.rc}, want {params.rc}: {(out.stderr or out.stdout).strip()[-200:]}"
        elif params.contains is not None and params.contains not in out.stdout:
            problem = f"output lacks {params.contains!r}: {out.stdout.strip()[-200:]!r}"
        elif params.matches is not None and not re.search(params.matches, out.stdout, re.M):
            problem = f"output does not match {params.matches!r}: {out.stdout.strip()[-200:]!r}"
        registered = Registered(stdout=out.stdout, stderr=out.stderr, rc=out.rc)
        if problem is None:
            return in_sync(f"{params.command}: as expected", **registered)
        if params.pending_in_check:
            # the tasks before it have not run in a check: what apply will verify
            return drift(Change(f"verify `{params.command}`: {problem}"), **registered)
        raise Refused(f"`{params.command}`: {problem}", data=registered)
