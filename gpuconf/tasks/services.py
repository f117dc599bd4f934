"""systemd services: enabled or disabled; started, stopped, restarted or reloaded."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal

from pydantic import Field, field_validator

from gpuconf.errors import TaskError
from gpuconf.facts.base import Fact, Merge, Output, reply_output
from gpuconf.facts.systemd import UnitProperties, parse_start_failure, parse_systemctl_show
from gpuconf.facts.wire import ExecRequest, Reply
from gpuconf.tasks.base import (
    ApplyContext,
    Change,
    Facts,
    Params,
    Refused,
    TaskType,
    Unknown,
    Verdict,
    drift,
    in_sync,
    run,
)

UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.\\@-]+$")
PROPERTIES = "LoadState,ActiveState,SubState,UnitFileState"


def unit_properties(output: Output) -> dict[str, str]:
    """The unit's `systemctl show` properties (empty when it printed none)."""
    unit = parse_systemctl_show(output.stdout)
    return dict(unit.properties) if isinstance(unit, UnitProperties) else {}


def _show(units: tuple[str, ...]) -> ExecRequest:
    return {"op": "exec", "argv": ["systemctl", "show", *units, f"--property={PROPERTIES}", "--no-pager"],
            "timeout": 20}


def _block_of(reply: Reply, units: tuple[str, ...]) -> Reply:
    """One unit's block of a merged `systemctl show` (one block per unit asked, in order,
    blank lines between). A count that does not match leaves the unit unknown, never guessed."""
    argv = [str(a) for a in reply.get("argv") or []]
    asked = [a for a in argv[2:] if not a.startswith("-")]
    text = str(reply.get("out", ""))
    blocks = [b for b in text.split("\n\n") if b.strip()]
    if reply.get("timed_out") or units[0] not in asked:
        return reply
    if len(blocks) != len(asked):
        return {**reply, "out": "", "err": f"systemctl show printed {len(blocks)} block(s) for {len(asked)} unit(s)"}
    block = blocks[asked.index(units[0])].strip("\n")
    ends_whole = asked.index(units[0]) < len(asked) - 1 or text.endswith("\n")
    return {**reply, "out": block + ("\n" if ends_whole else "")}


def unit_fact(name: str) -> Fact[tuple[dict[str, str], Output]]:
    """`systemctl show NAME`: one `systemctl show` for every unit of the batch (gpuconf/facts/merge.py)."""
    def parse(reply: Reply) -> tuple[dict[str, str], Output]:
        output = reply_output(reply)
        return unit_properties(output), output

    return Fact(f"unit:{name}", _show((name,)), parse,
                Merge("systemctl show", (name,), lambda requests, units: _show(units), _block_of))


class ServiceParams(Params):
    name: str
    state: Literal["started", "stopped", "restarted", "reloaded"] | None = None
    enabled: bool | None = None
    daemon_reload: bool = False
    after_reboot: bool = Field(False, description="when a reboot is already pending on the host (an earlier "
                               "task's change takes effect only after it), defer the start to that reboot "
                               "instead of starting now: for a service that needs the new driver loaded")

    @field_validator("name")
    @classmethod
    def _unit(cls, value: str) -> str:
        if not UNIT_NAME.match(value):
            raise ValueError(f"'{value}' is not a valid unit name")
        return value


class Service(TaskType[ServiceParams]):
    """A systemd unit enabled or disabled, and started, stopped, restarted or
    reloaded. Restart and reload are actions: use them from handlers."""

    name = "service"
    Params = ServiceParams

    def reads(self, params: ServiceParams) -> list[Fact]:
        return [unit_fact(params.name)]

    def check(self, params: ServiceParams, facts: Facts) -> Verdict:
        values, raw = facts[unit_fact(params.name)]
        if raw.timed_out:
            raise Unknown(f"systemctl show {params.name} timed out")
        if not values:
            raise Unknown(f"systemctl show {params.name} printed nothing: {raw.stderr.strip()[:200]}")
        name = params.name
        prefix = [run(["systemctl", "daemon-reload"])] if params.daemon_reload else []
        if values.get("LoadState") == "not-found":
            # an earlier task (a package) may install it: say what apply would do; if nothing
            # does, apply fails on systemctl's own "Unit ... not found"
            values = {"ActiveState": "inactive", "UnitFileState": "not installed"}
        active = values.get("ActiveState") == "active"
        changes = []
        if params.enabled is not None:
            file_state = values.get("UnitFileState", "")
            is_enabled = file_state in ("enabled", "enabled-runtime", "static", "alias", "indirect") \
                if params.enabled else file_state in ("enabled", "enabled-runtime")
            if file_state == "masked" and params.enabled:
                raise Refused(f"unit {name} is masked; unmask it first")
            if params.enabled != is_enabled:
                verb = "enable" if params.enabled else "disable"
                changes.append(Change(f"{verb} {name} (is {file_state or 'unknown'})",
                                      [run(["systemctl", verb, name])], before=file_state,
                                      after="enabled" if params.enabled else "disabled"))
        if params.state == "started" and not active:
            if params.after_reboot and facts.reboot_pending:
                # what it needs (a driver) loads only at the next boot: starting it now would fail,
                # and enabled it starts then
                changes.append(Change(f"start {name}: deferred to the pending reboot "
                                      f"({facts.reboot_pending[0]})", [], reboot=True))
            else:
                changes.append(Change(f"start {name} (is {values.get('ActiveState')})",
                                      [run(["systemctl", "start", name])], before=values.get("ActiveState"),
                                      after="active"))
        elif params.state == "stopped" and values.get("ActiveState") in ("active", "activating", "reloading"):
            changes.append(Change(f"stop {name}", [run(["systemctl", "stop", name])], before="active",
                                  after="inactive"))
        elif params.state in ("restarted", "reloaded"):
            verb = "restart" if params.state == "restarted" else "reload"
            changes.append(Change(f"{verb} {name}", [run(["systemctl", verb, name])], verify=False))
        if changes:
            if prefix:
                changes[0] = replace(changes[0], ops=[*prefix, *changes[0].ops])
            return drift(*changes)
        state = values.get("ActiveState", "?")
        return in_sync(f"{name} is {state}, {values.get('UnitFileState', '?')}")

    def apply(self, ctx: ApplyContext, params: ServiceParams, changes: list[Change]) -> None:
        """The ops in order, in one round trip (a failure skips the rest on the host); a unit that
        does not start is said the way systemctl said it, with where to look, rather than as a
        bare exit status."""
        ops = [op for change in changes for op in change.ops]
        for op, output in zip(ops, ctx.execute(ops, explains_failures=True)):
            if output.rc == 0:
                continue
            failure = parse_start_failure(output.stderr + "\n" + output.stdout)
            said = failure.message if failure else (output.stderr.strip() or output.stdout.strip())[-400:]
            hint = f"; see journalctl -u {params.name}" if failure and failure.reason != "not_found" else ""
            raise TaskError(f"{op.description} failed (exit {output.rc}): {said}{hint}")
