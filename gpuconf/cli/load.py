"""What the commands share: loading the inventory, the playbook and the vaults, and the run's
options from the verb's typed options (cli/options.py) and the project configuration (built here only)."""
from __future__ import annotations

import datetime
import gc
import os
from pathlib import Path
from typing import TYPE_CHECKING

from gpuconf.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command that needs none of them (a gate) loads none
    from gpuconf.cli.config import Config
    from gpuconf.cli.options import RunFlags, Sources, VaultOptions
    from gpuconf.engine.flow import StepGate
    from gpuconf.engine.options import RunOptions
    from gpuconf.files.values import JSONValue
    from gpuconf.inventory.hosts import Inventory
    from gpuconf.playbook.models import Playbook
    from gpuconf.results import Verb


def started() -> None:
    """The hosts start: what start-up made (modules, the playbook, the plan) is frozen out of the
    collector's walks, and the collector, which `cli.run()` pauses for start-up, is back on. No
    effect where the caller never paused it (tests calling `cli.main()`)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def project_dirs(playbook: str | None) -> list[Path]:
    """Where `-i NAME` is looked for (inventories/NAME): here, the playbook's project, and last the
    library shipped with gpuconf (its `image` inventory: this machine in every node group)."""
    from gpuconf.release.library import library_dir

    dirs = [Path.cwd()]
    if playbook:
        parent = Path(playbook).resolve().parent
        dirs += [parent, parent.parent]
    return list(dict.fromkeys([*dirs, library_dir()]))


def project_root(playbook: str | None) -> Path:
    """The project whose roles/ a run uses: here, or beside the playbook's folder when run from
    elsewhere (cron, CI); the current directory when none has a roles/ folder."""
    return next((d for d in project_dirs(playbook) if (d / "roles").is_dir()), Path.cwd())


def inventory_spec(sources: Sources, config: Config) -> str:
    """-i, else the project configuration's inventory (gpuconf.cfg, GPUCONF_INVENTORY), else with
    -c local this machine alone (as Slurm's HealthCheckProgram runs it: no inventory file)."""
    spec = "\n".join(sources.inventory) or config.inventory   # -i given more than once: one source a line
    if not spec and sources.connection == "local":
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


def unlock_vaults(vault: VaultOptions, config: Config) -> None:
    """The vault passwords, before any file is read: --vault-id (repeatable, each with its label),
    --vault-password-file (else gpuconf.cfg's vault_password_file or GPUCONF_VAULT_PASSWORD_FILE),
    and --ask-vault-pass."""
    import getpass

    from gpuconf.files.vault import KEYRING, parse_vault_id, read_password_file

    KEYRING.clear()
    for value in vault.ids:  # --vault-id LABEL@SOURCE, in order
        label, source = parse_vault_id(value)
        KEYRING.add(getpass.getpass(f"Vault password ({label}): ") if source == "prompt"
                    else read_password_file(source), label)
    files = list(vault.password_files) or \
        ([config.vault_password_file] if config.vault_password_file and not KEYRING.passwords else [])
    for path in files:
        KEYRING.add(read_password_file(path))
    if vault.ask:
        KEYRING.add(getpass.getpass("Vault password: "))


def load_run(sources: Sources) -> tuple[Inventory, Playbook, dict[str, JSONValue], Config]:
    """The inventory (not yet narrowed by --limit), the playbook, -e's variables and the configuration."""
    from gpuconf.cli.config import load_config
    from gpuconf.inventory.hosts import load_inventory, parse_extra_vars
    from gpuconf.playbook.loader import load_playbook
    from gpuconf.playbook.play_hosts import render_play_hosts, render_tags

    config = load_config()
    unlock_vaults(sources.vault, config)
    inventory = load_inventory(inventory_spec(sources, config), project_dirs(sources.playbook))
    extra_vars = parse_extra_vars(list(sources.extra_vars))
    playbook = load_playbook(sources.playbook or "", project_root(sources.playbook), config.roles_path, extra_vars)
    inventory.read_playbook_vars(playbook.path.resolve().parent)   # group_vars/, host_vars/ beside it
    render_play_hosts(playbook, extra_vars)  # `hosts: "{{ target }}"`, as Ansible renders it
    render_tags(playbook, extra_vars)
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


def become_password(ask: bool) -> str | None:
    """From a prompt (-K) or GPUCONF_BECOME_PASSWORD; never from the command line."""
    import getpass

    if ask:
        return getpass.getpass("BECOME password: ")
    return os.environ.get("GPUCONF_BECOME_PASSWORD")


def run_options(flags: RunFlags, config: Config, verb: Verb = "check", extra_vars: dict[str, JSONValue] | None = None,
                sources: Sources | None = None) -> RunOptions:
    """The one place where a command's options and the project configuration become the run's
    options: a command passes what it has, and what it does not have keeps its default."""
    from gpuconf.engine.options import FORKS, RunOptions

    return RunOptions(
        verb=verb, tags=set(flags.tags), skip_tags=set(flags.skip_tags), extra_vars=extra_vars or {}, diff=flags.diff,
        forks=flags.forks or config.forks or FORKS,
        accept_new_host_keys=flags.accept_new_host_keys or bool(config.accept_new_host_keys),
        become=config.become, connection=sources.connection if sources else None,
        detailed_exitcodes=flags.detailed_exitcodes, deadline=flags.deadline, lock_wait=flags.lock_wait,
        become_password=become_password(flags.ask_become_pass), allow_reboot=flags.reboot, strict=flags.strict,
        trace=flags.verbose >= 3, step=step_gate() if flags.step else None, today=run_day(flags.today),
        force_handlers=flags.force_handlers)


def step_gate() -> StepGate:
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
