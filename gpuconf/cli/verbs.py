"""What each CLI verb does, given parsed arguments (the shared loading is cliload.py; check and
apply are playrun.py)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from gpuconf.cli.load import (
    inventory_spec,
    load_run,
    project_dirs,
    run_day,
    run_options,
    started,
    this_node,
    unlock_vaults,
)
from gpuconf.cli.playrun import run_playbook
from gpuconf.errors import GpuconfError, UsageError


def check(args: Any) -> int:
    return run_playbook(args, "check")


def apply(args: Any) -> int:
    return run_playbook(args, "check" if args.check_mode else "apply")  # -C/--check, as ansible-playbook's


def remediate(args: Any) -> int:
    """The closed loop over Slurm (gpuconf/remediate/, docs/remediate.md)."""
    from gpuconf.inventory.patterns import narrow
    from gpuconf.remediate.command import load_health, run
    from gpuconf.remediate.people import reset_breaker

    if args.reset_breaker:
        return reset_breaker(args)
    if args.playbook is None:
        raise UsageError("remediate: give the PLAYBOOK (only --reset-breaker runs without one)")
    inventory, playbook, extra, config = load_run(args)
    project = next((d for d in project_dirs(args.playbook) if (d / "roles").is_dir()), Path.cwd())
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


def validate(args: Any) -> int:
    from gpuconf.engine.validate import validate as run_validate
    from gpuconf.inventory.patterns import match_hosts, narrow

    inventory, playbook, extra, _ = load_run(args)
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
    from gpuconf.cli.config import load_config
    from gpuconf.engine.secrets import MASK, secret_values
    from gpuconf.errors import did_you_mean
    from gpuconf.inventory.hosts import load_inventory

    config = load_config()
    unlock_vaults(args, config)
    inv = load_inventory(inventory_spec(args, config), project_dirs(None))
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


def init(args: Any) -> int:
    from gpuconf.cli.init import init as write_site

    return write_site(args)


def tasks(args: Any) -> int:
    from gpuconf.tasks.docs import describe, list_types

    print(describe(args.name) if args.name else list_types())
    return 0


def roles(args: Any) -> int:
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


def facts(args: Any) -> int:
    from gpuconf.connection.base import ConnectionSpec
    from gpuconf.engine.runner import default_connection
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
    unlock_vaults(args, config)   # a BMC's password, for -s firmware
    for name in subjects:
        if name not in SUBJECTS:
            raise UsageError(f"unknown subject '{name}'{did_you_mean(name, SUBJECTS)} (gpuconf facts --list)")
    inv = load_inventory(inventory_spec(args, config), project_dirs(None))
    if args.host not in inv.hosts:
        raise GpuconfError(f"host '{args.host}' is not in {inv.source}{did_you_mean(args.host, inv.hosts)}")
    spec = ConnectionSpec.from_vars(args.host, inv.host_vars(args.host),
                                    {"connection": args.connection} if args.connection else None)
    connection = default_connection(spec, run_options(args, config))
    session = HostSession(args.host, connection)
    wanted = gather.fact_requests() + subject_reads(subjects)
    bmc = bmc_read(args.host, inv.host_vars(args.host)) if "firmware" in subjects else None
    try:
        session.fetch(wanted + ([bmc] if bmc else []))  # one round trip: host facts and every subject's reads
        values = {f.key: session.cache.get(f.key) for f in wanted}
    finally:
        connection.close()
    result = gather.assemble(values) | subject_view(subjects, values)
    if "firmware" in subjects:
        result["firmware"]["bmc"] = bmc_view(session.cache.get(bmc.key)) if bmc else \
            {"unavailable": "the host has no bmc_address"}
    print(json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0


def bmc_read(host: str, variables: dict[str, Any]) -> Any:
    """The BMC's inventory as a fact (read on this machine over Redfish), when the host names its BMC."""
    from gpuconf.bmc.client import BmcEndpoint
    from gpuconf.bmc.read import inventory_fact

    endpoint = BmcEndpoint.from_vars(host, variables)
    return inventory_fact(endpoint) if endpoint else None


def bmc_view(value: Any) -> dict[str, Any]:
    from gpuconf.facts.firmware import describe_mixed, mixed_families
    from gpuconf.facts.subjects import plain

    if isinstance(value, Exception) or value is None:
        return {"unavailable": str(value)}
    return {"components": plain(value.components), "bios_attributes": value.bios.attributes if value.bios else None,
            "problems": list(value.problems),
            "mixed": [describe_mixed(f, v) for f, v in mixed_families(list(value.components)).items()]}


def schedule(args: Any) -> int:
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


def run(args: Any) -> int:
    """Ad hoc: one command on the hosts a pattern selects (gpuconf/cli/adhoc.py)."""
    from gpuconf.cli.adhoc import run_adhoc
    from gpuconf.cli.config import load_config
    from gpuconf.inventory.hosts import load_inventory, parse_extra_vars
    from gpuconf.inventory.patterns import narrow

    config = load_config()
    unlock_vaults(args, config)
    inventory = narrow(load_inventory(inventory_spec(args, config), project_dirs(None)), args.limit)
    options = run_options(args, config, "apply", parse_extra_vars(args.extra_vars))
    started()
    result = run_adhoc(inventory, args.pattern, args.args, options, args.become, args.timeout, sys.stdout)
    return result.exit_code


def gate(args: Any) -> int:
    """The pre-job gate on this node (gpuconf/gate/judge.py, gpuconf/gate/node.py)."""
    from gpuconf.gate import node as gate_node

    if not math.isfinite(args.nvidia_smi_timeout) or args.nvidia_smi_timeout <= 0:
        raise UsageError(f"--nvidia-smi-timeout {args.nvidia_smi_timeout:g}: give a number of seconds more than 0")
    args.node = args.node or this_node()
    return gate_node.main(args)


def collect(args: Any) -> int:
    """Evidence bundles from hosts (gpuconf/remediate/evidence.py), each recorded in the history."""
    from gpuconf.cli.config import load_config
    from gpuconf.connection.base import ConnectionSpec
    from gpuconf.engine.runner import default_connection
    from gpuconf.errors import did_you_mean
    from gpuconf.inventory.hosts import load_inventory
    from gpuconf.remediate.evidence import MIB
    from gpuconf.remediate.evidence import collect as collect_one
    from gpuconf.remediate.history import History, default_state_dir

    if not math.isfinite(args.max_size) or args.max_size <= 0:
        raise UsageError(f"--max-size {args.max_size:g}: give a number of MiB more than 0")
    config = load_config()
    inventory = load_inventory(inventory_spec(args, config), project_dirs(None))
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
    """`gpuconf catalog`: gpuconf/cli/catalog.py."""
    from gpuconf.cli.catalog import show

    return show(args, run_day(args.today))


def vault(args: Any) -> int:
    """`gpuconf vault ACTION`, as ansible-vault: files are rewritten whole, atomically, in place."""
    from gpuconf.cli.config import load_config
    from gpuconf.files.bounded import read_source, write_atomic
    from gpuconf.files.vault import KEYRING, VaultError, decrypt, encrypt, is_vault

    unlock_vaults(args, load_config())
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
