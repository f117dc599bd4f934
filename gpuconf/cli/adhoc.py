"""`gpuconf run PATTERN -a COMMAND`: Ansible's ad hoc mode, with the output of hosts that
gave the same result printed once (`node01, node02 | CHANGED | rc=0 >>`).

The command is one `command` task in a play of its own, run by the same runner as a
playbook: the same connections, run lock, timeouts and exit codes.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TextIO

from gpuconf.engine.options import RunOptions
from gpuconf.engine.runner import Runner
from gpuconf.errors import Location, UsageError
from gpuconf.inventory.hosts import Inventory
from gpuconf.inventory.patterns import match_hosts
from gpuconf.playbook.models import Play, Playbook, PlayKeywords, TaskDef, TaskKeywords
from gpuconf.report.text import printable
from gpuconf.results import RunResult, Status

WHERE = Location("<command line>")


def adhoc_playbook(pattern: str, command: str, become: bool, timeout: float) -> Playbook:
    task = TaskDef(name=command, type="command", params={"cmd": command, "shell": True, "timeout": timeout},
                   keywords=TaskKeywords.model_validate({"name": command}), location=WHERE, become=become or None)
    keywords = PlayKeywords.model_validate({"hosts": pattern, "gather_facts": False, "become": become or None})
    play = Play(f"ad hoc: {command}", pattern, keywords, {}, [task], [], WHERE)
    return Playbook(Path("<ad hoc>"), [play])


def run_adhoc(inventory: Inventory, pattern: str, command: str, options: RunOptions, become: bool, timeout: float,
              stream: TextIO) -> RunResult:
    """`inventory` is narrowed by --limit already (gpuconf.inventory.patterns.narrow)."""
    if not match_hosts(inventory, pattern):
        within = " within --limit" if inventory.limit is not None else ""
        raise UsageError(f"'{pattern}' matches no host of {inventory.source}{within}")
    runner = Runner(inventory, adhoc_playbook(pattern, command, become, timeout), options)
    result = runner.run()
    print_grouped(result, stream)
    return result


def print_grouped(result: RunResult, stream: TextIO) -> None:
    """One block per distinct result: the hosts that gave it, its status, rc and output."""
    groups: dict[tuple[str, object, str, str], list[str]] = defaultdict(list)  # status, rc, output, status
    for name, host in result.hosts.items():
        task = host.tasks[-1] if host.tasks else None
        if task is None:
            continue
        status = {Status.CHANGED: "CHANGED", Status.OK: "SUCCESS", Status.UNREACHABLE: "UNREACHABLE"}.get(
            task.status, task.status.value.upper())
        output = task.stdout + task.stderr if task.status == Status.CHANGED else (task.error or task.message)
        groups[(status, task.data.get("rc"), output, task.status.value)].append(name)
    for (status, rc, output, _), names in sorted(groups.items(), key=lambda item: item[1]):
        where = ", ".join(names)
        code = f" | rc={rc}" if rc is not None else ""
        stream.write(printable(f"{where} | {status}{code} >>\n{output.rstrip()}\n\n"))
    stream.flush()
