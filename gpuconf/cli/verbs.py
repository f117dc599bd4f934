"""What each CLI verb does, given its parsed arguments: argparse ends here. Each verb turns its
namespace into typed options (cli/options.py, or the options type of the package it calls) and
passes those on; the shared loading is load.py, check and apply are playrun.py."""
from __future__ import annotations

import json
import math
import sys
from argparse import Namespace
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gpuconf.cli.load import (
    inventory_spec,
    load_run,
    project_dirs,
    project_root,
    run_day,
    run_options,
    started,
    this_node,
    unlock_vaults,
)
from gpuconf.cli.playrun import run_playbook
from gpuconf.errors import GpuconfError, UsageError

if TYPE_CHECKING:
    from gpuconf.cli.options import PlaybookRun, Sources
    from gpuconf.connection.resolve import ConnectionKind
    from gpuconf.facts.base import Fact
    from gpuconf.facts.redfish import BmcInventory
    from gpuconf.files.values import JSONValue


def playbook_run(args: Namespace, *, reboot: bool = False, slurm: bool = False,
                 slurm_state: str | None = None) -> PlaybookRun:
    """check's and apply's options (cli/main.py _run_options), with --reboot (apply's) and --slurm
    (check's) as the verb passes them."""
    from gpuconf.cli.options import PlaybookRun, RunFlags, split_list
    from gpuconf.report.outputs import OutputOptions

    flags = RunFlags(
        tags=split_list(args.tags), skip_tags=split_list(args.skip_tags), diff=args.diff, forks=args.forks,
        accept_new_host_keys=args.accept_new_host_keys, detailed_exitcodes=args.detailed_exitcodes,
        deadline=args.deadline, lock_wait=args.lock_wait, ask_become_pass=args.ask_become_pass,
        reboot=reboot, strict=args.strict, verbose=args.verbose, step=args.step,
        today=args.today, force_handlers=args.force_handlers)
    return PlaybookRun(
        sources_of(args, connection=args.connection, playbook=args.playbook, limit=args.limit,
                   extra_vars=args.extra_vars), flags,
        OutputOptions(args.format, args.report, args.junit, args.prometheus, args.html),
        retry_file=args.retry_file, no_retry_file=args.no_retry_file, syntax_check=args.syntax_check,
        list_hosts=args.list_hosts, list_tasks=args.list_tasks, start_at_task=args.start_at_task,
        slurm=slurm, slurm_state=slurm_state)


def sources_of(args: Namespace, *, connection: ConnectionKind | None = None, playbook: str | None = None,
               limit: str | None = None, extra_vars: list[str] | None = None, vault: bool = True) -> Sources:
    """-i (every verb that loads an inventory has it; check and apply take several), with what the
    verb has besides, as it names them."""
    from gpuconf.cli.options import Sources, VaultOptions

    given = args.inventory if isinstance(args.inventory, list) else [args.inventory] if args.inventory else []
    return Sources(tuple(given), connection, limit, playbook, tuple(extra_vars or ()),
                   VaultOptions.from_args(args) if vault else VaultOptions())


def check(args: Namespace) -> int:
    return run_playbook(playbook_run(args, slurm=args.slurm, slurm_state=args.slurm_state), "check")


def apply(args: Namespace) -> int:
    # -C/--check, as ansible-playbook's: `apply -C` is `gpuconf check`
    return run_playbook(playbook_run(args, reboot=args.reboot), "check" if args.check_mode else "apply")


def remediate(args: Namespace) -> int:
    """The closed loop over Slurm (gpuconf/remediate/, docs/remediate.md)."""
    from gpuconf.cli.options import RunFlags
    from gpuconf.files.state import state_dir
    from gpuconf.inventory.patterns import narrow
    from gpuconf.remediate.command import RemediateOptions, load_health, run, settings
    from gpuconf.remediate.people import reset_breaker

    if args.reset_breaker:
        return reset_breaker(state_dir(args.state_dir))
    if args.playbook is None:
        raise UsageError("remediate: give the PLAYBOOK (only --reset-breaker runs without one)")
    remediation = RemediateOptions(
        settings(max_unavailable=args.max_unavailable, drain_timeout=args.drain_timeout,
                 lemon_after=args.lemon_after, lemon_window=args.lemon_window, breaker=args.breaker,
                 breaker_window=args.breaker_window, restart_app_window=args.restart_app_window,
                 hold_after_reboots=args.hold_after_reboots, reboot_window=args.reboot_window),
        state_dir(args.state_dir), check=args.check, report=Path(args.report) if args.report else None)
    sources = sources_of(args, connection=args.connection, playbook=args.playbook, limit=args.limit,
                         extra_vars=args.extra_vars)
    flags = RunFlags(forks=args.forks, accept_new_host_keys=args.accept_new_host_keys, lock_wait=args.lock_wait,
                     ask_become_pass=args.ask_become_pass, strict=args.strict, today=args.today)
    inventory, playbook, extra, config = load_run(sources)
    health = load_health(args.health, args.playbook, project_root(args.playbook), config.roles_path)
    options = run_options(flags, config, "check", extra, sources)
    started()
    return run(remediation, narrow(inventory, args.limit), playbook, health, options)


def hardware(args: Namespace) -> int:
    from gpuconf.files.state import state_dir
    from gpuconf.remediate.people import hardware as show

    return show(state_dir(args.state_dir), as_json=args.format == "json", ask_scheduler=args.scheduler)


def history(args: Namespace) -> int:
    from gpuconf.files.state import state_dir
    from gpuconf.remediate.command import history as show

    return show(args.host, state_dir(args.state_dir), as_json=args.format == "json")


def validate(args: Namespace) -> int:
    from gpuconf.cli.options import Sources, VaultOptions
    from gpuconf.engine.validate import validate as run_validate
    from gpuconf.inventory.patterns import match_hosts, narrow

    sources = Sources((args.inventory,) if args.inventory else (), None, args.limit, args.playbook,
                      tuple(args.extra_vars), VaultOptions.from_args(args))
    inventory, playbook, extra, _ = load_run(sources)
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


def inventory(args: Namespace) -> int:
    from gpuconf.cli.config import load_config
    from gpuconf.cli.options import Sources, VaultOptions
    from gpuconf.engine.secrets import MASK, secret_values
    from gpuconf.errors import did_you_mean
    from gpuconf.inventory.hosts import load_inventory

    config = load_config()
    unlock_vaults(VaultOptions.from_args(args), config)
    inv = load_inventory(inventory_spec(Sources((args.inventory,) if args.inventory else ()), config),
                         project_dirs(None))
    if sum(1 for given in (args.host, args.graph, args.list) if given) > 1:
        raise UsageError("inventory: give one of --host, --graph and --list")
    if args.graph:  # names only: no variable, so no secret, is shown
        from gpuconf.inventory.views import graph

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
        from gpuconf.inventory.views import listing

        data = listing(inv)
    else:
        data = inv.to_dict()
    secrets = set().union(*(secret_values([inv.host_vars(h)]) for h in inv.hosts)) if inv.hosts else set()
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(json.dumps(secret)[1:-1], MASK)
    print(text)
    return 0


def init(args: Namespace) -> int:
    from gpuconf.cli.init import init as write_site

    return write_site(args)


def tasks(args: Namespace) -> int:
    from gpuconf.tasks.docs import describe, list_types

    print(describe(args.name) if args.name else list_types())
    return 0


def roles(args: Namespace) -> int:
    from gpuconf.cli.config import load_config
    from gpuconf.playbook.loader import roles_path
    from gpuconf.playbook.roledocs import describe_roles
    from gpuconf.release.library import playbook_names, shipped_playbooks

    dirs = roles_path(Path.cwd() / "site.yml", Path.cwd(), load_config().roles_path)
    print(describe_roles([d for d in dirs if d.is_dir()], args.name))
    if args.name is None:
        print(f"playbooks shipped with gpuconf ({shipped_playbooks()}), run by name from any directory "
              f"(a local file of that name wins): {', '.join(playbook_names())}")
    return 0


def facts(args: Namespace) -> int:
    from gpuconf.cli.options import RunFlags
    from gpuconf.connection.resolve import connect
    from gpuconf.engine.session import HostSession
    from gpuconf.errors import did_you_mean
    from gpuconf.facts import gather
    from gpuconf.facts.subjects import SUBJECTS, subject_reads, subject_view
    from gpuconf.inventory.hosts import load_inventory

    if args.list:
        width = max(len(name) for name in SUBJECTS)
        print("\n".join(f"{name.ljust(width)}  {subject.summary}" for name, subject in SUBJECTS.items()))
        return 0
    from gpuconf.cli.config import load_config

    config = load_config()
    if not args.host or not (args.inventory or config.inventory):
        raise UsageError("gpuconf facts HOST -i INVENTORY [-s SUBJECT,...] (or --list)")
    subjects = list(dict.fromkeys(n.strip() for item in args.subject for n in item.split(",") if n.strip()))
    sources = sources_of(args, connection=args.connection)
    unlock_vaults(sources.vault, config)   # a BMC's password, for -s firmware
    for name in subjects:
        if name not in SUBJECTS:
            raise UsageError(f"unknown subject '{name}'{did_you_mean(name, SUBJECTS)} (gpuconf facts --list)")
    inv = load_inventory(inventory_spec(sources, config), project_dirs(None))
    if args.host not in inv.hosts:
        raise GpuconfError(f"host '{args.host}' is not in {inv.source}{did_you_mean(args.host, inv.hosts)}")
    reach = run_options(RunFlags(accept_new_host_keys=args.accept_new_host_keys), config, sources=sources).reach
    connection = connect(inv, args.host, reach)
    session = HostSession(args.host, connection)
    wanted = gather.fact_requests() + subject_reads(subjects)
    bmc = bmc_read(args.host, inv.host_vars(args.host)) if "firmware" in subjects else None
    try:
        session.fetch(wanted + ([bmc] if bmc else []))  # one round trip: host facts and every subject's reads
        values = {f.key: session.cache.get(f.key) for f in wanted}
    finally:
        connection.close()
    view = subject_view(subjects, values)
    if "firmware" in subjects:
        view["firmware"]["bmc"] = bmc_view(session.cache.get(bmc.key)) if bmc else \
            {"unavailable": "the host has no bmc_address"}
    result = gather.assemble(values) | view
    print(json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0


def bmc_read(host: str, variables: Mapping[str, object]) -> Fact[BmcInventory] | None:
    """The BMC's inventory as a fact (read on this machine over Redfish), when the host names its BMC."""
    from gpuconf.bmc.client import BmcEndpoint
    from gpuconf.bmc.read import inventory_fact

    endpoint = BmcEndpoint.from_vars(host, variables)
    return inventory_fact(endpoint) if endpoint else None


def bmc_view(value: object) -> dict[str, JSONValue]:
    from gpuconf.facts.firmware import describe_mixed, mixed_families
    from gpuconf.facts.redfish import BmcInventory
    from gpuconf.facts.subjects import plain

    if not isinstance(value, BmcInventory):   # an exception, or not read
        return {"unavailable": str(value)}
    return {"components": plain(value.components), "bios_attributes": value.bios.attributes if value.bios else None,
            "problems": list(value.problems),
            "mixed": [describe_mixed(f, v) for f, v in mixed_families(list(value.components)).items()]}


def firmware(args: Namespace) -> int:
    """The fleet's firmware table, read from each node's BMC (gpuconf/cli/firmware.py)."""
    from gpuconf.cli.firmware import run as fleet

    return fleet(sources_of(args, limit=args.limit), forks=args.forks, json_output=args.format == "json")


def schedule(args: Namespace) -> int:
    from gpuconf.cli.schedule import show
    from gpuconf.inventory.hosts import parse_extra_vars

    options = parse_extra_vars(args.extra_vars)
    named = {"drift_timer_interval": args.interval, "drift_timer_randomized_delay": args.randomized_delay,
             "drift_timer_playbook": args.playbook, "drift_timer_inventory": args.inventory,
             "drift_timer_deadline": args.deadline, "drift_timer_textfile_dir": args.textfile_dir}
    options.update({k: (int(v) if isinstance(v, float) and v.is_integer() else v) for k, v in named.items()
                    if v is not None})
    print(show(options, args.host), end="")
    return 0


def run(args: Namespace) -> int:
    """Ad hoc: one command on the hosts a pattern selects (gpuconf/cli/adhoc.py)."""
    from gpuconf.cli.adhoc import run_adhoc
    from gpuconf.cli.config import load_config
    from gpuconf.cli.options import RunFlags
    from gpuconf.inventory.hosts import load_inventory, parse_extra_vars
    from gpuconf.inventory.patterns import narrow

    config = load_config()
    sources = sources_of(args, connection=args.connection, limit=args.limit, extra_vars=args.extra_vars)
    unlock_vaults(sources.vault, config)
    inventory = narrow(load_inventory(inventory_spec(sources, config), project_dirs(None)), args.limit)
    flags = RunFlags(forks=args.forks, accept_new_host_keys=args.accept_new_host_keys,
                     ask_become_pass=args.ask_become_pass, verbose=args.verbose)
    options = run_options(flags, config, "apply", parse_extra_vars(list(sources.extra_vars)), sources)
    started()
    result = run_adhoc(inventory, args.pattern, args.args, options, args.become, args.timeout, sys.stdout)
    return result.exit_code


def gate(args: Namespace) -> int:
    """The pre-job gate on this node (gpuconf/gate/judge.py, gpuconf/gate/node.py)."""
    from gpuconf.gate import node as gate_node

    if not math.isfinite(args.nvidia_smi_timeout) or args.nvidia_smi_timeout <= 0:
        raise UsageError(f"--nvidia-smi-timeout {args.nvidia_smi_timeout:g}: give a number of seconds more than 0")
    return gate_node.main(gate_node.GateOptions(
        node=args.node or this_node(), driver_version=args.driver_version,
        nvidia_smi_timeout=args.nvidia_smi_timeout, slurm=args.slurm, report=args.report, pretty=args.pretty))


def collect(args: Namespace) -> int:
    """Evidence bundles from hosts (gpuconf/remediate/evidence.py), each recorded in the history."""
    from gpuconf.cli.config import load_config
    from gpuconf.cli.options import RunFlags
    from gpuconf.connection.resolve import connect
    from gpuconf.errors import did_you_mean
    from gpuconf.files.state import bundles_dir, state_dir
    from gpuconf.inventory.hosts import load_inventory
    from gpuconf.remediate.evidence import MIB
    from gpuconf.remediate.evidence import collect as collect_one
    from gpuconf.remediate.history import History

    if not math.isfinite(args.max_size) or args.max_size <= 0:
        raise UsageError(f"--max-size {args.max_size:g}: give a number of MiB more than 0")
    config = load_config()
    sources = sources_of(args, connection=args.connection, vault=False)
    inventory = load_inventory(inventory_spec(sources, config), project_dirs(None))
    unknown = [h for h in args.hosts if h not in inventory.hosts]
    if unknown:
        hint = did_you_mean(unknown[0], inventory.hosts)
        raise GpuconfError(f"host '{unknown[0]}' is not in {inventory.source}{hint}")
    state = state_dir(args.state_dir)
    options = run_options(RunFlags(accept_new_host_keys=args.accept_new_host_keys), config, sources=sources)
    failed = 0
    with History(state) as history:
        for host in dict.fromkeys(args.hosts):
            connection = connect(inventory, host, options.reach)
            try:
                bundle = collect_one(host, connection, bundles_dir(state), int(args.max_size * MIB))
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


def catalog(args: Namespace) -> int:
    """`gpuconf catalog`: gpuconf/cli/catalog.py."""
    from gpuconf.cli.catalog import show

    return show(run_day(args.today), args.from_redistrib)


def vault(args: Namespace) -> int:
    """`gpuconf vault ACTION`, as ansible-vault: files are rewritten whole, atomically, in place."""
    from gpuconf.cli.config import load_config
    from gpuconf.cli.options import VaultOptions
    from gpuconf.files.bounded import read_source, write_atomic
    from gpuconf.files.vault import KEYRING, VaultError, decrypt, encrypt, is_vault

    unlock_vaults(VaultOptions.from_args(args), load_config())
    if args.output and (len(args.targets) != 1 or args.action not in ("encrypt", "decrypt")):
        raise UsageError("--output takes one file, with encrypt or decrypt")
    try:
        if args.action == "encrypt_string":
            password, label = KEYRING.first()
            for value in args.targets:
                text = encrypt(value, password, label)
                if args.name:
                    print(f"{args.name}: !vault |\n" + "".join(f"          {line}\n" for line in text.splitlines()),
                          end="")
                else:
                    print("!vault |\n" + "".join(f"          {line}\n" for line in text.splitlines()), end="")
            return 0
        for name in args.targets:
            text = read_source(Path(name), UsageError).decode("utf-8", "replace")
            if args.action == "view":
                sys.stdout.write(decrypt(text, KEYRING.passwords))
                continue
            if args.action == "encrypt":
                if is_vault(text):
                    raise UsageError(f"{name}: already encrypted with Ansible Vault")
                out = encrypt(text, *KEYRING.first())
            else:
                if not is_vault(text):
                    raise UsageError(f"{name}: not encrypted with Ansible Vault")
                out = decrypt(text, KEYRING.passwords)
            target = Path(args.output or name)   # its mode kept: a decrypted vault stays private
            write_atomic(target, out, target.stat().st_mode & 0o777 if target.exists() else 0o600)
            print(f"{args.action}ed {args.output or name}" if args.action == "encrypt" else
                  f"decrypted {args.output or name}", file=sys.stderr)
    except VaultError as exc:
        raise UsageError(str(exc)) from None
    return 0


# the verbs by their command-line name (cli/main.py's subcommands, `lab` aside: its own program)
VERBS: dict[str, Callable[[Namespace], int]] = {
    "check": check, "apply": apply, "remediate": remediate, "hardware": hardware, "history": history,
    "validate": validate, "inventory": inventory, "tasks": tasks, "roles": roles, "facts": facts,
    "schedule": schedule, "run": run, "gate": gate, "collect": collect, "catalog": catalog, "vault": vault,
    "init": init, "firmware": firmware,
}
