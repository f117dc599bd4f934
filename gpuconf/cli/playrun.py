"""`check` and `apply` from the command line: a playbook run on the inventory's hosts, its
listings (--list-hosts, --list-tasks with each host's plan), its retry file and its outputs."""
from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from gpuconf.cli.load import load_run, run_options, started
from gpuconf.errors import UsageError

if TYPE_CHECKING:
    from gpuconf.cli.options import PlaybookRun
    from gpuconf.engine.options import RunOptions
    from gpuconf.engine.planner import HostPlan
    from gpuconf.inventory.hosts import Inventory
    from gpuconf.playbook.models import Playbook
    from gpuconf.results import RunResult, Verb
    from gpuconf.scheduler.step import SchedulerStep


def scheduler_step(run: PlaybookRun, inventory: Inventory) -> SchedulerStep:
    """`check --slurm`: the step after the run that drains and resumes each host's Slurm node
    (gpuconf/scheduler/step.py); the node's name is the host's, or its `slurm_node_name`."""
    from gpuconf.scheduler.slurm import Slurm
    from gpuconf.scheduler.step import STATE_PATH, SchedulerStep

    nodes = {h: str(inventory.host_vars(h).get("slurm_node_name", h)) for h in inventory.hosts}
    # on the node itself (HealthCheckProgram) only failures drain: drift is remediate's, in waves,
    # never every node at once (docs/slurm.md)
    return SchedulerStep(Slurm.name, Slurm, nodes, drift_drains=run.sources.connection != "local",
                         state_path=run.slurm_state or STATE_PATH)


def run_playbook(run: PlaybookRun, verb: Verb) -> int:
    from gpuconf.engine.runner import Runner
    from gpuconf.inventory.patterns import match_hosts, narrow
    from gpuconf.report.outputs import human_stream, write_outputs
    from gpuconf.report.text import TextReporter, stop_writing

    deadline = run.flags.deadline
    if deadline is not None and not deadline > 0:
        raise UsageError(f"--deadline {deadline:g}: give a number of seconds above 0")
    if run.retry_file == "":
        raise UsageError("--retry-file needs a path (--no-retry-file writes none)")
    if run.slurm and deadline is None:
        from gpuconf.scheduler.slurm import DEADLINE

        # slurmd kills a HealthCheckProgram after 60 s (gpuconf/scheduler/slurm.py)
        run = dataclasses.replace(run, flags=dataclasses.replace(run.flags, deadline=DEADLINE))
    inventory, playbook, extra, config = load_run(run.sources)
    if verb == "check":
        from gpuconf.playbook.checkmode import refuse_writes_in_check

        refuse_writes_in_check(playbook)
    if run.flags.verbose:  # a site's own file of that name wins over the shipped one: say which ran
        from gpuconf.release.library import describe_playbook

        print(describe_playbook(playbook.path), file=sys.stderr)
    if run.syntax_check:
        tasks = sum(len(p.tasks) for p in playbook.plays)
        print(f"{run.playbook}: syntax ok ({len(playbook.plays)} play(s), {tasks} task(s))")
        return 0
    if run.start_at_task:
        playbook = start_at(playbook, run.start_at_task)
    if run.list_hosts or run.list_tasks:
        list_plays(playbook, narrow(inventory, run.sources.limit), run,
                   (lambda: run_options(run.flags, config, verb, extra, run.sources)) if run.flags.verbose else None)
        return 0
    if not any(match_hosts(inventory, play.hosts) for play in playbook.plays):
        # Ansible says "no hosts matched" and exits 0: an image build would pass having done nothing
        wanted = ", ".join(dict.fromkeys(str(play.hosts) for play in playbook.plays))
        raise UsageError(f"no host of {inventory.source} is in the plays' hosts ({wanted}): nothing would run. "
                         "For an image build use -i image (this machine in every node group)")
    inventory = narrow(inventory, run.sources.limit)
    tags_select_something(playbook, set(run.flags.tags), set(run.flags.skip_tags))
    options = run_options(run.flags, config, verb, extra, run.sources)
    outputs = run.outputs
    outputs.preflight()
    reporter = TextReporter(stream=human_stream(outputs), verbose=run.flags.verbose, diff=run.flags.diff, verb=verb)
    runner = Runner(inventory, playbook, options,
                    processors=[reporter, *([scheduler_step(run, inventory)] if run.slurm else [])])
    previous = signal.getsignal(signal.SIGINT)

    def interrupt(signum: int, frame: FrameType | None) -> None:  # no new task starts; in-flight commands end
        runner.stop_event.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, interrupt)
    started()
    try:
        result = runner.run()
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous)
    reporter.recap(result)
    # `gpuconf check ... | head`: once the reader leaves, the rest goes nowhere (the report files are still
    # written) and the exit code still tells the run
    steps: list[Callable[[], None]] = [lambda: retry_file(run, result, human_stream(outputs)),
                                       lambda: write_outputs(result, outputs)]
    for step in steps:
        try:
            step()
        except BrokenPipeError:
            stop_writing(sys.stdout)
    return result.exit_code


def start_at(playbook: Playbook, name: str) -> Playbook:
    """--start-at-task: the playbook from the first task with this name (as `role : name` too) on."""
    import dataclasses

    from gpuconf.errors import did_you_mean

    for index, play in enumerate(playbook.plays):
        for position, task in enumerate(play.tasks):
            if name in (task.name, f"{task.role} : {task.name}"):
                first = dataclasses.replace(play, tasks=play.tasks[position:])
                return dataclasses.replace(playbook, plays=[first, *playbook.plays[index + 1:]])
    names = [t.name for play in playbook.plays for t in play.tasks]
    raise UsageError(f"--start-at-task '{name}': no task has that name{did_you_mean(name, names)}")


def list_plays(playbook: Playbook, inventory: Inventory, run: PlaybookRun,
               plan_options: Callable[[], RunOptions] | None = None) -> None:
    """--list-hosts and --list-tasks, as Ansible prints them; with -v, --list-tasks also prints
    each host's plan (gpuconf/engine/planner.py): connecting to no host."""
    from gpuconf.engine.options import task_selected
    from gpuconf.inventory.patterns import match_hosts

    tags, skip = set(run.flags.tags), set(run.flags.skip_tags)
    runner = None
    if run.list_tasks and plan_options is not None:
        from gpuconf.engine.runner import Runner

        runner = Runner(inventory, playbook, plan_options())
    print(f"playbook: {run.playbook}")
    for number, play in enumerate(playbook.plays, 1):
        hosts = match_hosts(inventory, play.hosts)
        print(f"\n  play #{number} ({play.hosts}): {play.name}")
        if run.list_hosts:
            print(f"    pattern: {play.hosts}\n    hosts ({len(hosts)}):")
            print("\n".join(f"      {host}" for host in hosts))
        if run.list_tasks:
            print("    tasks:")
            selected = [task for task in play.tasks if task_selected(task, tags, skip)]
            for task in selected:
                name = f"{task.role} : {task.name}" if task.role else task.name
                print(f"      {name}\tTAGS: [{', '.join(sorted(task.tags))}]")
            if runner is None:
                continue
            for host in runner.play_hosts(play):
                print(f"    plan on {host}:")
                print("\n".join(f"      {line}" for line in plan_lines(runner.planner(play, host).plan(selected))))


def plan_lines(plan: HostPlan) -> list[str]:
    """A host's plan, a few lines a task: its params and reads, or why it waits for the host."""

    lines = []
    for planned in plan.tasks:
        task = planned.task
        lines.append(f"{task.role} : {task.name}" if task.role else task.name)
        if planned.waits:
            lines.append(f"  decided on the host: {planned.waits}")
        else:
            lines.append(f"  {task.type} {json.dumps(planned.params, sort_keys=True, default=str)}")
            reads = [" ".join(key.replace("\0", " ").split()) for key in planned.reads]  # argv keys on one line
            lines.append(f"  reads: {', '.join(reads) or 'nothing'}")
        if planned.condition:
            lines.append(f"  when (judged on the host): {planned.condition}")
    return lines


def tags_select_something(playbook: Playbook, tags: set[str], skip: set[str]) -> None:
    """A tag filter that selects no task would report "in sync" having checked nothing: a false green
    on a drift check. Tasks tagged `always` do not count: they run whatever the filter says."""
    from gpuconf.engine.options import task_selected
    from gpuconf.errors import did_you_mean

    if not tags and not skip:
        return
    tasks = [t for play in playbook.plays for t in play.tasks]
    for task in list(tasks):   # what a dynamic include's `apply` tags its tasks with, known now
        applied = (task.params.get("apply") or {}).get("tags") if task.type in ("include_tasks", "include_role") \
            else None
        if applied:
            tags_given = [t.strip() for t in applied.split(",")] if isinstance(applied, str) else list(applied)
            tasks.append(dataclasses.replace(task, tags=task.tags | set(tags_given)))
    special = {"all", "always", "never", "tagged", "untagged"}
    known = sorted({tag for t in tasks for tag in t.tags} - {"always", "never"})
    if any(task_selected(t, tags, skip) and not (tags - special and "always" in t.tags and not t.tags & tags)
           for t in tasks):
        return
    if tags and not tags - special and any(task_selected(t, tags, skip) for t in tasks):
        return   # only Ansible's special tags: what they select runs, `always` tasks included
    hints = "".join(did_you_mean(tag, known) for tag in sorted(tags - special) if tag not in known)
    filters = " ".join(part for part in (f"--tags {','.join(sorted(tags))}" if tags else "",
                                         f"--skip-tags {','.join(sorted(skip))}" if skip else "") if part)
    raise UsageError(f"{filters} selects no task of {playbook.path}{hints}; the tags it has: "
                     f"{', '.join(known) or '(none)'}")


def retry_file(run: PlaybookRun, result: RunResult, stream: TextIO) -> None:
    """List the failed and unreachable hosts for `--limit @FILE`; a problem writing it is a warning,
    never a change to what the run reports."""
    from gpuconf.cli import retry

    if run.no_retry_file:
        return
    path = Path(run.retry_file) if run.retry_file else retry.default_path(run.playbook)
    try:
        written = retry.update(result, path)
    except OSError as exc:
        print(f"gpuconf: warning: could not update the retry file {path}: {exc.strerror or exc}", file=sys.stderr)
        return
    if written is not None:
        print(f"retry with: --limit @{written}", file=stream)
