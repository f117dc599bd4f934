"""A real Slurm cluster for a lab: Debian's slurmctld and munged on the machine, slurmd in every node.

The controller runs in its own mount, UTS and pid namespaces (`unshare`), like a node but without
a root of its own: a tmpfs over `/run` holds its munged socket at the default path
(`/run/munge/munge.socket.2`), so the machine's `/run/munge` and munged (which has the machine's
key) are never used, and nothing else of the machine changes. Everything else is an explicit path
in the lab's state directory (`labs/<lab>/slurm/`): `SLURM_CONF`, the state, the logs, the munge
key, seed and log. Its hostname is `slurmctl`; it listens on the loopback address
`127.77.<slot>.255` and a port of the lab's own range. Killing the controller's PID 1 (slurmctld)
ends its pid namespace, munged with it.

Each node runs its own munged (the lab's key, from the node's read-only runtime dir) and a real
`slurmd` as two ordinary units of the node's simulated systemd (`munge.service` and
`slurmd.service` in the node's `/etc/systemd/system`, enabled), so a boot starts them and a reboot
kills them like every other process. slurmd is configless (`--conf-server`): it fetches
`slurm.conf` from slurmctld and keeps it in `/run/slurm/conf`, where `scontrol` on the node finds
it; so the nodes never see the lab's state directory, and `scontrol reconfigure` reaches them.

Nodes share the machine's network namespace, so each slurmd has its own `Port=` and `NodeAddr=`
(the node's loopback address). Ports: `10000 + 256 * slot` for slurmctld, plus `1 + index` for the
node of that index.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from gpuconf_lab.runtime import (
    ADDRESS_PREFIX,
    NODE_RUNTIME_DIR,
    LabError,
    NodeSpec,
    launch_in_namespaces,
    process_matches,
    read_pid,
)
from gpuconf_lab.slurm_templates import MUNGE_UNIT, NODE_LINE, SLURM_CONF, SLURMD_UNIT

CONTROLLER_HOST = "slurmctl"
PORT_BASE = 10000
PARTITION = "lab"
MUNGE_KEY_IN_NODE = f"{NODE_RUNTIME_DIR}/munge.key"
# The machine's units that a Slurm lab's nodes take over (munge, slurmd) or never run (slurmctld).
NODE_UNITS = ("munge.service", "slurmd.service", "slurmctld.service")
CLIENT_TIMEOUT = 60
# slurmctld takes a node for rebooted when its boot time (whole seconds: now - sysinfo() uptime,
# rounded up) is not before the reboot request; a simulated reboot faster than that would look
# like no reboot at all. Real machines take minutes.
MIN_BOOT_DELAY = 2.0

SLURM_TOOLS = {"/usr/sbin/slurmctld": "slurmctld", "/usr/sbin/slurmd": "slurmd", "/usr/sbin/munged": "munge",
               "/usr/bin/sinfo": "slurm-client", "/usr/bin/scontrol": "slurm-client"}


def require_slurm_tools() -> None:
    """A Slurm lab runs Debian's daemons and clients (scripts/system-deps.sh)."""
    missing = [f"{path} (Debian package {package})" for path, package in SLURM_TOOLS.items()
               if not os.access(path, os.X_OK)]
    if missing:
        raise LabError("gpuconf lab up --slurm needs these programs on the machine: " + ", ".join(missing)
                       + "; install them with apt-get install (scripts/system-deps.sh lists them)")


def controller_address(slot: int) -> str:
    return f"{ADDRESS_PREFIX}.{slot}.255"


def controller_port(slot: int) -> int:
    return PORT_BASE + 256 * slot


def node_port(slot: int, index: int) -> int:
    return controller_port(slot) + 1 + index


def machine_hardware() -> str:
    """`slurmd -C`'s CPUs, boards, sockets, cores, threads and memory: what slurmd in a node
    reports too (a node sees the machine's CPUs and memory)."""
    try:
        out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise LabError(f"`slurmd -C` failed on the machine ({exc}): is Debian's slurmd installed "
                       f"(scripts/system-deps.sh)?") from None
    keep = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    fields = dict(token.split("=", 1) for token in out.split() if "=" in token)
    return " ".join(f"{key}={fields[key]}" for key in keep if key in fields)


@dataclass(frozen=True)
class SlurmPaths:
    """The lab's Slurm files on the machine, all under `labs/<lab>/slurm/`."""

    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def settings(self) -> Path:
        """Included by slurm.conf: the per-lab settings (HealthCheckProgram, ...)."""
        return self.root / "etc" / "lab-settings.conf"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def munge_key(self) -> Path:
        return self.root / "munge.key"

    @property
    def pid_file(self) -> Path:
        """The host pid of the controller's PID 1 (slurmctld)."""
        return self.root / "controller.pid"

    @property
    def launcher_pid_file(self) -> Path:
        return self.root / "launcher.pid"


def write_cluster_files(paths: SlurmPaths, lab: str, slot: int, specs: list[NodeSpec],
                        settings: dict[str, str] | None = None) -> None:
    """The munge key, slurm.conf and the per-lab settings file (before any daemon starts)."""
    for directory in (paths.conf.parent, paths.state, paths.log):
        directory.mkdir(parents=True, exist_ok=True)
    with open(os.open(paths.munge_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as key:
        key.write(os.urandom(1024))
    hardware = machine_hardware()
    nodes = "\n".join(NODE_LINE.format(name=spec.name, address=spec.address, port=node_port(slot, spec.index),
                                       hardware=hardware) for spec in specs)
    paths.conf.write_text(SLURM_CONF.format(
        lab=lab, cluster=lab.replace("-", "_")[:40], controller=CONTROLLER_HOST,
        controller_address=controller_address(slot), controller_port=controller_port(slot),
        state=paths.state, root=paths.root, settings=paths.settings.name, nodes=nodes, partition=PARTITION))
    # slurmd 22.05 loads a cgroup plugin at start even with proctrack/pgid and task/none, and
    # autodetection fails in a node (no cgroup filesystem: the machine's must not be reachable).
    # cgroup/v1 loads without one, and nothing of this configuration ever uses it.
    (paths.conf.parent / "cgroup.conf").write_text("# gpuconf lab: generated by gpuconf lab\nCgroupPlugin=cgroup/v1\n")
    write_settings(paths, settings or {})


def write_settings(paths: SlurmPaths, settings: dict[str, str]) -> None:
    lines = ["# gpuconf lab: per-lab settings (Lab.slurm_config), included by slurm.conf"]
    lines += [f"{key}={conf_value(str(value))}" for key, value in settings.items()]
    tmp = paths.settings.with_name(paths.settings.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.rename(tmp, paths.settings)


def conf_value(value: str) -> str:
    """A slurm.conf value: one with white space (a checkout's path, say) in double quotes, which
    Slurm's parser takes as one value; a double quote cannot be written at all."""
    if '"' in value or "\n" in value:
        raise LabError(f"a slurm.conf value cannot hold a double quote or a new line: {value!r}")
    return f'"{value}"' if any(c.isspace() for c in value) else value


def read_settings(paths: SlurmPaths) -> dict[str, str]:
    settings = {}
    for line in paths.settings.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            settings[key] = value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value
    return settings


def parse_settings(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE` strings (from `lab up --slurm-conf`) as a dict; a clear error for anything else."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or "\n" in pair:
            raise LabError(f"--slurm-conf takes KEY=VALUE (a slurm.conf line), not {pair!r}")
        settings[key.strip()] = value.strip()
    return settings


def check_ports(slot: int, specs: list[NodeSpec]) -> None:
    """slurmctld and every slurmd listen on all addresses: their ports must be free."""
    wanted = [("slurmctld", controller_port(slot))] + [(f"slurmd of {spec.name}", node_port(slot, spec.index))
                                                       for spec in specs]
    for who, port in wanted:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("0.0.0.0", port))
            except OSError as exc:
                raise LabError(f"port {port} for {who} is taken ({exc.strerror}): another program or a lab "
                               f"uses it") from None


def write_node_files(upper: Path, runtime: Path, paths: SlurmPaths, slot: int) -> None:
    """What a Slurm lab adds to a node: the lab's munge key (runtime dir, read-only inside), the
    munge and slurmd units, enabled, slurmctld masked, and none of the three reported as one of
    the machine's units (they are the node's own now)."""
    key = runtime / "munge.key"
    key.write_bytes(paths.munge_key.read_bytes())
    key.chmod(0o600)
    system = upper / "etc/systemd/system"
    wants = system / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (system / "munge.service").write_text(MUNGE_UNIT.format(key=MUNGE_KEY_IN_NODE))
    server = f"{controller_address(slot)}:{controller_port(slot)}"
    (system / "slurmd.service").write_text(SLURMD_UNIT.format(server=server))
    for unit in ("munge.service", "slurmd.service"):
        link = wants / unit
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(f"/etc/systemd/system/{unit}")
    masked = system / "slurmctld.service"
    if masked.is_symlink() or masked.exists():
        masked.unlink()
    masked.symlink_to("/dev/null")
    machine_units = upper / "usr/lib/gpuconf-lab/machine-units.json"
    names = [name for name in json.loads(machine_units.read_text()) if name not in NODE_UNITS]
    machine_units.write_text(json.dumps(names, indent=0) + "\n")


def controller_environment(paths: SlurmPaths) -> dict[str, str]:
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
            "HOME": "/root", "SLURM_CONF": str(paths.conf)}


def start_controller(paths: SlurmPaths, slot: int) -> subprocess.Popen:
    """Start munged and slurmctld in the controller's namespaces; returns the launcher."""
    for stale in (paths.pid_file, paths.launcher_pid_file):
        stale.unlink(missing_ok=True)
    script = " && ".join([
        f"hostname {CONTROLLER_HOST}",
        "mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run",
        "mkdir -m 755 /run/munge",
        "/usr/sbin/munged " + shlex.join([f"--key-file={paths.munge_key}", f"--log-file={paths.log / 'munged.log'}",
                                          f"--seed-file={paths.root / 'munged.seed'}"]),
        # the shell's host pid (the machine's /proc): the parent of `cut`; exec keeps it for slurmctld
        f"cut -d' ' -f4 /proc/self/stat > {shlex.quote(str(paths.pid_file))}.tmp",
        f"mv {shlex.quote(str(paths.pid_file))}.tmp {shlex.quote(str(paths.pid_file))}",
        "exec /usr/sbin/slurmctld -D -i",
    ])
    return launch_in_namespaces(["/bin/sh", "-c", script, f"gpuconf-lab-slurm:{paths.root}"],
                                paths.log / "controller.log", paths.launcher_pid_file, controller_environment(paths))


def controller_pid(paths: SlurmPaths) -> int | None:
    pid = read_pid(paths.pid_file)
    return pid if pid is not None and process_matches(pid, "slurmctld") else None


def client_argv(paths: SlurmPaths, args: list[str], cwd: str | None = None) -> list[str]:
    """A Slurm client command run on the machine against the lab's controller: in its mount
    namespace (its munged socket), with the lab's SLURM_CONF."""
    pid = controller_pid(paths)
    if pid is None:
        raise LabError(f"the lab's slurmctld is not running (its log: {paths.log / 'slurmctld.log'})")
    return ["nsenter", "--target", str(pid), "--mount", f"--wd={cwd or '/'}", "--",
            "/usr/bin/env", *[f"{key}={value}" for key, value in controller_environment(paths).items()], *args]


def run_client(paths: SlurmPaths, args: list[str], timeout: float = CLIENT_TIMEOUT,
               input: str | None = None) -> subprocess.CompletedProcess:
    cwd = os.getcwd()
    return subprocess.run(client_argv(paths, args, cwd if cwd.startswith("/") else "/"), capture_output=True,
                          text=True, timeout=timeout, input=input)


def wait_controller(paths: SlurmPaths, launcher: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if launcher.poll() is not None:
            raise LabError(f"slurmctld stopped at start; {paths.log / 'slurmctld.log'} ends with:\n" + log_tail(paths))
        if controller_pid(paths) is not None and run_client(paths, ["scontrol", "ping"], 10).returncode == 0:
            return
        if time.monotonic() > deadline:
            raise LabError(f"slurmctld did not answer within {timeout:.0f}s; its log ends with:\n" + log_tail(paths))
        time.sleep(0.1)


def node_states(paths: SlurmPaths) -> dict[str, str]:
    """Node name -> state as `sinfo -N` prints it in long form (idle, drained, down*, ...)."""
    result = run_client(paths, ["sinfo", "--noheader", "-N", "-o", "%N %T"], 20)
    if result.returncode != 0:
        return {}
    return dict(line.split(None, 1) for line in result.stdout.splitlines() if " " in line)


def wait_nodes(paths: SlurmPaths, names: list[str], timeout: float) -> None:
    """Until every node's slurmd has registered and the node is idle."""
    deadline = time.monotonic() + timeout
    while True:
        states = node_states(paths)
        waiting = {name: states.get(name, "unknown") for name in names if states.get(name) != "idle"}
        if not waiting:
            return
        if time.monotonic() > deadline:
            listed = ", ".join(f"{name} {state}" for name, state in sorted(waiting.items()))
            raise LabError(f"Slurm nodes not idle within {timeout:.0f}s: {listed}; see each node's "
                           f"/var/log/slurm/slurmd.log and {paths.log / 'slurmctld.log'}")
        time.sleep(0.2)


def stop_controller(paths: SlurmPaths, launcher: subprocess.Popen | None = None, timeout: float = 15.0) -> None:
    """Kill slurmctld, the namespace's PID 1 (munged ends with it); its launcher then reaps it and
    exits (a launcher that does not is killed too). Waits until both are gone."""
    controller = controller_pid(paths)
    launcher_pid = read_pid(paths.launcher_pid_file)
    if launcher_pid is not None and not process_matches(launcher_pid, str(paths.root)):
        launcher_pid = None
    if controller is not None:
        os.kill(controller, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while True:
        launcher_alive = (launcher.poll() is None if launcher is not None
                          else launcher_pid is not None and process_matches(launcher_pid, str(paths.root)))
        controller_alive = controller is not None and process_matches(controller, "slurmctld")
        if not launcher_alive and not controller_alive:
            break
        if time.monotonic() > deadline - timeout / 2 and launcher_pid is not None and launcher_alive:
            try:
                os.kill(launcher_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise LabError(f"the lab's slurmctld did not stop within {timeout:.0f}s")
        time.sleep(0.02)
    paths.pid_file.unlink(missing_ok=True)
    paths.launcher_pid_file.unlink(missing_ok=True)


def log_tail(paths: SlurmPaths, lines: int = 15) -> str:
    text = []
    for name in ("controller.log", "slurmctld.log"):
        try:
            text += (paths.log / name).read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            pass
    return "\n".join(text) or "(no log)"
