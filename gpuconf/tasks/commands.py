"""Arbitrary commands (the only way to run one) and assertions."""
from __future__ import annotations

import shlex

from pydantic import Field, field_validator

from gpuconf.errors import TaskError
from gpuconf.facts.base import Fact, Output, file_state, user_command
from gpuconf.tasks.base import (
    ApplyContext,
    Change,
    Facts,
    Params,
    Refused,
    Resolver,
    TaskType,
    Unknown,
    Verdict,
    drift,
    in_sync,
    run,
    run_argv,
)


class CommandParams(Params):
    cmd: str | list[str]
    shell: bool = False  # a string runs in /bin/sh (Ansible's `shell`), else it is split into words
    creates: str | None = None
    removes: str | None = None
    unless: str | list[str] | None = None
    chdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    stdin: str | None = None
    timeout: float = Field(600, gt=0)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not key.isidentifier():
                raise ValueError(f"'{key}' is not a valid environment variable name")
        return value


def _shell_text(command: str | list[str]) -> str:
    return command if isinstance(command, str) else shlex.join(command)


def _unless_fact(params: CommandParams) -> Fact[Output]:
    return user_command(_shell_text(params.unless or ""), lambda out: out, timeout=60)


class Command(TaskType[CommandParams]):
    """Run a command: a program and its words, no shell (each word's $VAR and ~ are expanded on the
    host, as Ansible's command does; a line is split into words as a shell would, after it is
    templated). With `shell: true` (Ansible's `shell:`) the line runs in /bin/sh.

    Check mode never runs `cmd`: it reports "would run". Guards make it
    idempotent: `creates` (skip if the path exists), `removes` (skip if it
    does not), `unless` (skip if this command exits 0). `unless` is a test and
    must not change anything: it runs in check mode too, read-only."""

    name = "command"
    reads_when_told = True
    Params = CommandParams

    def check_mode_data(self, params: CommandParams) -> dict[str, object] | None:
        """Check mode never runs it: as Ansible's command, it says it would have run, and without a
        guard (creates, removes, unless) that cannot say whether it is needed, it is skipped."""
        data: dict[str, object] = {"failed": False, "msg": "Command would have run if not in check mode", "rc": 0,
                                "stdout": "", "stdout_lines": [], "stderr": "", "stderr_lines": []}
        if not (params.creates or params.removes or params.unless):
            data["skipped"] = True
        return data

    def reads(self, params: CommandParams) -> list[Fact]:
        facts: list[Fact] = [file_state(p, with_content=False) for p in (params.creates, params.removes) if p]
        if params.unless:
            facts.append(_unless_fact(params))
        return facts

    def check(self, params: CommandParams, facts: Facts) -> Verdict:
        if params.creates and facts[file_state(params.creates, with_content=False)].exists:
            return in_sync(f"{params.creates} exists")
        if params.removes and not facts[file_state(params.removes, with_content=False)].exists:
            return in_sync(f"{params.removes} does not exist")
        if params.unless:
            result: Output = facts[_unless_fact(params)]
            if result.timed_out:
                raise Unknown(f"the unless command timed out: {_shell_text(params.unless)}")
            if result.rc == 0:
                return in_sync(f"unless command succeeded: {_shell_text(params.unless)}")
        prefix = ""
        if params.chdir:
            prefix = f"cd {shlex.quote(params.chdir)} && "
        if params.env:
            prefix += "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in params.env.items()) + " "
        guarded = bool(params.creates or params.removes or params.unless)
        description = f"run: {_shell_text(params.cmd)}"
        if isinstance(params.cmd, str) and params.shell:
            op = run(prefix + params.cmd, params.timeout, stdin=params.stdin, description=description)
        else:  # no shell, as Ansible's command: a line is split into words as its module splits it
            try:
                argv = shlex.split(params.cmd) if isinstance(params.cmd, str) else params.cmd
            except ValueError as exc:
                raise TaskError(f"cannot split the command into words ({exc}): {params.cmd}") from None
            op = run_argv(argv, prefix, params.timeout, params.stdin, description)
        return drift(Change(description, [op], verify=guarded))

    def apply(self, ctx: ApplyContext, params: CommandParams, changes: list[Change]) -> dict[str, object]:
        outputs = ctx.execute([op for change in changes for op in change.ops])
        last = outputs[-1] if outputs else Output("")
        return {"stdout": last.stdout, "stderr": last.stderr, "rc": last.rc}


class AssertParams(Params):
    that: str | bool | list[str | bool]
    fail_msg: str | None = None
    success_msg: str | None = None


class Assert(TaskType[AssertParams]):
    """Expressions over facts, variables and registered results that must all
    hold. The same in check and apply: it changes nothing."""

    name = "assert"
    Params = AssertParams
    controller_only = True

    def resolve(self, values: dict[str, object], resolver: Resolver) -> dict[str, object]:
        """The conditions are evaluated over the task's variables while it is rendered; the first
        that does not hold fails the task, registered as Ansible's assert registers it."""
        that = values.get("that")
        for condition in that if isinstance(that, list) else [that]:
            if isinstance(condition, (str, bool)) and not resolver.holds(condition):
                shown = values.get("fail_msg") or "Assertion failed"
                raise Refused(str(values.get("fail_msg") or f"assertion failed: {condition}"),
                              data={"msg": shown, "assertion": condition, "evaluated_to": False})
        return values

    def check(self, params: AssertParams, facts: Facts) -> Verdict:
        conditions = params.that if isinstance(params.that, list) else [params.that]
        return in_sync(params.success_msg or f"all {len(conditions)} assertion(s) hold",
                       msg=params.success_msg or "All assertions passed")
