"""What the commands share: loading the inventory, the playbook and the vaults, and the run's
options from the parsed arguments and the project configuration (built here only)."""
from __future__ import annotations

import datetime
import gc
import os
from pathlib import Path
from typing import Any

from gpuconf.errors import UsageError


def started() -> None:
    """The hosts start: what start-up made (modules, the playbook, the plan) is frozen out of the
    collector's walks, and the collector, which `cli.run()` pauses for start-up, is back on. No
    effect where the caller never paused it (tests calling `cli.main()`)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def split_list(text: str) -> set[str]:
    return {t.strip() for t in (text or "").split(",") if t.strip()}


def project_dirs(playbook: str | None) -> list[Path]:
    """Where `-i NAME` is looked for (inventories/NAME): here, the playbook's project, and last the
    library shipped with gpuconf (its `image` inventory: this machine in every node group)."""
    from gpuconf.release.library import library_dir

    dirs = [Path.cwd()]
    if playbook:
        parent = Path(playbook).resolve().parent
        dirs += [parent, parent.parent]
    return list(dict.fromkeys([*dirs, library_dir()]))


def inventory_spec(args: Any, config: Any) -> str:
    """-i, else the project configuration's inventory (gpuconf.cfg, GPUCONF_INVENTORY), else with
    -c local this machine alone (as Slurm's HealthCheckProgram runs it: no inventory file)."""
    spec = getattr(args, "inventory", None) or config.inventory
    if isinstance(spec, list):   # -i given more than once: one source a line (load_inventory)
        spec = "\n".join(spec)
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


def unlock_vaults(args: Any, config: Any) -> None:
    """The vault passwords, before any file is read: --vault-id (repeatable, each with its label),
    --vault-password-file (else gpuconf.cfg's vault_password_file or GPUCONF_VAULT_PASSWORD_FILE),
    and --ask-vault-pass."""
    import getpass

    from gpuconf.files.vault import KEYRING, parse_vault_id, read_password_file

    KEYRING.clear()
    for value in getattr(args, "vault_id", None) or []:  # --vault-id LABEL@SOURCE, in order
        label, source = parse_vault_id(value)
        KEYRING.add(getpass.getpass(f"Vault password ({label}): ") if source == "prompt"
                    else read_password_file(source), label)
    files = list(getattr(args, "vault_password_file", None) or []) or \
        ([config.vault_password_file] if config.vault_password_file and not KEYRING.passwords else [])
    for path in files:
        KEYRING.add(read_password_file(path))
    if getattr(args, "ask_vault_pass", False):
        KEYRING.add(getpass.getpass("Vault password: "))


def load_run(args: Any):
    from gpuconf.cli.config import load_config
    from gpuconf.inventory.hosts import load_inventory, parse_extra_vars
    from gpuconf.playbook.loader import load_playbook
    from gpuconf.playbook.play_hosts import render_play_hosts, render_tags

    config = load_config()
    unlock_vaults(args, config)
    dirs = project_dirs(getattr(args, "playbook", None))
    inventory = load_inventory(inventory_spec(args, config), dirs)
    # the project's roles/: here, or beside the playbooks/ folder when run from elsewhere (cron, CI)
    project = next((d for d in dirs if (d / "roles").is_dir()), Path.cwd())
    extra_vars = parse_extra_vars(args.extra_vars)
    playbook = load_playbook(args.playbook, project, config.roles_path, extra_vars)
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


def become_password(args: Any) -> str | None:
    """From GPUCONF_BECOME_PASSWORD or a prompt; never from the command line."""
    import getpass
    import os

    if getattr(args, "ask_become_pass", False):
        return getpass.getpass("BECOME password: ")
    return os.environ.get("GPUCONF_BECOME_PASSWORD")


def run_options(args: Any, config: Any, verb: str = "check", extra_vars: dict[str, Any] | None = None) -> Any:
    """The one place where a command's arguments and the project configuration become the run's
    options: a command passes what it parsed, and an option it does not have keeps its default."""
    from gpuconf.engine.options import FORKS, RunOptions

    defaults = RunOptions()
    return RunOptions(
        verb=verb, tags=split_list(getattr(args, "tags", "")), skip_tags=split_list(getattr(args, "skip_tags", "")),
        extra_vars=extra_vars or {}, diff=getattr(args, "diff", False),
        forks=getattr(args, "forks", None) or config.forks or FORKS,
        accept_new_host_keys=getattr(args, "accept_new_host_keys", False) or bool(config.accept_new_host_keys),
        become=config.become, connection=getattr(args, "connection", None),
        detailed_exitcodes=getattr(args, "detailed_exitcodes", False), deadline=getattr(args, "deadline", None),
        lock_wait=getattr(args, "lock_wait", defaults.lock_wait), become_password=become_password(args),
        allow_reboot=getattr(args, "reboot", False), strict=getattr(args, "strict", False),
        trace=getattr(args, "verbose", 0) >= 3, step=step_gate() if getattr(args, "step", False) else None,
        today=run_day(getattr(args, "today", None)), force_handlers=getattr(args, "force_handlers", False))


def step_gate() -> Any:
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
