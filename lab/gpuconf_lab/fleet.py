"""`Lab`: start, inspect, fault, reset and remove a fleet of simulated nodes.

This is the API behind `gpuconf lab ...` and the lab fixture of the test suite. A lab's state
is on disk (`lab.json` under its state directory), so any process can pick up a lab that
another one started: `Lab("lab").status()` works after `gpuconf lab up` has exited.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from gpuconf_lab import image, image_el, node, slurm_cluster
from gpuconf_lab.bmc import control as bmc_control
from gpuconf_lab.digest import digest_tree
from gpuconf_lab.inventory_file import inventory_data, known_hosts_text, ssh_config_text, write_inventory, write_text
from gpuconf_lab.processes import FileOpens, ProcessCount
from gpuconf_lab.runtime import (
    EL_MAJORS,
    IMAGES_DIR,
    LABS_DIR,
    MAX_NODES,
    SIM_DIR,
    SSH_PORT,
    STATE_ROOT,
    LabError,
    LabPaths,
    NodeSpec,
    check_name,
    controller_paths,
    find_project_root,
    plan_nodes,
    require_el9_tools,
    require_root_linux,
    require_tools,
)
from gpuconf_lab.runtime import controller_copy as runtime_controller_copy

RUNTIME_FAULTS = ("sshd-down", "sshd-up", "reboot-hang", "clear")


@dataclass(frozen=True)
class NodeInfo:
    """A node as tests and the CLI see it; `upper` is the host path of its overlay upper dir."""

    name: str
    profile: str
    index: int
    address: str
    port: int
    upper: Path
    os: str = "debian"


@dataclass(frozen=True)
class NodeStatus:
    node: NodeInfo
    running: bool
    ssh: bool
    state: str
    faults: dict = field(default_factory=dict)


def ssh_banner(address: str, port: int, timeout: float) -> bool:
    """True when an SSH server answers with its banner (a bare TCP accept is not enough)."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(64).startswith(b"SSH-")
    except OSError:
        return False


class Lab:
    """A named lab. Construct it freely; `up()` starts it, `down()` removes all of it."""

    def __init__(self, name: str = "lab", *, port: int = SSH_PORT, boot_delay: float = 1.0,
                 project_root: Path | None = None, log=None):
        self.name = check_name(name)
        self.paths = LabPaths(name)
        self.port = port
        self.boot_delay = boot_delay
        self.project_root = project_root
        self.log = log or (lambda message: None)
        self._launchers: dict[str, subprocess.Popen] = {}
        self._state: dict | None = None
        self._slurm_launcher: subprocess.Popen | None = None

    # -- state ----------------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.paths.state.exists()

    @property
    def state(self) -> dict:
        if self._state is None:
            try:
                self._state = json.loads(self.paths.state.read_text())
            except FileNotFoundError:
                raise LabError(f"lab '{self.name}' is not up: start it with "
                               f"`gpuconf lab up --name {self.name}`") from None
        return self._state

    @property
    def nodes(self) -> list[NodeInfo]:
        port = self.state["port"]
        return [NodeInfo(n["name"], n["profile"], n["index"], n["address"], port, self.paths.node(n["name"]).upper,
                         n.get("os", "debian"))
                for n in self.state["nodes"]]

    def node(self, name: str) -> NodeInfo:
        for info in self.nodes:
            if info.name == name:
                return info
        names = ", ".join(info.name for info in self.nodes)
        raise LabError(f"lab '{self.name}' has no node '{name}': its nodes are {names}")

    @property
    def inventory_path(self) -> Path:
        return Path(self.state["inventory"])

    @property
    def client_key(self) -> Path:
        return self.paths.client_key

    @property
    def known_hosts(self) -> Path:
        return self.paths.known_hosts

    def _spec(self, name: str) -> NodeSpec:
        info = self.node(name)
        return NodeSpec(info.name, info.profile, info.index, info.address, info.os)

    # -- up -------------------------------------------------------------------------------------
    def up(self, profiles: dict[str, int] | None = None, *, timeout: float = 60.0, slurm: bool = False,
           slurm_settings: dict[str, str] | None = None, bmc: bool = False, bmc_port: int = bmc_control.PORT,
           bmc_task_seconds: float = 2.0, controller_copy: bool = True) -> Lab:
        """Start the nodes (all at once), pin their host keys, write the inventory. With `slurm`,
        also the lab's Slurm cluster: slurmctld on the machine, slurmd in every node, with
        `slurm_settings` as extra slurm.conf lines (what `slurm_config` changes later). With `bmc`,
        a Redfish BMC for each node whose profile has one (gpuconf_lab/bmc/, docs/lab-bmc.md)."""
        require_root_linux("up")
        require_tools()
        LABS_DIR.mkdir(parents=True, exist_ok=True)
        with open(LABS_DIR / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.paths.root.exists():
                if any(node.is_running(self.paths.node(d.name)) for d in self._node_dirs()):
                    raise LabError(f"lab '{self.name}' is already up: `gpuconf lab down --name {self.name}` first")
                self.log(f"removing the stale state of lab '{self.name}'")
                self._remove()
            specs = plan_nodes(profiles or {"a100": 1}, self._free_slot())
            if any(spec.os in EL_MAJORS for spec in specs):   # before anything is made: a clear error
                require_el9_tools()
            self._check_ports(specs)
            if slurm:
                slurm_cluster.require_slurm_tools()
                slurm_cluster.check_ports(int(specs[0].address.split(".")[2]), specs)
            if bmc:
                bmc_control.check_ports(int(specs[0].address.split(".")[2]), specs, bmc_port)
            if slurm and self.boot_delay < slurm_cluster.MIN_BOOT_DELAY:
                self.log(f"lab '{self.name}': a reboot takes {slurm_cluster.MIN_BOOT_DELAY:g}s with Slurm "
                         f"(not {self.boot_delay:g}s), so that slurmctld sees a later boot time")
                self.boot_delay = slurm_cluster.MIN_BOOT_DELAY
            project = find_project_root(self.project_root)
            self._state = {"name": self.name, "slot": int(specs[0].address.split(".")[2]), "port": self.port,
                           "boot_delay": self.boot_delay, "nodes": [spec.to_json() for spec in specs],
                           "inventory": str(project / "inventories" / self.name / "hosts.yml"),
                           "shared": controller_paths(project) if controller_copy else [],
                           "masked": [] if controller_copy else runtime_controller_copy(project), "slurm": slurm,
                           "bmc": {"port": bmc_port, "task_seconds": bmc_task_seconds} if bmc else None}
            self.paths.root.mkdir(parents=True)
            write_text(self.paths.state, json.dumps(self._state, indent=2) + "\n")
            # Still under the lock: a concurrent `up` of this name must not take a lab that is
            # starting for a stale one.
            try:
                self._start(specs, timeout, slurm_settings)
            except BaseException:
                self._remove()
                raise
        return self

    def _start(self, specs: list[NodeSpec], timeout: float, settings: dict[str, str] | None = None) -> None:
        started = time.monotonic()
        layer = image.ensure_image(self.log)
        image.mount_lab_copy(layer, self.paths.image)
        for node_os, major in EL_MAJORS.items():   # each EL version's layer, where the lab has such nodes
            if any(spec.os == node_os for spec in specs):
                image.mount_lab_copy(image_el.ensure_el_layer(layer, major, self.log), self.paths.image_el(node_os))
        self.paths.fabric.mkdir()
        self.paths.ssh.mkdir(mode=0o700)
        self._wait_keygens([node.generate_key(self.paths.client_key, f"gpuconf-lab-{self.name}")])
        public_key = self.paths.client_key.with_suffix(".pub").read_text()
        self._wait_keygens([node.prepare(self.paths.node(spec.name), spec, self.name, self.port, public_key,
                                         self.paths.fabric, ":".join(map(str, self.paths.lowers(spec.os))),
                                         self.boot_delay, specs, self.state["shared"],
                                         self.state.get("masked", []))
                            for spec in specs])
        if self.slurm_enabled:
            self._start_slurm_controller(specs, timeout, settings)
        for spec in specs:
            self._launchers[spec.name] = node.launch(self.paths.node(spec.name))
        with ThreadPoolExecutor(max_workers=min(32, len(specs))) as pool:
            list(pool.map(lambda spec: self.wait_ssh(spec.name, timeout), specs))
        if self.slurm_enabled:
            slurm_cluster.wait_nodes(self.slurm_paths, [spec.name for spec in specs], timeout)
        if self.state.get("bmc"):
            self._start_bmcs(specs)
        self._write_client_files()
        self.log(f"lab '{self.name}': {len(specs)} node(s) up in {time.monotonic() - started:.1f}s; "
                 f"inventory {self.inventory_path}")

    @property
    def bmc_paths(self) -> bmc_control.BmcPaths:
        return bmc_control.BmcPaths(self.paths.root / "bmc")

    def _start_bmcs(self, specs: list[NodeSpec]) -> None:
        wanted = self.state["bmc"]
        made = bmc_control.setup(self.bmc_paths, self.name, self.state["slot"], specs,
                                 {spec.name: self.paths.node(spec.name).root for spec in specs}, wanted["port"],
                                 wanted["task_seconds"])
        self._state = {**self.state, "bmc": {**wanted, **made}}
        write_text(self.paths.state, json.dumps(self._state, indent=2) + "\n")
        bmc_control.start(self.bmc_paths)

    def bmc_fault(self, name: str, kind: str) -> str:
        """`gpuconf lab fault NODE bmc fail-task|hang|clear`: see gpuconf_lab/bmc/control.py."""
        self.node(name)
        return bmc_control.fault(self.bmc_paths, name, kind)

    def _wait_keygens(self, processes: list) -> None:
        for process in processes:
            if process is not None and process.wait() != 0:
                raise LabError(f"ssh-keygen failed: {process.stderr.read().decode(errors='replace').strip()}")

    def _write_client_files(self) -> None:
        nodes = self.nodes
        entries = [(info.address, info.port, (self.paths.node(info.name).runtime / "ssh_host_ed25519_key.pub")
                    .read_text()) for info in nodes]
        write_text(self.paths.known_hosts, known_hosts_text(entries))
        write_text(self.paths.ssh_config, ssh_config_text(nodes, self.state["port"], self.client_key,
                                                          self.known_hosts))
        write_inventory(self.inventory_path, inventory_data(self.name, nodes, self.state["port"],
                                                            self.client_key, self.known_hosts, self.state.get("bmc")))

    def _free_slot(self) -> int:
        used = set()
        for state in LABS_DIR.glob("*/lab.json"):
            try:
                used.add(int(json.loads(state.read_text())["slot"]))
            except (OSError, ValueError, KeyError):
                continue
        for slot in range(1, 255):
            if slot not in used:
                return slot
        raise LabError("every lab address slot (127.77.1-254.x) is taken: take a lab down first")

    def _check_ports(self, specs: list[NodeSpec]) -> None:
        for spec in specs:
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind((spec.address, self.port))
                except OSError as exc:
                    raise LabError(f"cannot use {spec.address}:{self.port} for node {spec.name} ({exc.strerror}); "
                                   f"is something listening on 0.0.0.0:{self.port}? choose another --port") from None

    # -- running nodes --------------------------------------------------------------------------
    def _init_pid(self, name: str) -> int:
        pid = node.init_pid(self.paths.node(self.node(name).name))
        if pid is None:
            raise LabError(f"node {name} of lab '{self.name}' is not running; `gpuconf lab reset {name}` restarts it")
        return pid

    def wait_ssh(self, name: str, timeout: float = 30.0) -> None:
        """Wait until the node's sshd sends its banner; fail early if the node died."""
        info, paths = self.node(name), self.paths.node(name)
        deadline = time.monotonic() + timeout
        while not ssh_banner(info.address, info.port, 1.0):
            launcher = self._launchers.get(name)
            dead = launcher.poll() is not None if launcher else not node.is_running(paths)
            if dead or time.monotonic() > deadline:
                why = "stopped" if dead else f"did not answer SSH within {timeout:.0f}s"
                raise LabError(f"node {name} {why}; its console log ({paths.console}) ends with:\n"
                               + node.console_tail(paths))
            time.sleep(0.05)

    def exec(self, name: str, command: list[str] | str, *, timeout: float | None = 120,
             input: str | None = None) -> tuple[int, str, str]:
        """Run a command as root inside the node (not over SSH); returns (rc, stdout, stderr)."""
        argv = node.exec_argv(self._init_pid(name), ["/bin/sh", "-c", command] if isinstance(command, str) else command)
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
        return exit_code(result.returncode), result.stdout, result.stderr

    def process_count(self, name: str) -> ProcessCount:
        """A counter of the processes the node runs (`start()`, then `stop()`): see gpuconf_lab/processes.py."""
        return ProcessCount(self._init_pid(name), self.paths.node(name).root / "process-accounting")

    def file_opens(self, name: str, path: str) -> FileOpens:
        """A counter of the opens of one of the node's files (`start()`, then `stop()`)."""
        return FileOpens(self._init_pid(name), path)

    def exec_interactive(self, name: str, command: list[str]) -> int:
        """Like exec, with the caller's stdin, stdout and stderr (for `gpuconf lab exec`)."""
        terminal = {"TERM": os.environ["TERM"]} if "TERM" in os.environ else {}
        return exit_code(subprocess.run(node.exec_argv(self._init_pid(name), command, terminal)).returncode)

    def node_state(self, name: str) -> dict:
        """What the node's PID 1 last published (state, boots, applied fault generation)."""
        try:
            pid = self._init_pid(name)
            return json.loads(Path(f"/proc/{pid}/root/run/gpuconf-lab-init/state.json").read_text())
        except (LabError, OSError, ValueError):
            return {"state": "down"}

    def reboot(self, name: str) -> None:
        """What the simulated `reboot` does: SIGUSR1 to the node's PID 1 (it comes back by itself)."""
        signal_pid(self._init_pid(name), signal.SIGUSR1)

    def fault(self, name: str, kind: str, *args: str, timeout: float = 15.0) -> tuple[int, str, str]:
        """Inject a fault. sshd-down, sshd-up, reboot-hang and clear are the runtime's own; any
        other kind goes to the simulators' fault tool inside the node."""
        if kind == "bmc":
            return 0, self.bmc_fault(name, args[0] if args else ""), ""
        if kind not in RUNTIME_FAULTS:
            if not Path(f"/proc/{self._init_pid(name)}/root{SIM_DIR}/fault").exists():
                raise LabError(f"fault '{kind}' belongs to the simulators, and {SIM_DIR}/fault is not installed "
                               f"in node {name}; the runtime's own faults are {', '.join(RUNTIME_FAULTS)}")
            return self.exec(name, [f"{SIM_DIR}/fault", kind, *args])
        paths = self.paths.node(self.node(name).name)
        faults_file = paths.runtime / "faults.json"
        faults = json.loads(faults_file.read_text() or "{}")
        if kind == "sshd-down":
            faults["sshd-down"] = True
        elif kind == "sshd-up":
            faults.pop("sshd-down", None)
        elif kind == "reboot-hang":
            faults["reboot-hang"] = True
        else:
            faults = {}
        generation = self._generation(name) + 1
        faults["generation"] = generation
        node.write_atomically(faults_file, json.dumps(faults) + "\n")
        signal_pid(self._init_pid(name), signal.SIGUSR2)
        deadline = time.monotonic() + timeout
        while self.node_state(name).get("generation", 0) < generation:
            if time.monotonic() > deadline:
                raise LabError(f"node {name} did not apply fault {kind} within {timeout:.0f}s")
            time.sleep(0.02)
        if kind in ("sshd-up", "clear"):   # return once the effect is visible: sshd answers again
            self.wait_ssh(name, timeout)
        if kind == "clear" and Path(f"/proc/{self._init_pid(name)}/root{SIM_DIR}/fault").exists():
            return self.exec(name, [f"{SIM_DIR}/fault", "clear"])
        return 0, "", ""

    def _generation(self, name: str) -> int:
        try:
            return int(json.loads((self.paths.node(name).runtime / "faults.json").read_text()).get("generation", 0))
        except (OSError, ValueError):
            return 0

    def digest(self, name: str) -> str:
        info = self.node(name)
        return digest_tree(info.upper, [*self.paths.lowers(info.os), Path("/")])

    def reset(self, name: str, *, timeout: float = 30.0) -> None:
        """A fresh filesystem from the image, same host key and address, runtime faults cleared."""
        require_root_linux("reset")
        spec, paths = self._spec(name), self.paths.node(name)
        stopping = node.Stopping(paths, self._launchers.pop(name, None))
        stopping.kill()
        stopping.wait()
        node.wipe_filesystem(paths)
        node.write_fresh_upper(paths, spec, self.name)
        if self.slurm_enabled:
            slurm_cluster.write_node_files(paths.upper, paths.runtime, self.slurm_paths, self.state["slot"])
        generation = self._generation(name)
        node.write_atomically(paths.runtime / "faults.json", json.dumps({"generation": generation}) + "\n")
        if self.state.get("bmc"):
            bmc_control.reset(self.bmc_paths, name, spec.profile)
        self._launchers[name] = node.launch(paths)
        self.wait_ssh(name, timeout)

    def status(self) -> list[NodeStatus]:
        def one(info: NodeInfo) -> NodeStatus:
            published = self.node_state(info.name)
            running = published.get("state") != "down"
            return NodeStatus(info, running, running and ssh_banner(info.address, info.port, 1.0),
                              published.get("state", "down"),
                              {k: v for k, v in published.get("faults", {}).items() if k != "generation"})
        with ThreadPoolExecutor(max_workers=min(32, len(self.nodes))) as pool:
            return list(pool.map(one, self.nodes))

    # -- Slurm ----------------------------------------------------------------------------------
    @property
    def slurm_enabled(self) -> bool:
        return bool(self.state.get("slurm"))

    @property
    def slurm_paths(self) -> slurm_cluster.SlurmPaths:
        return slurm_cluster.SlurmPaths(self.paths.root / "slurm")

    def _start_slurm_controller(self, specs: list[NodeSpec], timeout: float,
                                settings: dict[str, str] | None) -> None:
        slot = self.state["slot"]
        slurm_cluster.write_cluster_files(self.slurm_paths, self.name, slot, specs, settings)
        for spec in specs:
            paths = self.paths.node(spec.name)
            slurm_cluster.write_node_files(paths.upper, paths.runtime, self.slurm_paths, slot)
        self._slurm_launcher = slurm_cluster.start_controller(self.slurm_paths, slot)
        slurm_cluster.wait_controller(self.slurm_paths, self._slurm_launcher, timeout)

    def _require_slurm(self) -> slurm_cluster.SlurmPaths:
        if not self.slurm_enabled:
            raise LabError(f"lab '{self.name}' runs no Slurm: start it with `gpuconf lab up --slurm`")
        return self.slurm_paths

    def slurm(self, args: list[str], *, timeout: float = slurm_cluster.CLIENT_TIMEOUT,
              input: str | None = None) -> subprocess.CompletedProcess:
        """Run a Slurm client command (sinfo, scontrol, sbatch, ...) on the machine against the
        lab's slurmctld; text output, never raises on a non-zero exit."""
        return slurm_cluster.run_client(self._require_slurm(), list(args), timeout, input)

    def slurm_config(self, **settings: str | int | None) -> dict[str, str]:
        """Set slurm.conf keys for this lab (HealthCheckProgram, HealthCheckInterval,
        HealthCheckNodeState, ...; None removes one), then `scontrol reconfigure`: slurmctld
        rereads them and pushes them to every slurmd. Returns the lab's settings now."""
        paths = self._require_slurm()
        current = slurm_cluster.read_settings(paths)
        for key, value in settings.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = str(value)
        slurm_cluster.write_settings(paths, current)
        result = self.slurm(["scontrol", "reconfigure"])
        if result.returncode != 0:
            raise LabError(f"scontrol reconfigure failed after setting {', '.join(settings)}: "
                           f"{(result.stderr or result.stdout).strip()}")
        return current

    def slurm_client_argv(self, args: list[str]) -> list[str]:
        """The argv `slurm()` runs (for a caller that wants the terminal, like `gpuconf lab slurm`)."""
        return slurm_cluster.client_argv(self._require_slurm(), list(args), os.getcwd())

    # -- down -----------------------------------------------------------------------------------
    def _node_dirs(self) -> list[Path]:
        nodes_dir = self.paths.root / "nodes"
        return sorted(nodes_dir.iterdir()) if nodes_dir.is_dir() else []

    def down(self, *, purge_image: bool = False) -> bool:
        """Stop every node and remove every mount and file the lab made. False if there was none.

        The image cache under /var/lib/gpuconf/images is shared by labs and kept, unless
        `purge_image`.
        """
        require_root_linux("down")
        removed = False
        if LABS_DIR.is_dir():
            with open(LABS_DIR / ".lock", "w") as lock:   # two downs at once: the second finds nothing
                fcntl.flock(lock, fcntl.LOCK_EX)
                removed = self._remove()
        if purge_image:
            shutil.rmtree(IMAGES_DIR, ignore_errors=True)
        self._remove_empty_state_dirs()
        return removed

    def _remove(self) -> bool:
        if not self.paths.root.exists():
            return False
        inventory = None
        try:
            inventory = self.inventory_path
        except (LabError, KeyError, ValueError):
            pass
        stoppings = [node.Stopping(self.paths.node(d.name), self._launchers.pop(d.name, None))
                     for d in self._node_dirs()]
        for stopping in stoppings:
            stopping.kill()
        for stopping in stoppings:
            stopping.wait()
        slurm_cluster.stop_controller(self.slurm_paths, self._slurm_launcher)
        self._slurm_launcher = None
        bmc_control.stop(self.bmc_paths)
        image.unmount_lab_copy(self.paths.image)
        for node_os in EL_MAJORS:
            image.unmount_lab_copy(self.paths.image_el(node_os))
        if inventory is not None:
            inventory.unlink(missing_ok=True)
            if inventory.parent.is_dir() and not any(inventory.parent.iterdir()):
                inventory.parent.rmdir()
        shutil.rmtree(self.paths.root)
        self._state = None
        return True

    @staticmethod
    def _remove_empty_state_dirs() -> None:
        if LABS_DIR.is_dir() and not [p for p in LABS_DIR.iterdir() if p.name != ".lock"]:
            shutil.rmtree(LABS_DIR, ignore_errors=True)
        if STATE_ROOT.is_dir() and not any(STATE_ROOT.iterdir()):
            STATE_ROOT.rmdir()


def exit_code(returncode: int) -> int:
    return returncode if returncode >= 0 else 128 - returncode


def signal_pid(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        raise LabError(f"process {pid} is gone") from None


def existing_labs() -> list[str]:
    return sorted(path.parent.name for path in LABS_DIR.glob("*/lab.json"))


__all__ = ["Lab", "NodeInfo", "NodeStatus", "LabError", "MAX_NODES", "existing_labs"]
