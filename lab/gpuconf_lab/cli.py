"""`gpuconf lab ...`: argument parsing only; the work is done by `gpuconf_lab.fleet.Lab`.

The engine's `gpuconf` command hands everything after `lab` to `main(argv)`; `python -m
gpuconf_lab` does the same. Errors are one `gpuconf lab: error: ...` line and exit code 1.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

from gpuconf_lab.fleet import Lab, existing_labs, exit_code
from gpuconf_lab.runtime import OSES, PROFILES, SSH_PORT, LabError, parse_profiles, require_root_linux
from gpuconf_lab.slurm_cluster import parse_settings

FAULT_HELP = """runtime faults: sshd-down (sessions end; TCP is accepted but no SSH banner is ever sent),
sshd-up (undo sshd-down), reboot-hang (the next reboot never comes back), clear (undo all
of these, boot a hung node, and pass `clear` on to the simulators). Every other kind
(nvidia-smi-hang, xid CODE, temp C, pcie-downgrade, kernel-upgrade RELEASE, dpkg-lock,
secure-boot on|off, ...) is run inside the node as /usr/lib/gpuconf-lab/sim/fault KIND ARGS, but
`bmc fail-task|hang|clear`, which the node's BMC takes (its next update Tasks fail at installation;
it accepts connections and answers nothing; neither). On an el9
node, kernel-upgrade without RELEASE installs 5.14.0-427.16.1.el9_4.x86_64, on an el10 node
6.12.0-55.14.1.el10_0.x86_64 (its BLS entry made the default, its rpms recorded)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuconf lab", description="A simulated GPU fleet reached over real SSH.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, node: bool = False) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--name", default="lab", help="lab name (default: lab)")
        if node:
            sub.add_argument("node", metavar="NODE", help="node name, e.g. a100-01")
        return sub

    up = command("up", "start a lab: nodes, SSH key, pinned host keys, inventories/NAME/hosts.yml")
    up.add_argument("--nodes", type=int, default=None, help="number of nodes of the one --profile (default 1)")
    up.add_argument("--profile", default="a100",
                    help=f"{'|'.join(PROFILES)}, or a mix with counts such as a100=4,t4=1 (default a100)")
    up.add_argument("--os", default="debian", choices=OSES, dest="node_os",
                    help="node OS: debian (apt), el9 (Rocky Linux 9.4) or el10 (Rocky Linux 10.0), the EL ones "
                         "with the real rpm and dnf; "
                         "one entry of a mix can name its own, e.g. --profile a100=1,a100@el9=1 (default debian)")
    up.add_argument("--port", type=int, default=SSH_PORT, help=f"sshd port on each node's address (default {SSH_PORT})")
    up.add_argument("--boot-delay", type=float, default=1.0, help="seconds a reboot takes (default 1)")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the nodes' sshd")
    up.add_argument("--slurm", action="store_true",
                    help="also a real Slurm cluster: slurmctld and munged on the machine (loopback only, files in "
                         "the lab's state directory), munged and slurmd in every node (docs/lab-slurm.md)")
    up.add_argument("--bmc", action="store_true",
                    help="also a Redfish BMC for each node whose profile has one (h100, h200, b200: a DGX H100 BMC), "
                         "on 127.78.<slot>.<n> (loopback only), TLS signed by the lab's own CA; the inventory names "
                         "them (bmc_address, bmc_ca_file, ...) and the lab provider's current firmware_bundle "
                         "(docs/lab-bmc.md)")
    up.add_argument("--bmc-port", type=int, default=443, help="the BMCs' HTTPS port (default 443)")
    up.add_argument("--slurm-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="with --slurm, one more slurm.conf line, e.g. HealthCheckInterval=30 (repeatable)")
    up.add_argument("--no-controller-copy", action="store_false", dest="controller_copy",
                    help="the nodes see nothing of this machine's gpuconf (its checkout and Python environments are "
                         "masked): only what gpuconf-agent.yml installs runs gpuconf in a node")
    down = command("down", "stop the lab and remove every process, mount and file it made")
    down.add_argument("--purge-image", action="store_true", help="also remove the cached image layer")
    command("status", "list the nodes and whether each is up")
    command("reset", "return a node to a fresh image (same address and host key)", node=True)
    exec_ = command("exec", "run a command as root inside a node (exit code passed through)", node=True)
    exec_.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command")
    slurm = command("slurm", "run a Slurm client command (sinfo, scontrol, sbatch, ...) against the lab's cluster "
                             "(exit code passed through)")
    slurm.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command")
    fault = command("fault", "inject a fault into a node", node=True)
    fault.epilog = FAULT_HELP
    fault.formatter_class = argparse.RawDescriptionHelpFormatter
    fault.add_argument("kind", metavar="KIND")
    fault.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except LabError as exc:
        print(f"gpuconf lab: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gpuconf lab: interrupted", file=sys.stderr)
        return 130


def run(args: argparse.Namespace) -> int:
    require_root_linux(args.command)
    log = lambda message: print(message, file=sys.stderr, flush=True)   # noqa: E731
    if args.command == "up":
        lab = Lab(args.name, port=args.port, boot_delay=args.boot_delay, log=log)
        if args.slurm_conf and not args.slurm:
            raise LabError("--slurm-conf needs --slurm")
        lab.up(parse_profiles(args.profile, args.nodes, args.node_os), timeout=args.timeout, slurm=args.slurm,
               slurm_settings=parse_settings(args.slurm_conf), bmc=args.bmc, bmc_port=args.bmc_port,
               controller_copy=args.controller_copy)
        print(f"inventory: {lab.inventory_path}")
        print(f"ssh:       ssh -F {lab.paths.ssh_config} {lab.nodes[0].name}")
        return 0
    lab = Lab(args.name, log=log)
    if args.command == "down":
        if not lab.down(purge_image=args.purge_image):
            print(f"lab '{args.name}' is not up; nothing to remove", file=sys.stderr)
        return 0
    if not lab.exists():
        others = existing_labs()
        hint = f" (labs up: {', '.join(others)}; pick one with --name)" if others else ""
        raise LabError(f"lab '{args.name}' is not up{hint}")
    if args.command == "status":
        return print_status(lab)
    if args.command == "reset":
        lab.reset(args.node)
        print(f"{args.node}: reset to a fresh image")
        return 0
    if args.command == "exec":
        command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not command:
            raise LabError("give a command: gpuconf lab exec NODE -- CMD ARGS")
        return lab.exec_interactive(args.node, command)
    if args.command == "slurm":
        command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not command:
            raise LabError("give a command: gpuconf lab slurm --name LAB -- sinfo")
        return exit_code(subprocess.run(lab.slurm_client_argv(command)).returncode)
    if args.command == "fault":
        rc, out, err = lab.fault(args.node, args.kind, *args.args)
        sys.stdout.write(out)
        sys.stderr.write(err)
        return rc
    raise AssertionError(args.command)


def print_status(lab: Lab) -> int:
    rows = [("NODE", "PROFILE", "ADDRESS", "STATE", "SSH", "FAULTS", "OS")]
    for status in lab.status():
        info = status.node
        rows.append((info.name, info.profile, f"{info.address}:{info.port}", status.state,
                     "up" if status.ssh else "down", ",".join(sorted(status.faults)) or "-", info.os))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    print(f"inventory: {lab.inventory_path}")
    return 0
