"""An ansible-playbook (or ansible) command line, as the gpuconf command line that does the same.

What Ansible takes on the command line and in ANSIBLE_* variables and gpuconf takes too is passed on
under gpuconf's name; what has no gpuconf equivalent is a Refusal that names it (the table says so).
"""
from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

TRUE = ("1", "true", "yes", "on", "y", "t")
# ANSIBLE_* settings that change nothing a target's run shows here (the output's colours, warnings,
# the test environment's own settings), or whose one value is gpuconf's behaviour
NEUTRAL_ENV = {
    "ANSIBLE_FORCE_COLOR", "ANSIBLE_NOCOLOR", "ANSIBLE_DEPRECATION_WARNINGS", "ANSIBLE_DEVEL_WARNING",
    "ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_RETRY_FILES_ENABLED", "ANSIBLE_INVENTORY", "ANSIBLE_LIBRARY",
    "ANSIBLE_PYTHON_MODULE_RLIMIT_NOFILE", "ANSIBLE_HOST_PATTERN_MISMATCH", "ANSIBLE_PYTHON_INTERPRETER",
    "ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TEMP", "ANSIBLE_PLAYBOOK_DIR", "ANSIBLE_CONFIG",
    "ANSIBLE_ROLES_PATH", "ANSIBLE_FORCE_HANDLERS", "ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_CALLBACKS_ENABLED",
    "ANSIBLE_WORKER_SHUTDOWN_POLL_COUNT", "ANSIBLE_WORKER_SHUTDOWN_POLL_DELAY", "ANSIBLE_TEST_ANSIBLE_LIB_ROOT",
    "ANSIBLE_DEBUG",
    # gpuconf runs each host through its tasks in parallel; a playbook's result is the same under both
    "ANSIBLE_STRATEGY",
}


# ANSIBLE_* settings whose value gpuconf has fixed (templating/lookups.py CONFIG): that value is
# gpuconf's behaviour, any other a Refusal
FIXED_ENV = {"ANSIBLE_PRIVATE_ROLE_VARS": False, "ANSIBLE_ERROR_ON_MISSING_HANDLER": True}


class Refusal(Exception):
    """A part of the command line that gpuconf has no equivalent for."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:   # type: ignore[override]
        raise Refusal(f"command line: {message}")


def _parser(adhoc: bool) -> Parser:
    parser = Parser(add_help=False)
    if adhoc:
        parser.add_argument("pattern")
        parser.add_argument("-m", "--module-name", default="command")
        parser.add_argument("-a", "--args", default="")
    else:
        parser.add_argument("playbooks", nargs="+")
    parser.add_argument("-i", "--inventory", action="append", default=[])
    parser.add_argument("-l", "--limit")
    parser.add_argument("-e", "--extra-vars", action="append", default=[])
    parser.add_argument("-t", "--tags", action="append", default=[])
    parser.add_argument("--skip-tags", action="append", default=[])
    parser.add_argument("-C", "--check", action="store_true")
    parser.add_argument("-D", "--diff", action="store_true")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    parser.add_argument("-c", "--connection")
    parser.add_argument("-f", "--forks")
    parser.add_argument("--list-tasks", action="store_true")
    parser.add_argument("--list-hosts", action="store_true")
    parser.add_argument("--list-tags", action="store_true")
    parser.add_argument("--syntax-check", action="store_true")
    parser.add_argument("--start-at-task")
    parser.add_argument("--step", action="store_true")
    parser.add_argument("--flush-cache", action="store_true")
    parser.add_argument("--force-handlers", action="store_true")
    parser.add_argument("-b", "--become", action="store_true")
    parser.add_argument("-u", "--user")
    parser.add_argument("--vault-password-file", action="append", default=[])
    parser.add_argument("--vault-id", action="append", default=[])
    return parser


@dataclass
class AdHoc:
    argv: list[str]


def adhoc_playbook(args: list[str], work: Path) -> AdHoc:
    """`ansible PATTERN -m MODULE -a ARGS ...` is one play of one task, as Ansible runs it; the
    playbook is written to `work` and the rest of the command line goes with it."""
    options, rest = _parser(adhoc=True).parse_known_args(args)
    if rest:
        raise Refusal(f"ansible: {' '.join(rest)}")
    module, arguments = options.module_name, options.args
    task = {module: arguments} if arguments else {module: None}
    play = {"hosts": options.pattern, "gather_facts": False, "tasks": [task]}
    path = work / "adhoc.yml"
    path.write_text(yaml.safe_dump([play], sort_keys=False))
    argv = [str(path)]
    for flag, values in (("-i", options.inventory), ("-e", options.extra_vars)):
        for value in values:
            argv += [flag, value]
    if options.limit:
        argv += ["-l", options.limit]
    if options.connection:
        argv += ["-c", options.connection]
    argv += ["-v"] * options.verbose
    return AdHoc(argv)


def _roles_path(value: str) -> str:
    return os.pathsep.join(str(Path(part).resolve()) for part in value.split(os.pathsep) if part)


def gpuconf_argv(args: list[str], env: Mapping[str, str], report: Path) -> tuple[list[str], int]:
    """The `gpuconf ...` arguments for an ansible-playbook command line (and the verbosity asked
    for, which the output shows); sets GPUCONF_* in os.environ for what the environment said."""
    options, rest = _parser(adhoc=False).parse_known_args(args)
    if rest:
        raise Refusal(f"ansible-playbook option {' '.join(rest)}")
    for name in ("user", "vault_password_file", "vault_id"):
        if getattr(options, name):
            raise Refusal(f"--{name.replace('_', '-')}")
    if options.become:
        raise Refusal("--become")
    if options.list_tags:
        raise Refusal("--list-tags")
    if len(options.playbooks) > 1:
        raise Refusal("several playbooks in one run")
    for name, fixed in FIXED_ENV.items():
        if name in env and (env[name].lower() in TRUE) != fixed:
            raise Refusal(f"{name}={env[name]} (gpuconf's behaviour is {name}={fixed})")
    verb = "check" if options.check and not options.list_tasks else "apply"
    argv = [verb, options.playbooks[0], "--no-retry-file", "--report", str(report)]
    for inventory in options.inventory or [os.environ["CONFORMANCE_EMPTY_INVENTORY"]]:
        argv += ["-i", inventory]
    for value in options.extra_vars:
        argv += ["-e", value]
    if options.tags:
        argv += ["--tags", ",".join(options.tags)]
    if options.skip_tags:
        argv += ["--skip-tags", ",".join(options.skip_tags)]
    for flag, on in (("-D", options.diff), ("--list-tasks", options.list_tasks), ("--list-hosts", options.list_hosts),
                     ("--syntax-check", options.syntax_check), ("--step", options.step)):
        if on:
            argv.append(flag)
    for flag, value in (("-l", options.limit), ("-c", options.connection), ("-f", options.forks),
                        ("--start-at-task", options.start_at_task)):
        if value:
            argv += [flag, value]
    if options.force_handlers or env.get("ANSIBLE_FORCE_HANDLERS", "").lower() in TRUE:
        if not gpuconf_has("--force-handlers"):
            if options.force_handlers:
                raise Refusal("--force-handlers")
        else:
            argv.append("--force-handlers")
    if env.get("ANSIBLE_ROLES_PATH"):
        os.environ["GPUCONF_ROLES_PATH"] = _roles_path(env["ANSIBLE_ROLES_PATH"])
    return argv, options.verbose


def gpuconf_has(option: str) -> bool:
    """Whether this gpuconf's apply takes `option` (its --help, read once per pass)."""
    cache = Path(os.environ["CONFORMANCE_LOG"]) / "gpuconf-apply-help.txt"
    if not cache.exists():
        python = os.environ.get("CONFORMANCE_GPUCONF_PYTHON", "python3")
        env = {**os.environ, "PYTHONPATH": os.environ.get("CONFORMANCE_GPUCONF_PATH", "")}
        text = subprocess.run([python, "-m", "gpuconf", "apply", "--help"], capture_output=True, text=True,
                              env=env).stdout
        cache.write_text(text)
    return option in cache.read_text()


def untranslated(env: Mapping[str, str]) -> list[str]:
    """The Ansible settings of the environment that gpuconf is not told (it has no such setting):
    the run goes ahead, and the table names them where it fails."""
    return sorted(f"{k}={v}" for k, v in env.items()
                  if k.startswith("ANSIBLE_") and k not in NEUTRAL_ENV and k not in FIXED_ENV)
