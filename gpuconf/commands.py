"""What each CLI verb does, given parsed arguments."""
from __future__ import annotations

import datetime
import gc
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from gpuconf.errors import GpuconfError, UsageError


def started() -> None:
    """The hosts start: what start-up made (modules, the playbook, the plan) is frozen out of the
    collector's walks, and the collector, which `cli.run()` pauses for start-up, is back on. No
    effect where the caller never paused it (tests calling `cli.main()`)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _split(text: str) -> set[str]:
    return {t.strip() for t in (text or "").split(",") if t.strip()}


def _project_dirs(playbook: str | None) -> list[Path]:
    dirs = [Path.cwd()]
    if playbook:
        parent = Path(playbook).resolve().parent
        dirs += [parent, parent.parent]
    return list(dict.fromkeys(dirs))


def _inventory_spec(args: Any, config: Any) -> str:
    """-i, else the project configuration's inventory (gpuconf.cfg, GPUCONF_INVENTORY), else with
    -c local this machine alone (as Slurm's HealthCheckProgram runs it: no inventory file)."""
    spec = getattr(args, "inventory", None) or config.inventory
    if not spec and getattr(args, "connection", None) == "local":
        return f"{this_node()},"
    if not spec:
        raise UsageError("no inventory: give -i INVENTORY, or set `inventory` in gpuconf.cfg or GPUCONF_INVENTORY "
                         "(or -c local: this machine)")
    return str(spec)


def this_node() -> str:
    """This machine's name: the Slurm node name slurmd gives its HealthCheckProgram (SLURMD_NODENAME),
    else the short host name, which is what slurmd takes by default."""
    import socket

    return os.environ.get("SLURMD_NODENAME", "").strip() or socket.gethostname().split(".", 1)[0]


def _unlock_vaults(args: Any, config: Any) -> None:
    """The vault passwords, before any file is read: --vault-password-file (else gpuconf.cfg's
    vault_password_file or GPUCONF_VAULT_PASSWORD_FILE), and --ask-vault-pass."""
    import getpass

    from gpuconf.vault import KEYRING, read_password_file

    KEYRING.clear()
    files = list(getattr(args, "vault_password_file", None) or []) or \
        ([config.vault_password_file] if config.vault_password_file else [])
    for path in files:
        KEYRING.add(read_password_file(path))
    if getattr(args, "ask_vault_pass", False):
        KEYRING.add(getpass.getpass("Vault password: "))


def _load(args: Any):
    from gpuconf.config import load_config
    from gpuconf.inventory import load_inventory, parse_extra_vars
    from gpuconf.playbook.loader import load_playbook
    from gpuconf.playbook.play_hosts import render_play_hosts

    config = load_config()
    _unlock_vaults(args, config)
    dirs = _project_dirs(getattr(args, "playbook", None))
    inventory = load_inventory(_inventory_spec(args, config), dirs)
    # the project's roles/: here, or beside the playbooks/ folder when run from elsewhere (cron, CI)
    project = next((d for d in dirs if (d / "roles").is_dir()), Path.cwd())
    playbook = load_playbook(args.playbook, project, config.roles_path)
    extra_vars = parse_extra_vars(args.extra_vars)
    render_play_hosts(playbook, extra_vars)  # `hosts: "{{ target }}"`, as Ansible renders it
    return inventory, playbook, extra_vars, config


def run_day(given: datetime.date | None) -> datetime.date:
    """The run's day for end-of-life dates: --today, else GPUCONF_TODAY, else the clock."""
    if given is not None:
        return given
    text = os.environ.get("GPUCONF_TODAY", "").strip()
    if not text:
        return datetime.date.today()
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"GPUCONF_TODAY='{text}' is not a date like 2026-12-04") from None


def _become_password(args: Any) -> str | None:
    """From GPUCONF_BECOME_PASSWORD or a prompt; never from the command line."""
    import getpass
    import os

    if getattr(args, "ask_become_pass", False):
        return getpass.getpass("BECOME password: ")
    return os.environ.get("GPUCONF_BECOME_PASSWORD")


def run_options(args: Any, config: Any, verb: str = "check", extra_vars: dict[str, Any] | None = None) -> Any:
    """The one place where a command's arguments and the project configuration become the run's
    options: a command passes what it parsed, and an option it does not have keeps its default."""
    from gpuconf.config import FORKS
    from gpuconf.engine.options import RunOptions

    defaults = RunOptions()
    return RunOptions(
        verb=verb, tags=_split(getattr(args, "tags", "")), skip_tags=_split(getattr(args, "skip_tags", "")),
        extra_vars=extra_vars or {}, diff=getattr(args, "diff", False),
        forks=getattr(args, "forks", None) or config.forks or FORKS,
        accept_new_host_keys=getattr(args, "accept_new_host_keys", False) or bool(config.accept_new_host_keys),
        become=config.become, connection=getattr(args, "connection", None),
        detailed_exitcodes=getattr(args, "detailed_exitcodes", False), deadline=getattr(args, "deadline", None),
        lock_wait=getattr(args, "lock_wait", defaults.lock_wait), become_password=_become_password(args),
        allow_reboot=getattr(args, "reboot", False), strict=getattr(args, "strict", False),
        trace=getattr(args, "verbose", 0) >= 3, step=_step_gate() if getattr(args, "step", False) else None,
        today=run_day(getattr(args, "today", None)))


def _scheduler_step(args: Any, inventory: Any) -> Any:
    """`check --slurm`: the step after the run that drains and resumes each host's Slurm node
    (gpuconf/scheduler_step.py); the node's name is the host's, or its `slurm_node_name`."""
    from gpuconf.scheduler_step import STATE_PATH, SchedulerStep
    from gpuconf.slurm import Slurm

    nodes = {h: str(inventory.host_vars(h).get("slurm_node_name", h)) for h in inventory.hosts}
    # on the node itself (HealthCheckProgram) only failures drain: drift is remediate's, in waves,
    # never every node at once (docs/slurm.md)
    return SchedulerStep(Slurm.name, Slurm, nodes, drift_drains=args.connection != "local",
                         state_path=args.slurm_state or STATE_PATH)


def check(args: Any) -> int:
    return _run(args, "check")


def apply(args: Any) -> int:
    return _run(args, "check" if args.check_mode else "apply")  # -C/--check, as ansible-playbook's


def remediate(args: Any) -> int:
    """The closed loop over Slurm (gpuconf/remediate/, docs/remediate.md)."""
    from gpuconf.patterns import narrow
    from gpuconf.remediate.command import load_health, run
    from gpuconf.remediate.people import reset_breaker

    if args.reset_breaker:
        return reset_breaker(args)
    if args.playbook is None:
        raise UsageError("remediate: give the PLAYBOOK (only --reset-breaker runs without one)")
    inventory, playbook, extra, config = _load(args)
    project = next((d for d in _project_dirs(args.playbook) if (d / "roles").is_dir()), Path.cwd())
    health = load_health(args.health, args.playbook, project, config.roles_path)
    options = run_options(args, config, "check", extra)
    started()
    return run(args, narrow(inventory, args.limit), playbook, health, options)


def hardware(args: Any) -> int:
    from gpuconf.remediate.people import hardware as show

    return show(args)


def history(args: Any) -> int:
    from gpuconf.remediate.command import history as show

    return show(args)


def _run(args: Any, verb: str) -> int:
    from gpuconf.engine.runner import Runner
    from gpuconf.patterns import match_hosts, narrow
    from gpuconf.report.outputs import OutputOptions, human_stream, write_outputs
    from gpuconf.report.text import TextReporter, stop_writing

    if args.deadline is not None and not args.deadline > 0:
        raise UsageError(f"--deadline {args.deadline:g}: give a number of seconds above 0")
    if args.retry_file == "":
        raise UsageError("--retry-file needs a path (--no-retry-file writes none)")
    slurm = getattr(args, "slurm", False)
    if slurm and args.deadline is None:
        from gpuconf.slurm import DEADLINE

        args.deadline = DEADLINE  # slurmd kills a HealthCheckProgram after 60 s (gpuconf/slurm.py)
    inventory, playbook, extra, config = _load(args)
    if args.syntax_check:
        tasks = sum(len(p.tasks) for p in playbook.plays)
        print(f"{args.playbook}: syntax ok ({len(playbook.plays)} play(s), {tasks} task(s))")
        return 0
    if args.start_at_task:
        playbook = _start_at(playbook, args.start_at_task)
    if args.list_hosts or args.list_tasks:
        _list(playbook, narrow(inventory, args.limit), args,
              (lambda: run_options(args, config, verb, extra)) if args.verbose else None)
        return 0
    if not any(match_hosts(inventory, play.hosts) for play in playbook.plays):
        # Ansible says "no hosts matched" and exits 0: an image build would pass having done nothing
        wanted = ", ".join(dict.fromkeys(str(play.hosts) for play in playbook.plays))
        raise UsageError(f"no host of {inventory.source} is in the plays' hosts ({wanted}): nothing would run. "
                         "For an image build use -i image (this machine in every node group)")
    inventory = narrow(inventory, args.limit)
    _tags_select_something(playbook, _split(args.tags), _split(args.skip_tags))
    options = run_options(args, config, verb, extra)
    outputs = OutputOptions(args.format, args.report, args.junit, args.prometheus, args.html)
    outputs.preflight()
    reporter = TextReporter(stream=human_stream(outputs), verbose=args.verbose, diff=args.diff, verb=verb)
    runner = Runner(inventory, playbook, options, emit=reporter.task, events=reporter,
                    after=[_scheduler_step(args, inventory)] if slurm else [])
    previous = signal.getsignal(signal.SIGINT)

    def interrupt(signum, frame):  # no new task starts; in-flight commands finish or time out
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
    for step in (lambda: _retry_file(args, result, human_stream(outputs)), lambda: write_outputs(result, outputs)):
        try:
            step()
        except BrokenPipeError:
            stop_writing(sys.stdout)
    return result.exit_code


def _start_at(playbook: Any, name: str) -> Any:
    """--start-at-task: the playbook from the first task with this name (as `role : name` too) on."""
    import dataclasses

    from gpuconf.suggest import did_you_mean

    for index, play in enumerate(playbook.plays):
        for position, task in enumerate(play.tasks):
            if name in (task.name, f"{task.role} : {task.name}"):
                first = dataclasses.replace(play, tasks=play.tasks[position:])
                return dataclasses.replace(playbook, plays=[first, *playbook.plays[index + 1:]])
    names = [t.name for play in playbook.plays for t in play.tasks]
    raise UsageError(f"--start-at-task '{name}': no task has that name{did_you_mean(name, names)}")


def _list(playbook: Any, inventory: Any, args: Any, plan_options: Any = None) -> None:
    """--list-hosts and --list-tasks, as Ansible prints them; with -v, --list-tasks also prints
    each host's plan (gpuconf/engine/planner.py): connecting to no host."""
    from gpuconf.engine.options import task_selected
    from gpuconf.patterns import match_hosts

    tags, skip = _split(args.tags), _split(args.skip_tags)
    runner = None
    if args.list_tasks and plan_options is not None:
        from gpuconf.engine.runner import Runner

        runner = Runner(inventory, playbook, plan_options())
    print(f"playbook: {args.playbook}")
    for number, play in enumerate(playbook.plays, 1):
        hosts = match_hosts(inventory, play.hosts)
        print(f"\n  play #{number} ({play.hosts}): {play.name}")
        if args.list_hosts:
            print(f"    pattern: {play.hosts}\n    hosts ({len(hosts)}):")
            print("\n".join(f"      {host}" for host in hosts))
        if args.list_tasks:
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


def plan_lines(plan: Any) -> list[str]:
    """A host's plan, a few lines a task: its params and reads, or why it waits for the host."""
    import json

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


def _step_gate() -> Any:
    """--step: the question, asked on the terminal (never read from a pipe: a script cannot answer it)."""
    from gpuconf.engine.flow import StepGate

    try:
        terminal = open("/dev/tty", "r+")  # noqa: SIM115 - open for the whole run
    except OSError:
        raise UsageError("--step needs a terminal to ask on") from None

    def ask(task: str) -> str:
        terminal.write(f"Perform task: {task} (N)o/(y)es/(c)ontinue: ")
        terminal.flush()
        return terminal.readline() or "n"

    return StepGate(ask)


def _tags_select_something(playbook: Any, tags: set[str], skip: set[str]) -> None:
    """A tag filter that selects no task would report "in sync" having checked nothing: a false green
    on a drift check. Tasks tagged `always` do not count: they run whatever the filter says."""
    from gpuconf.engine.options import task_selected
    from gpuconf.suggest import did_you_mean

    if not tags and not skip:
        return
    tasks = [t for play in playbook.plays for t in play.tasks]
    if any(task_selected(t, tags, skip) and not (tags and "always" in t.tags and not t.tags & tags) for t in tasks):
        return
    known = sorted({tag for t in tasks for tag in t.tags} - {"always", "never"})
    special = {"all", "always", "never", "tagged", "untagged"}
    hints = "".join(did_you_mean(tag, known) for tag in sorted(tags - special) if tag not in known)
    filters = " ".join(part for part in (f"--tags {','.join(sorted(tags))}" if tags else "",
                                         f"--skip-tags {','.join(sorted(skip))}" if skip else "") if part)
    raise UsageError(f"{filters} selects no task of {playbook.path}{hints}; the tags it has: "
                     f"{', '.join(known) or '(none)'}")


def _retry_file(args: Any, result, stream) -> None:
    """List the failed and unreachable hosts for `--limit @FILE`; a problem writing it is a warning,
    never a change to what the run reports."""
    from gpuconf import retry

    if args.no_retry_file:
        return
    path = Path(args.retry_file) if args.retry_file else retry.default_path(args.playbook)
    try:
        written = retry.update(result, path)
    except OSError as exc:
        print(f"gpuconf: warning: could not update the retry file {path}: {exc.strerror or exc}", file=sys.stderr)
        return
    if written is not None:
        print(f"retry with: --limit @{written}", file=stream)


def validate(args: Any) -> int:
    from gpuconf.engine.validate import validate as run_validate
    from gpuconf.patterns import match_hosts, narrow

    inventory, playbook, extra, _ = _load(args)
    inventory = narrow(inventory, args.limit)
    problems = run_validate(inventory, playbook, extra)
    errors = [p for p in problems if ": warning: " not in p]
    for problem in problems:
        print(("gpuconf: " if ": warning: " in problem else "gpuconf: error: ") + problem, file=sys.stderr)
    if errors:
        return 1
    tasks = sum(len(p.tasks) for p in playbook.plays)
    hosts: set[str] = set()  # the hosts the plays would run on, not every host of the inventory
    for play in playbook.plays:
        hosts.update(match_hosts(inventory, play.hosts))
    print(f"{args.playbook}: {len(playbook.plays)} play(s), {tasks} task(s), {len(hosts)} host(s): valid")
    return 0


def inventory(args: Any) -> int:
    from gpuconf.config import load_config
    from gpuconf.engine.secrets import MASK, secret_values
    from gpuconf.inventory import load_inventory
    from gpuconf.suggest import did_you_mean

    config = load_config()
    _unlock_vaults(args, config)
    inv = load_inventory(_inventory_spec(args, config), _project_dirs(None))
    if sum(1 for given in (args.host, args.graph, args.list) if given) > 1:
        raise UsageError("inventory: give one of --host, --graph and --list")
    if args.graph:  # names only: no variable, so no secret, is shown
        from gpuconf.inventory_views import graph

        print(graph(inv))
        return 0
    if args.host:
        if args.host not in inv.hosts:
            raise GpuconfError(f"host '{args.host}' is not in {inv.source}{did_you_mean(args.host, inv.hosts)}")
        from gpuconf.engine.variables import group_names

        # the inventory's part of the one layering (gpuconf/engine/variables.py): what every play sees
        data = {"host": args.host, "groups": inv.host_groups(args.host), "group_names": group_names(inv, args.host),
                "inventory_hostname_short": args.host.split(".", 1)[0], "vars": inv.host_vars(args.host)}
    elif args.list:
        from gpuconf.inventory_views import listing

        data = listing(inv)
    else:
        data = inv.to_dict()
    secrets = set().union(*(secret_values([inv.host_vars(h)]) for h in inv.hosts)) if inv.hosts else set()
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(json.dumps(secret)[1:-1], MASK)
    print(text)
    return 0


def tasks(args: Any) -> int:
    from gpuconf.tasks.docs import describe, list_types

    print(describe(args.name) if args.name else list_types())
    return 0


def roles(args: Any) -> int:
    from gpuconf.config import load_config
    from gpuconf.playbook.loader import roles_path
    from gpuconf.playbook.roledocs import describe_roles

    dirs = roles_path(Path.cwd() / "site.yml", Path.cwd(), load_config().roles_path)
    print(describe_roles([d for d in dirs if d.is_dir()], args.name))
    return 0


def facts(args: Any) -> int:
    from gpuconf.connection.base import ConnectionSpec
    from gpuconf.engine.runner import default_connection
    from gpuconf.engine.session import HostSession
    from gpuconf.facts import gather
    from gpuconf.facts.subjects import SUBJECTS, subject_reads, subject_view
    from gpuconf.inventory import load_inventory
    from gpuconf.suggest import did_you_mean

    if args.list:
        width = max(len(name) for name in SUBJECTS)
        print("\n".join(f"{name.ljust(width)}  {subject.summary}" for name, subject in SUBJECTS.items()))
        return 0
    from gpuconf.config import load_config

    config = load_config()
    if not args.host or not (args.inventory or config.inventory):
        raise UsageError("gpuconf facts HOST -i INVENTORY [-s SUBJECT,...] (or --list)")
    subjects = list(dict.fromkeys(n.strip() for item in args.subject for n in item.split(",") if n.strip()))
    for name in subjects:
        if name not in SUBJECTS:
            raise UsageError(f"unknown subject '{name}'{did_you_mean(name, SUBJECTS)} (gpuconf facts --list)")
    inv = load_inventory(_inventory_spec(args, config), _project_dirs(None))
    if args.host not in inv.hosts:
        raise GpuconfError(f"host '{args.host}' is not in {inv.source}{did_you_mean(args.host, inv.hosts)}")
    spec = ConnectionSpec.from_vars(args.host, inv.host_vars(args.host),
                                    {"connection": args.connection} if args.connection else None)
    connection = default_connection(spec, run_options(args, config))
    session = HostSession(args.host, connection)
    wanted = gather.fact_requests() + subject_reads(subjects)
    try:
        session.fetch(wanted)  # one round trip: host facts and every subject's reads
        values = {f.key: session.cache.get(f.key) for f in wanted}
    finally:
        connection.close()
    result = gather.assemble(values) | subject_view(subjects, values)
    print(json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0


def schedule(args: Any) -> int:
    from gpuconf.inventory import parse_extra_vars
    from gpuconf.schedule import show

    options = parse_extra_vars(args.extra_vars)
    named = {"drift_timer_interval": args.interval, "drift_timer_randomized_delay": args.randomized_delay,
             "drift_timer_playbook": args.playbook, "drift_timer_inventory": args.inventory,
             "drift_timer_deadline": args.deadline, "drift_timer_textfile_dir": args.textfile_dir}
    options.update({k: (int(v) if isinstance(v, float) and v.is_integer() else v) for k, v in named.items()
                    if v is not None})
    print(show(options, args.host), end="")
    return 0


def run(args: Any) -> int:
    """Ad hoc: one command on the hosts a pattern selects (gpuconf/adhoc.py)."""
    from gpuconf.adhoc import run_adhoc
    from gpuconf.config import load_config
    from gpuconf.inventory import load_inventory, parse_extra_vars
    from gpuconf.patterns import narrow

    config = load_config()
    _unlock_vaults(args, config)
    inventory = narrow(load_inventory(_inventory_spec(args, config), _project_dirs(None)), args.limit)
    options = run_options(args, config, "apply", parse_extra_vars(args.extra_vars))
    started()
    result = run_adhoc(inventory, args.pattern, args.args, options, args.become, args.timeout, sys.stdout)
    return result.exit_code


def gate(args: Any) -> int:
    """The pre-job gate on this node (gpuconf/gate.py, gpuconf/gate_node.py)."""
    from gpuconf import gate_node

    if args.nvidia_smi_timeout <= 0:
        raise UsageError("--nvidia-smi-timeout must be more than 0")
    args.node = args.node or this_node()
    return gate_node.main(args)


def collect(args: Any) -> int:
    """Evidence bundles from hosts (gpuconf/collect.py), each recorded in the history."""
    from gpuconf.collect import MIB
    from gpuconf.collect import collect as collect_one
    from gpuconf.config import load_config
    from gpuconf.connection.base import ConnectionSpec
    from gpuconf.engine.runner import default_connection
    from gpuconf.history import History, default_state_dir
    from gpuconf.inventory import load_inventory
    from gpuconf.suggest import did_you_mean

    if args.max_size <= 0:
        raise UsageError("--max-size must be more than 0 MiB")
    config = load_config()
    inventory = load_inventory(_inventory_spec(args, config), _project_dirs(None))
    unknown = [h for h in args.hosts if h not in inventory.hosts]
    if unknown:
        hint = did_you_mean(unknown[0], inventory.hosts)
        raise GpuconfError(f"host '{unknown[0]}' is not in {inventory.source}{hint}")
    state = Path(args.state_dir).expanduser() if args.state_dir else default_state_dir()
    options = run_options(args, config)
    failed = 0
    with History(state) as history:
        for host in dict.fromkeys(args.hosts):
            spec = ConnectionSpec.from_vars(host, inventory.host_vars(host),
                                            {"connection": args.connection} if args.connection else None)
            connection = default_connection(spec, options)
            try:
                bundle = collect_one(host, connection, state / "bundles", int(args.max_size * MIB))
            except GpuconfError as exc:
                print(f"gpuconf: error: {exc}", file=sys.stderr)
                failed |= exc.exit_bit
                continue
            finally:
                connection.close()
            history.add_bundle(host, str(bundle.path))
            system = ", ".join(bundle.system.values())
            print(f"{host}: {bundle.path} ({bundle.size / MIB:.2f} MiB in {bundle.seconds:g} s"
                  + (f"; {system}" if system else "") + ")")
    return failed


def catalog(args: Any) -> int:
    """`gpuconf catalog`: gpuconf/catalog_command.py."""
    from gpuconf.catalog_command import show

    return show(args, run_day(args.today))
