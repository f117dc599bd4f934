"""The `gpuconf` command: parse arguments, call into the package, map errors to exit codes."""
from __future__ import annotations

import argparse
import datetime
import gc
import logging
import os
import shutil
import sys

from gpuconf import __version__
from gpuconf.engine.options import FORKS
from gpuconf.errors import GpuconfError

EPILOG = """exit codes (a bitmask): 0 in sync / applied, 2 drift (check) or changes (apply
--detailed-exitcodes), 4 a task failed or could not be checked, 8 a host was
unreachable, 16 (apply) a reboot is pending, 1 bad usage or invalid input (nothing
ran), 130 interrupted."""


def _date(text: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a date like 2026-12-04") from None


def _forks(text: str) -> int:
    try:
        forks = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if forks < 1:
        raise argparse.ArgumentTypeError("--forks must be at least 1")
    return forks


def _limit_option(parser: argparse.ArgumentParser) -> None:
    """-l, for every command that selects hosts (the commands apply it once: gpuconf.inventory.patterns.narrow)."""
    parser.add_argument("-l", "--limit", help="restrict hosts: groups, hosts, globs, a,b  a:&b  !x  @retry-file")


def _forks_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--forks", type=_forks,
                        help=f"hosts in parallel (default: gpuconf.cfg's forks, or {FORKS})")


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("playbook")
    parser.add_argument("-i", "--inventory", action="append",
                        help="inventory name, path, or host list 'a,b,'; more than once merges them (default: "
                             "gpuconf.cfg's inventory, or GPUCONF_INVENTORY; with -c local, this machine alone)")
    _limit_option(parser)
    parser.add_argument("-t", "--tags", default="", help="only tasks with these tags (comma separated)")
    parser.add_argument("--skip-tags", default="", help="skip tasks with these tags")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="KEY=VALUE|@FILE")
    _forks_option(parser)
    parser.add_argument("-D", "--diff", action="store_true", help="show what would change")
    parser.add_argument("-C", "--check", action="store_true", dest="check_mode",
                        help="check mode, as ansible-playbook -C: `apply -C` is `gpuconf check`")
    parser.add_argument("-c", "--connection", choices=["ssh", "local"], help="override the connection")
    parser.add_argument("--report", metavar="FILE", help="also write a JSON report (docs/report-schema.json)")
    parser.add_argument("--format", choices=["text", "json", "junit"], default="text",
                        help="what stdout carries (default text); with json or junit the human lines go to stderr")
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report (one testsuite per host)")
    parser.add_argument("--prometheus", metavar="FILE",
                        help="also write a node_exporter textfile (docs/metrics.md), atomically")
    parser.add_argument("--html", metavar="FILE",
                        help="also write an HTML fleet report: hosts x roles, one self-contained file")
    parser.add_argument("--accept-new-host-keys", action="store_true",
                        help="trust unknown host keys on first use (changed keys are always refused)")
    parser.add_argument("--detailed-exitcodes", action="store_true", help="apply: exit 2 when something changed")
    parser.add_argument("--strict", action="store_true",
                        help="health warnings count as failures (exit 4), not only health failures")
    parser.add_argument("--today", type=_date, metavar="YYYY-MM-DD",
                        help="judge driver end-of-life dates as of this day (default: today, or GPUCONF_TODAY)")
    parser.add_argument("--deadline", type=float, metavar="SECONDS", help="stop starting tasks after this long")
    parser.add_argument("-K", "--ask-become-pass", action="store_true",
                        help="prompt for the sudo password (or set GPUCONF_BECOME_PASSWORD)")
    parser.add_argument("--lock-wait", type=float, default=60.0, metavar="SECONDS",
                        help="wait this long for another gpuconf run on a host to finish (default 60)")
    retry = parser.add_mutually_exclusive_group()
    retry.add_argument("--retry-file", metavar="PATH",
                       help="where to list the failed and unreachable hosts (default: the playbook's path "
                            "with .retry for .yml); the next run takes --limit @PATH")
    retry.add_argument("--no-retry-file", action="store_true", help="write no retry file")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="-v: command output tails; -vvv: connections and the requests sent to hosts")
    parser.add_argument("--list-hosts", action="store_true", help="list each play's hosts, run nothing")
    parser.add_argument("--list-tasks", action="store_true", help="list each play's tasks (with tags), run nothing")
    parser.add_argument("--syntax-check", action="store_true", help="load the playbook and its roles, run nothing")
    parser.add_argument("--start-at-task", metavar="NAME", help="start at the first task with this name")
    parser.add_argument("--step", action="store_true", help="ask before each task: (y)es, (n)o, (c)ontinue")
    parser.add_argument("--force-handlers", action="store_true",
                        help="run the handlers a host was notified of even when it failed (a play's "
                             "force_handlers wins)")
    _vault_options(parser)


REMEDIATE_EPILOG = """exit codes (a bitmask): 0 every node in sync and in service, 2 drift left
(a node skipped busy, not started for the budget, drained by someone else, still a lemon),
4 a node needs a person (remediation failed, a lemon, a scheduler error) (with 2: 6),
8 a host was unreachable, 130 interrupted (the nodes worked on stay drained with a gpuconf
reason; run the same command again to carry on), 1 bad usage."""


def _remediate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("playbook", nargs="?")  # only --reset-breaker runs without one
    parser.add_argument("--check", action="store_true", help="print each node's plan and the budget it spends; "
                        "change nothing")
    parser.add_argument("--breaker", metavar="N|P%|P%,N", help="stop taking nodes out once this many nodes of the "
                        "fleet (a count, a share of its GPU nodes, or both: the stricter) needed a hardware action, "
                        "were held or failed verification within --breaker-window (default: off; a tripped breaker "
                        "stops every run)")
    parser.add_argument("--breaker-window", default="24h", metavar="DURATION", help="(default 24h)")
    parser.add_argument("--reset-breaker", action="store_true", help="close the tripped circuit breaker, and exit")
    parser.add_argument("--hold-after-reboots", type=int, default=1, metavar="N",
                        help="reboots a fault must survive within --reboot-window before the node is a hardware hold "
                             "(default 1; gpuconf/facts/xid_reboots.csv sets it per code)")
    parser.add_argument("--reboot-window", default="24h", metavar="DURATION",
                        help="the window --hold-after-reboots counts reboots in (default 24h)")
    parser.add_argument("--restart-app-window", default="1h", metavar="DURATION",
                        help="a restart_app fault (the application's: the node stays in service) seen again within "
                        "this is escalated to a GPU reset (default 1h)")
    parser.add_argument("-i", "--inventory", help="inventory (default: gpuconf.cfg's, or GPUCONF_INVENTORY)")
    _limit_option(parser)
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="KEY=VALUE|@FILE")
    _forks_option(parser)
    parser.add_argument("-c", "--connection", choices=["ssh", "local"], help="override the connection")
    parser.add_argument("--max-unavailable", default="1", metavar="N|P%",
                        help="nodes in scope out of service at once, any reason counted (default 1)")
    parser.add_argument("--drain-timeout", default="30m", metavar="DURATION",
                        help="wait this long for a drained node's jobs to end (default 30m); a node still busy "
                             "is resumed and tried again in a later wave")
    parser.add_argument("--lemon-after", type=int, default=3, metavar="N",
                        help="remediations within --lemon-window that make a node a lemon (default 3; 0: never)")
    parser.add_argument("--lemon-window", default="7d", metavar="DURATION", help="(default 7d)")
    parser.add_argument("--health", metavar="PLAYBOOK",
                        help="the health gate checked with the playbook (default: playbooks/gpu-health.yml; "
                             "none: no gate)")
    parser.add_argument("--state-dir", metavar="DIR", help="the history and journal (default: GPUCONF_STATE_DIR, "
                        "else $XDG_STATE_HOME/gpuconf, else ~/.local/state/gpuconf)")
    parser.add_argument("--report", metavar="FILE", help="also write the run's outcome per node as JSON")
    parser.add_argument("--strict", action="store_true", help="health warnings count as failures")
    parser.add_argument("--today", type=_date, metavar="YYYY-MM-DD", help="judge end-of-life dates as of this day")
    parser.add_argument("--accept-new-host-keys", action="store_true")
    parser.add_argument("-K", "--ask-become-pass", action="store_true")
    parser.add_argument("--lock-wait", type=float, default=60.0, metavar="SECONDS",
                        help="wait this long for another gpuconf run on a host (default 60)")
    _vault_options(parser)


def _vault_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vault-password-file", action="append", default=[], metavar="FILE",
                        help="Ansible Vault password (its first line; an executable prints it); repeatable")
    parser.add_argument("-J", "--ask-vault-pass", action="store_true", help="prompt for the vault password")
    parser.add_argument("--vault-id", action="append", default=[], metavar="[LABEL@]SOURCE",
                        help="a vault password with its id, as Ansible's: SOURCE is a file, an executable or "
                             "'prompt'; repeatable, the first encrypts")


def _adhoc_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pattern", help="hosts or groups, as a play's hosts: (all, gpu:!t4, node0*)")
    parser.add_argument("-a", "--args", required=True, metavar="COMMAND", help="the command (run by /bin/sh)")
    parser.add_argument("-m", "--module", default="command", choices=["command", "shell"],
                        help="command (the default; shell is the same: a string runs in /bin/sh)")
    parser.add_argument("-i", "--inventory", help="inventory (default: gpuconf.cfg's, or GPUCONF_INVENTORY)")
    _limit_option(parser)
    parser.add_argument("-b", "--become", action="store_true", help="run it as root (sudo)")
    _forks_option(parser)
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="KEY=VALUE|@FILE")
    parser.add_argument("-c", "--connection", choices=["ssh", "local"], help="override the connection")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds the command may run (default 60)")
    parser.add_argument("--accept-new-host-keys", action="store_true")
    parser.add_argument("-K", "--ask-become-pass", action="store_true")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    _vault_options(parser)


def _gate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--slurm", action="store_true", help="a failing gate drains this node with gpuconf's reason "
                        "first (Slurm's Prolog or Epilog: docs/slurm.md)")
    parser.add_argument("--node", help="the Slurm node name (default: SLURMD_NODENAME, else the short host name)")
    parser.add_argument("--driver-version", metavar="VERSION", help="the pinned driver version (default: any)")
    parser.add_argument("--state", metavar="FILE", help="no longer used: the gate keeps no state, it judges this "
                        "boot's whole kernel log (accepted so that an existing Prolog line runs)")
    parser.add_argument("--report", metavar="FILE", help="also write the JSON verdict to FILE")
    parser.add_argument("--nvidia-smi-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="nvidia-smi's time before it counts as driver_unresponsive (default 10)")
    parser.add_argument("--pretty", action="store_true", help="indent the JSON")


def _collect_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("hosts", nargs="+", metavar="HOST")
    parser.add_argument("-i", "--inventory")
    parser.add_argument("-c", "--connection", choices=["ssh", "local"])
    parser.add_argument("--state-dir", metavar="DIR", help="bundles go to DIR/bundles, the history to DIR "
                        "(default: GPUCONF_STATE_DIR, else $XDG_STATE_HOME/gpuconf, else ~/.local/state/gpuconf)")
    parser.add_argument("--max-size", type=float, default=64, metavar="MIB",
                        help="the largest bundle kept, in MiB (default 64)")
    parser.add_argument("--accept-new-host-keys", action="store_true")


def _schedule_options(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="schedule_command", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print the systemd units the drift_timer role would install",
                              description="Render the drift_timer role's unit templates with its defaults "
                                          "and these options; nothing is installed.")
    show.add_argument("--interval", help="how often the check runs, a systemd time span (default 1h)")
    show.add_argument("--randomized-delay", help="RandomizedDelaySec: spread over the fleet (default 15min)")
    show.add_argument("--playbook", help="a playbook shipped with gpuconf, by name, or a path on the node "
                      "(default gpu-health.yml)")
    show.add_argument("-i", "--inventory", help="the node's inventory (default /etc/gpuconf/inventory.yml, which "
                      "gpuconf-agent.yml writes)")
    show.add_argument("--host", help="this node's inventory name (default: this machine's hostname)")
    show.add_argument("--deadline", type=float, help="seconds a check may take (default 300)")
    show.add_argument("--textfile-dir", help="node_exporter's textfile directory")
    show.add_argument("-e", "--extra-vars", action="append", default=[], metavar="KEY=VALUE|@FILE",
                      help="any other drift_timer_* variable")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuconf", description="Declarative remediation for GPU servers.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpuconf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    check = sub.add_parser("check", help="report drift, change nothing", epilog=EPILOG)
    _run_options(check)
    check.add_argument("--slurm", action="store_true",
                       help="drain a node that failed (from a controller: or drifted) with a 'gpuconf: ' reason, "
                            "resume a drain this check set once the node is healthy twice in a row; with -c local "
                            "it is Slurm's HealthCheckProgram (docs/slurm.md); the deadline defaults to 35 s")
    check.add_argument("--slurm-state", metavar="FILE",
                       help="with --slurm: where the check remembers its drain on the node "
                            "(default /var/lib/gpuconf/healthcheck.json)")
    apply = sub.add_parser("apply", help="converge, then verify", epilog=EPILOG)
    _run_options(apply)
    apply.add_argument("--reboot", action="store_true",
                       help="with -c local, allow a reboot a task requires (otherwise: reboot pending, exit 16)")
    _remediate_options(sub.add_parser(
        "remediate", help="drain, converge, verify and resume drifted or unhealthy Slurm nodes, in waves",
        description="Check every host once; then, in waves bounded by --max-unavailable, drain each node "
                    "that drifted or is unhealthy, wait for its jobs, apply (a reboot through scontrol reboot), "
                    "verify, and resume it. docs/remediate.md", epilog=REMEDIATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter))
    hardware = sub.add_parser("hardware", help="the nodes remediate holds for hardware (an RMA): serial, PCI, Xid")
    hardware.add_argument("--state-dir", metavar="DIR", help="where the history is (as for history)")
    hardware.add_argument("--format", choices=["text", "json"], default="text")
    hardware.add_argument("--scheduler", action="store_true", help="also ask Slurm whether each is still held")
    history = sub.add_parser("history", help="a host's remediations (gpuconf remediate's history)")
    history.add_argument("host")
    history.add_argument("--state-dir", metavar="DIR", help="where the history is (default: GPUCONF_STATE_DIR, "
                         "else $XDG_STATE_HOME/gpuconf, else ~/.local/state/gpuconf)")
    history.add_argument("--format", choices=["text", "json"], default="text")
    _adhoc_options(sub.add_parser("run", help="ad hoc: one command on hosts, output grouped by identical result",
                                  description="Run one command on the hosts PATTERN selects (Ansible's "
                                              "`ansible PATTERN -a CMD`); hosts with the same result share one "
                                              "block of output."))
    validate = sub.add_parser("validate", help="static checks, no connection")
    validate.add_argument("playbook")
    validate.add_argument("-i", "--inventory")
    _limit_option(validate)
    validate.add_argument("-e", "--extra-vars", action="append", default=[])
    _vault_options(validate)
    vault = sub.add_parser("vault", help="Ansible Vault files and strings: encrypt, decrypt, view, encrypt_string",
                           description="As ansible-vault: what it writes, ansible-vault opens, and the reverse. "
                                       "The first of --vault-id/--vault-password-file encrypts.")
    vault.add_argument("action", choices=["encrypt", "decrypt", "view", "encrypt_string"])
    vault.add_argument("targets", nargs="+", metavar="FILE|STRING",
                       help="files (encrypt, decrypt: rewritten in place; view: printed), or the strings to encrypt")
    vault.add_argument("--name", help="encrypt_string: print it as `NAME: !vault |` YAML")
    vault.add_argument("--output", metavar="FILE", help="encrypt, decrypt: write here instead of in place (one file)")
    _vault_options(vault)
    inventory = sub.add_parser("inventory", help="show the merged inventory")
    inventory.add_argument("-i", "--inventory")
    inventory.add_argument("--host")
    inventory.add_argument("--graph", action="store_true", help="the group tree, as ansible-inventory --graph")
    inventory.add_argument("--list", action="store_true", help="groups and _meta.hostvars as JSON, as "
                           "ansible-inventory --list (and a dynamic inventory script) print them")
    _vault_options(inventory)
    init = sub.add_parser("init", help="write a new site: inventory, group_vars per GPU model, gpuconf.cfg, "
                          "playbooks, README", description="Write a site into DIR (new or empty; nothing is "
                          "overwritten): inventories/prod with a group per GPU model and its group_vars (driver "
                          "branch and version, flavour, CUDA, fabric), gpuconf.cfg, playbooks that import the "
                          "shipped ones, and a README of the next steps.")
    init.add_argument("directory", metavar="DIR")
    tasks = sub.add_parser("tasks", help="document task types")
    tasks.add_argument("name", nargs="?")
    roles = sub.add_parser("roles", help="list the roles, or a role's variables and defaults")
    roles.add_argument("name", nargs="?")
    facts = sub.add_parser("facts", help="gather a host's facts as JSON (and named subjects: --list)")
    facts.add_argument("host", nargs="?")
    facts.add_argument("-s", "--subject", action="append", default=[], metavar="SUBJECT[,SUBJECT]",
                       help="also gather these subjects (gpus, driver, packages, ...; --list names them)")
    facts.add_argument("--list", action="store_true", help="list the subjects and what each reads")
    facts.add_argument("-i", "--inventory")
    facts.add_argument("-c", "--connection", choices=["ssh", "local"])
    facts.add_argument("--accept-new-host-keys", action="store_true")
    _vault_options(facts)
    firmware = sub.add_parser("firmware", help="the fleet's firmware through each node's BMC: component, version, "
                              "how many nodes, which differ (docs/firmware.md)")
    firmware.add_argument("-i", "--inventory")
    _limit_option(firmware)
    _forks_option(firmware)
    firmware.add_argument("--format", choices=["text", "json"], default="text")
    _vault_options(firmware)
    catalog = sub.add_parser("catalog", help="the driver branch catalog: support, end of life, newest point releases",
                             description="Print the branch catalog (gpuconf/driver/branches.yml) and how old its "
                                         "knowledge of each branch's newest point release is; with --from-redistrib, "
                                         "what NVIDIA's release data says to update. docs/driver-stack.md")
    catalog.add_argument("--from-redistrib", nargs="+", metavar="FILE",
                         help="NVIDIA redistrib_<version>.json manifests or the redist index page, downloaded")
    catalog.add_argument("--today", type=_date, metavar="YYYY-MM-DD",
                         help="judge ages and end of life as of this day (default: today, or GPUCONF_TODAY)")
    _schedule_options(sub.add_parser("schedule", help="scheduled drift checks (the drift_timer role)"))
    _gate_options(sub.add_parser("gate", help="the pre-job gate on this node: Slurm's Prolog and Epilog (JSON; "
                                 "exit 1 when the node must not run the job)"))
    _collect_options(sub.add_parser("collect", help="gather an evidence bundle from hosts (before a reset or "
                                    "reboot erases it) into the state directory"))
    sub.add_parser("lab", help="the simulated GPU fleet (gpuconf lab --help)", add_help=False)
    return parser


def quiet_libraries() -> None:
    """paramiko logs a failed transport (a host that sends no banner) with a traceback on stderr;
    gpuconf reports that failure as the host's result, so the log has nothing to add."""
    logger = logging.getLogger("paramiko")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    logger.propagate = False


def run() -> int:
    """The `gpuconf` program: `main()` with the garbage collector tuned for a fleet. A run makes
    hundreds of thousands of short-lived objects (each host's facts and results), and Python's
    default thresholds (700, 10, 10) walked every live object three times in a 100-host check:
    0.2 s of its 2 s of CPU. With these it is 0.09 s, and no full collection.

    Start-up (imports, the playbook, the plan) makes objects that live until exit and no garbage
    worth a walk, so the collector stays off until a command's hosts start (`commands.started()`):
    four to five collections fewer, 20 ms of a check's CPU."""
    gc.set_threshold(20_000, 10, 10)
    gc.disable()
    return main()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    quiet_libraries()
    if argv and argv[0] == "lab":
        return _lab(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 1 if exc.code not in (0, None) else 0
    if not args.command:
        parser.print_help()
        return 1
    try:
        from gpuconf.cli.verbs import VERBS

        return VERBS[args.command](args)
    except GpuconfError as exc:
        print(f"gpuconf: error: {exc}", file=sys.stderr)
        return exc.exit_bit
    except KeyboardInterrupt:
        print("gpuconf: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # noqa: BLE001 - never a traceback for the user
        if os.environ.get("GPUCONF_DEBUG"):
            raise
        print(f"gpuconf: internal error: {type(exc).__name__}: {exc} (GPUCONF_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 1


def _lab(argv: list[str]) -> int:
    """`gpuconf lab ...` runs the `gpuconf-lab` program: the simulated fleet is its own
    distribution, which the product never imports (and `pip install gpuconf` does not bring)."""
    program = lab_program()
    if program is None:
        print("gpuconf: error: the lab is not installed (no gpuconf-lab program next to "
              f"{sys.executable} or on PATH): install it with `pip install ./lab` from a gpuconf checkout, "
              "or run `make venv`", file=sys.stderr)
        return 1
    try:
        os.execv(program, [program, *argv])
    except OSError as exc:
        print(f"gpuconf: error: cannot run the lab program {program}: {exc.strerror or exc}", file=sys.stderr)
    return 1


def lab_program() -> str | None:
    """The `gpuconf-lab` of this interpreter's environment first (a virtual environment that is
    not activated is not on PATH), else the one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "gpuconf-lab")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("gpuconf-lab")


if __name__ == "__main__":
    raise SystemExit(main())
