"""A run's results folded across hosts: what a fleet's output shows by default.

At 100 hosts a line per host and task is 3,000 lines that nobody reads. Here
the task results that are not in sync are grouped by what they say (status,
task, first line of the error or message, the change summaries, the findings),
each group with its hosts in compressed form (`a100-[001-097,099]`), failures
first. The PLAY RECAP folds the same way: hosts with identical counts share a
line. Both are pure functions of a `RunResult`; `text.py` prints them.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpuconf.report.hostlist import compress
from gpuconf.report.redact import visible_changes, visible_error, visible_findings, visible_message
from gpuconf.results import RECAP, TALLIES, HostResult, RunResult, Status, TaskResult, tally_of

# failures first, then what needs a person, then drift and changes
ORDER = {Status.UNREACHABLE: 0, Status.FAILED: 1, Status.UNKNOWN: 2, Status.REBOOT_PENDING: 3,
         Status.WOULD_CHANGE: 4, Status.CHANGED: 5, Status.OK: 6}  # ok: only a task with a health warning


def first_line(text: str, most: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= most else line[: most - 1] + "…"


@dataclass
class TaskGroup:
    """One thing that happened on one or more hosts, said once."""

    status: Status
    task: str  # "role : task", "handler role : task", or "connect"
    detail: str  # the first line of the error, or the task's message
    changes: tuple[str, ...]
    findings: tuple[str, ...]
    hosts: list[str] = field(default_factory=list)
    first: TaskResult | None = None  # the first host's result: its diff stands for the group's (--diff)

    @property
    def host_list(self) -> str:
        return compress(self.hosts)


def task_name(result: TaskResult) -> str:
    name = f"{result.role} : {result.task}" if result.role else result.task
    return f"handler {name}" if result.handler else name


def says_something(result: TaskResult) -> bool:
    """Not in sync, or in sync with a finding that is not ok (a health warning, a driver near its end
    of life): what an operator must see without -v."""
    if result.status not in (Status.OK, Status.SKIPPED):
        return True
    return any(finding.severity != "ok" for finding in result.findings)


def told_by_changes(result: TaskResult) -> bool:
    """The task's message only joins its change summaries (what `drift()` says when the task says
    nothing more): where the changes are listed, printing it too says each change twice."""
    changes = visible_changes(result)
    return bool(changes) and visible_message(result) == "; ".join(c.summary for c in changes)


def _key(result: TaskResult) -> tuple[Status, str, str, tuple[str, ...], tuple[str, ...]]:
    changes = tuple(first_line(c.summary) for c in visible_changes(result))
    listed = len(changes) > 1  # the task summary lists them under the group's line
    detail = first_line(visible_error(result) or ("" if listed and told_by_changes(result) else
                                                  visible_message(result)))
    findings = tuple(f"{f.severity}: {f.probe}{'' if f.gpu is None else f' gpu {f.gpu}'}: {first_line(f.message)}"
                     for f in visible_findings(result) if f.severity != "ok")
    return result.status, task_name(result), detail, changes, findings


def group_tasks(run: RunResult) -> list[TaskGroup]:
    """Every result that says something (ignored failures and skips left out), grouped, failures first;
    within a status, the group with the most hosts first."""
    groups: dict[tuple[Status, str, str, tuple[str, ...], tuple[str, ...]], TaskGroup] = {}
    for host in run.hosts.values():
        for result in host.tasks:
            if result.status not in ORDER or result.ignored or not says_something(result):
                continue
            key = _key(result)
            if key not in groups:
                status, name, detail, changes, findings = key
                groups[key] = TaskGroup(status, name, detail, changes, findings, first=result)
            if host.host not in groups[key].hosts:
                groups[key].hosts.append(host.host)
    return sorted(groups.values(), key=lambda g: (ORDER[g.status], -len(g.hosts)))


def recap_counts(run: RunResult, host: HostResult) -> list[tuple[str, int]]:
    """Ansible's PLAY RECAP (HostResult.recap: ok includes changed; rescued, ignored), then gpuconf's
    unknown and, for apply, reboot_pending; `gpuconf check` says would_change for changed."""
    counts = host.recap()
    names = [*RECAP, "unknown", *(["reboot_pending"] if run.verb == "apply" else [])]
    return [("would_change" if name == "changed" and run.verb == "check" else name, counts[name]) for name in names]


def host_state(host: HostResult) -> str:
    """red (failed, unknown, unreachable), yellow (changed, drifted, reboot pending) or green."""
    if host.unreachable or host.failed:
        return "red"
    return "yellow" if host.changed or host.drifted or host.reboot_pending else "green"


def reboot_note(host: HostResult) -> str:
    if host.reboot_pending:
        return "reboot pending"
    return "reboot required" if host.reboot_required else ""


@dataclass
class RecapLine:
    hosts: list[str]
    counts: list[tuple[str, int]]
    state: str
    reboot: str


def group_recap(run: RunResult) -> list[RecapLine]:
    """Hosts with the same counts share a line; red lines first, then yellow, then green."""
    lines: dict[tuple[tuple[tuple[str, int], ...], str, str], RecapLine] = {}
    for name, host in run.hosts.items():
        counts, state, reboot = recap_counts(run, host), host_state(host), reboot_note(host)
        key = (tuple(counts), state, reboot)
        if key not in lines:
            lines[key] = RecapLine([], counts, state, reboot)
        lines[key].hosts.append(name)
    rank = {"red": 0, "yellow": 1, "green": 2}
    return sorted(lines.values(), key=lambda line: rank[line.state])


def _short(text: str, most: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= most else line[: most - 1] + "…"


def _first_reason(host: HostResult) -> str:
    for wanted in (Status.FAILED, Status.UNKNOWN):  # the first failure names the host's problem, not a later unknown
        for task in host.tasks:
            if task.status == wanted and not task.ignored:
                return _short(f"{task.task}: {visible_error(task) or task.status.value}")
    drifted = [task for task in host.tasks if task.status == Status.WOULD_CHANGE]
    counted = [task for task in host.tasks if "changed" in TALLIES[tally_of(task)]]  # as the recap counts
    if drifted and len(counted) > 1:
        return changes_by_role(counted)
    if drifted:
        changes = visible_changes(drifted[0])
        return _short(changes[0].summary if changes else drifted[0].task)
    for task in host.tasks:
        if task.status == Status.REBOOT_PENDING:
            return _short(visible_message(task) or task.task)
    return ""


def changes_by_role(tasks: list[TaskResult]) -> str:
    """`37 changes (nouveau 3, nvidia_driver 4, ...)`: how much of each role is out of sync, in the
    play's order, where one change named would hide the other 36; `tasks` as the recap counts them
    (a loop once), so the sum is the recap's would_change."""
    counts: dict[str, int] = {}
    for task in tasks:
        role = task.role or "play"
        counts[role] = counts.get(role, 0) + 1
    return f"{len(tasks)} changes ({', '.join(f'{role} {count}' for role, count in counts.items())})"


def _names(tasks: list[TaskResult], most: int = 3) -> str:
    names = [task_name(t) for t in tasks[:most]]
    return ", ".join(names) + (f", +{len(tasks) - most} more" if len(tasks) > most else "")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def interrupted_reason(host: HostResult) -> str:
    """What SIGINT left of a host's run: the tasks that ended (the changes named: they happened),
    and those never started, e.g. `5 tasks done (2 changed: a, b), 3 not started (c, d, e)`."""
    left = host.not_started
    done = [t for t in host.tasks if t.not_run is None]
    changed = [t for t in done if t.status == Status.CHANGED]
    text = f"{_plural(len(done), 'task')} done" if done else "nothing done"
    if changed:
        text += f" ({len(changed)} changed: {_names(changed)})"
    return f"{text}, {len(left)} not started ({_names(left)})"


def summary(run: RunResult) -> str:
    """One paragraph, e.g. `37/40 in sync, 2 drifted (node07: start nvidia-fabricmanager; node12: ...),
    1 unreachable (node33)`. Each host is counted once, under its worst state. A host that SIGINT
    stopped before its work was done is `interrupted`, never converged, whatever it changed."""
    hosts = list(run.hosts.values())
    unreachable = [h for h in hosts if h.unreachable]
    failed = [h for h in hosts if not h.unreachable and any(t.status == Status.FAILED and not t.ignored
                                                            for t in h.tasks)]
    interrupted = [h for h in hosts if not h.unreachable and h not in failed and h.interrupted]
    unknown = [h for h in hosts if not h.unreachable and h not in failed and h not in interrupted and h.failed]
    bad = unreachable + failed + interrupted + unknown
    drifted = [h for h in hosts if h not in bad and h.drifted]
    pending = [h for h in hosts if h not in bad and h.reboot_pending]
    changed = [h for h in hosts if h not in bad and h.changed]
    good = len(hosts) - len(bad) - len(drifted) - len(pending)
    parts = [f"{good}/{len(hosts)} {'in sync' if run.verb == 'check' else 'converged'}"]
    if run.verb == "apply" and changed:
        parts[0] += f" ({len(changed)} changed)"

    def listed(group: list[HostResult], reason: Callable[[HostResult], str] | None = _first_reason,
               most: int = 5) -> str:
        items = [f"{h.host}: {reason(h)}" if reason else h.host for h in group[:most]]
        more = f", +{len(group) - most} more" if len(group) > most else ""
        return "; ".join(items) + more

    for group, word in ((drifted, "drifted"), (pending, "reboot pending"), (failed, "failed")):
        if group:
            parts.append(f"{len(group)} {word} ({listed(group)})")
    if interrupted:
        parts.append(f"{len(interrupted)} interrupted ({listed(interrupted, interrupted_reason)})")
    if unknown:
        parts.append(f"{len(unknown)} unknown ({listed(unknown)})")
    if unreachable:
        parts.append(f"{len(unreachable)} unreachable ({listed(unreachable, None)})")
    text = ", ".join(parts)
    if run.deadline_reached:
        not_run = sum(1 for h in hosts for t in h.tasks if t.not_run not in (None, "interrupted"))
        text += f"; deadline of {run.deadline:g} s reached ({not_run} tasks not run)"
    if run.budget_spent:
        left = sorted({h.host for h in hosts for t in h.tasks if t.not_run in ("max_fail_percentage", "batch_failed")})
        what = "max_fail_percentage exceeded" if "max_fail_percentage" in run.budget_spent else \
            "every host of a serial batch failed" if "serial batch" in run.budget_spent else "every host failed"
        text += f"; {what}: {len(left)} hosts not started" if left else f"; {what}: the run stopped"
    if run.interrupted:
        left_out = [t for h in hosts for t in h.not_started]
        text += (f"; interrupted (SIGINT): {_plural(len(left_out), 'task')} not started on "
                 f"{_plural(len({t.host for t in left_out}), 'host')}" if left_out else
                 "; interrupted (SIGINT) after every task had ended")
    return text
