"""What a verb's arguments become: typed values. Each verb (cli/verbs.py) builds them from its own
argparse namespace, naming each option it has; everything after that, in cli/ and below, takes
these values and never a namespace, and an option a verb does not have keeps its default here."""
from __future__ import annotations

import argparse
import datetime
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the connection package loads paramiko: only the commands that connect import it
    from gpuconf.connection.resolve import ConnectionKind
    from gpuconf.report.outputs import OutputOptions


@dataclass(frozen=True)
class VaultOptions:
    """--vault-id (each LABEL@SOURCE, in order), --vault-password-file and --ask-vault-pass."""

    ids: tuple[str, ...] = ()
    password_files: tuple[str, ...] = ()
    ask: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> VaultOptions:
        """From a parser that has the vault options (cli/main.py _vault_options)."""
        return cls(tuple(args.vault_id), tuple(args.vault_password_file), bool(args.ask_vault_pass))


@dataclass(frozen=True)
class Sources:
    """Where a command's hosts and plays come from: -i (else the configuration's inventory), -c,
    --limit, the playbook, -e and the vault passwords."""

    inventory: tuple[str, ...] = ()  # each -i (check and apply take several)
    connection: ConnectionKind | None = None
    limit: str | None = None
    playbook: str | None = None
    extra_vars: tuple[str, ...] = ()
    vault: VaultOptions = field(default_factory=VaultOptions)


@dataclass(frozen=True)
class RunFlags:
    """The command line's part of a run's options (cli/load.py run_options adds the project
    configuration's): tags, --diff, -f, host keys, exit codes, --deadline, the lock wait, -K,
    --reboot, --strict, -v, --step and --today."""

    tags: frozenset[str] = frozenset()
    skip_tags: frozenset[str] = frozenset()
    diff: bool = False
    forks: int | None = None
    accept_new_host_keys: bool = False
    detailed_exitcodes: bool = False
    deadline: float | None = None
    lock_wait: float = 60.0
    ask_become_pass: bool = False
    reboot: bool = False
    strict: bool = False
    verbose: int = 0
    step: bool = False
    today: datetime.date | None = None
    force_handlers: bool = False


@dataclass(frozen=True)
class PlaybookRun:
    """`gpuconf check` and `gpuconf apply`: what to run, how, and what to write (cli/playrun.py)."""

    sources: Sources
    flags: RunFlags
    outputs: OutputOptions
    retry_file: str | None = None
    no_retry_file: bool = False
    syntax_check: bool = False
    list_hosts: bool = False
    list_tasks: bool = False
    start_at_task: str | None = None
    slurm: bool = False  # check --slurm: the scheduler's step after the run
    slurm_state: str | None = None

    @property
    def playbook(self) -> str:
        return self.sources.playbook or ""


def split_list(text: str | None) -> frozenset[str]:
    """`-t a,b` and `--skip-tags`: the names, stripped, none empty."""
    return frozenset(t.strip() for t in (text or "").split(",") if t.strip())
