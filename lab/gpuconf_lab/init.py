"""PID 1 of a lab node: builds the node's root, boots it, and reboots it on SIGUSR1.

Started by the host as `unshare -m -u -p -f --kill-child /usr/bin/python3 -I -S -B init.py CONFIG`,
so it is PID 1 of a fresh pid namespace with a private mount and UTS namespace. It runs with the
system Python and the standard library only, and imports everything before pivot_root because
afterwards it only sees the node's own filesystem.

Why each mount exists:
  * the root is an overlay (lower = lab image + the machine's `/`, upper = the node's directory);
  * the lab state directory is masked with an empty tmpfs so that no node reads another's upper;
  * `/proc` is the node's own (its pid namespace); `/proc/sys` and friends are read-only and
    `/proc/sysrq-trigger`-like files are read-only or masked: they would reach the real kernel;
  * `/sys` is an empty tmpfs that the simulators populate, never the machine's sysfs;
  * `/dev` is a tmpfs with a handful of safe devices and a private devpts; its `/dev/kmsg` is a
    plain file that the log simulators read (sim/logs.py), never the machine's kernel log;
  * `/run`, `/tmp`, `/sys` and `/proc/driver` are fresh at every boot, like on a real machine.

The boot and reboot protocol is the one in docs/lab-contract.md. Faults that the runtime owns
(`sshd-down`, `reboot-hang`) are read from `runtime/faults.json` when SIGUSR2 arrives.
"""
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
import uuid

# init.py runs as a script (python3 -I): its own directory is not on sys.path by itself.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from linux import (  # noqa: E402
    MNT_DETACH,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    bind,
    drop_capabilities,
    mount,
    new_time_namespace,
    pivot_root,
    tmpfs,
    umount,
)

SIM = "/usr/lib/gpuconf-lab/sim"
RUNTIME = "/usr/lib/gpuconf-lab/runtime"
FABRIC_STASH = "/usr/lib/gpuconf-lab/fabric"
SHARED_STASH = "/usr/lib/gpuconf-lab/shared"
FABRIC = "/run/gpuconf-lab-fabric"
STATE = "/run/gpuconf-lab-init/state.json"   # read by the host through /proc/PID/root
PROC_OVERRIDES = (
    ("/run/gpuconf-lab/proc/modules", "/proc/modules"),
    ("/run/gpuconf-lab/proc/osrelease", "/proc/sys/kernel/osrelease"),
    ("/run/gpuconf-lab/proc/boot_id", "/proc/sys/kernel/random/boot_id"),
    ("/run/gpuconf-lab/proc/version", "/proc/version"),
    ("/run/gpuconf-lab/proc/cmdline", "/proc/cmdline"),
    ("/run/gpuconf-lab/proc/devices", "/proc/devices"),
    ("/run/gpuconf-lab/proc/meminfo", "/proc/meminfo"),
)
PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
PROC_MASKED = ("kcore", "keys", "timer_list", "kallsyms", "kmsg")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
       "HOME": "/root", "PYTHONDONTWRITEBYTECODE": "1"}
SSHD = ["/usr/sbin/sshd", "-D", "-e", "-f", RUNTIME + "/sshd_config"]


def log(message):
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} init[{CONFIG.get('name', '?')}]: {message}\n")
    sys.stderr.flush()


def build_root(cfg):
    """Mount everything the node keeps across reboots, then pivot into it."""
    root = cfg["mnt"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    volatile = os.path.join(cfg["work"], "work", "incompat", "volatile")
    if os.path.isdir(volatile):   # left by a previous mount of this same upper: the host did not crash
        os.rmdir(volatile)
    # `volatile`: no fsync to the upper dir; a lab node never needs to survive a machine crash.
    mount("gpuconf-lab-" + cfg["name"], root, "overlay", 0,
          f"lowerdir={cfg['image']}:/,upperdir={cfg['upper']},workdir={cfg['work']},volatile")
    for hidden in cfg["hide"]:
        if os.path.isdir(root + hidden):
            tmpfs(root + hidden, "755")
    bind(cfg["runtime"], root + RUNTIME, readonly=True)
    bind(cfg["fabric"], root + FABRIC_STASH)
    stash_shared(cfg, root)
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_READONLY:
        path = f"{root}/proc/{name}"
        if os.path.exists(path):
            bind(path, path, readonly=True)
    for name in PROC_MASKED:
        path = f"{root}/proc/{name}"
        if os.path.exists(path):
            bind("/dev/null", path)
    build_dev(root + "/dev")
    pivot_root(root)


def stash_shared(cfg, root):
    """The controller's checkout and venv under /tmp or /run (cfg["shared"]), read-only: kept here
    because the fresh /tmp and /run of every boot would hide them; mount_volatile binds them back."""
    if not cfg.get("shared"):
        return
    tmpfs(root + SHARED_STASH, "755")
    for number, path in enumerate(cfg["shared"]):
        stash = f"{root}{SHARED_STASH}/{number}"
        os.mkdir(stash)
        try:
            bind(path, stash, readonly=True)
        except OSError as exc:
            log(f"warning: the controller's {path} is not shared with this node: {exc}")


def build_dev(dev):
    tmpfs(dev, "755", MS_NOSUID | MS_NOEXEC)
    for name in DEVICES:
        open(f"{dev}/{name}", "w").close()
        bind(f"/dev/{name}", f"{dev}/{name}")
    open(f"{dev}/kmsg", "w").close()
    os.chmod(f"{dev}/kmsg", 0o644)
    os.mkdir(f"{dev}/pts")
    mount("devpts", f"{dev}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5")
    os.symlink("pts/ptmx", f"{dev}/ptmx")
    os.mkdir(f"{dev}/shm")
    tmpfs(f"{dev}/shm", "1777")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")


def node_pids():
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and entry != "1"]


def parent_map():
    parents = {}
    for pid in node_pids():
        try:
            with open(f"/proc/{pid}/stat") as stat:
                parents[pid] = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return parents


def signal_quietly(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


class Node:
    """The supervisor's state: which sshd runs, which runtime faults apply, whether boot hangs."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.sshd = None
        self.sshd_failures = 0
        self.blackhole = None
        self.hung = False
        self.faults = {}
        self.boot_mounts = []
        self.boots = 0
        self.state = "booting"
        self.unbound = []

    def publish(self, state=None):
        """Tell the host what PID 1 is doing and which fault generation it has applied."""
        self.state = state or self.state
        os.makedirs(os.path.dirname(STATE), exist_ok=True)
        with open(STATE + ".tmp", "w") as handle:
            json.dump({"state": self.state, "boots": self.boots, "sshd": self.sshd, "unbound": self.unbound,
                       "faults": self.faults, "generation": self.faults.get("generation", 0)}, handle)
        os.rename(STATE + ".tmp", STATE)

    # -- boot ---------------------------------------------------------------------------------
    def boot(self, reboot):
        started = time.monotonic()
        if reboot:
            log("reboot: stopping every process")
            self.kill_everything()
        self.unmount_boot_mounts()
        self.mount_volatile()
        self.faults = self.read_faults()
        self.boots += 1
        self.publish("booting")
        if reboot and self.faults.get("reboot-hang"):
            self.hung = True
            self.publish("hung")
            log("fault reboot-hang: the node does not come back (clear the fault or reset the node)")
            return
        self.hung = False
        if reboot:
            time.sleep(float(self.cfg.get("boot_delay", 1.0)))
        self.new_clocks()
        self.run_sim("boot", "prepare")
        boot_id = PROC_OVERRIDES[2][0]
        if not os.path.exists(boot_id):   # never let the machine's own boot id show through
            os.makedirs(os.path.dirname(boot_id), exist_ok=True)
            with open(boot_id, "w") as handle:
                handle.write(f"{uuid.uuid4()}\n")
            log("boot prepare wrote no boot_id: the runtime wrote a fresh one")
        self.unbound = []
        for source, target in PROC_OVERRIDES:
            if not os.path.exists(source):
                continue
            if not os.path.exists(target):
                # procfs cannot gain a file, and refuses to sit under an overlay: a kernel built
                # without modules has no /proc/modules to bind over.
                self.unbound.append(target)
                log(f"cannot bind {source}: this kernel has no {target}")
                continue
            bind(source, target)
            self.boot_mounts.append(target)
        self.run_sim("boot", "start")
        self.start_sshd()
        self.publish("up")
        log(f"booted in {time.monotonic() - started:.2f}s")

    def new_clocks(self):
        """Every boot's processes run in a fresh time namespace whose monotonic and boot clocks
        start at 0, as after a real reboot: uptime, /proc/uptime and the boot time slurmd
        reports (now - sysinfo().uptime) restart. PID 1 itself stays in the machine's."""
        try:
            new_time_namespace()
        except OSError as exc:
            log(f"warning: uptime does not restart at this boot: {exc}")

    def mount_volatile(self):
        for target, mode, flags in (("/run", "755", MS_NOSUID | MS_NODEV), ("/tmp", "1777", MS_NOSUID | MS_NODEV),
                                    ("/sys", "755", MS_NOSUID | MS_NODEV | MS_NOEXEC),
                                    ("/proc/driver", "755", MS_NOSUID | MS_NODEV | MS_NOEXEC)):
            tmpfs(target, mode, flags)
            self.boot_mounts.append(target)
        os.mkdir("/run/sshd", 0o755)
        os.mkdir("/run/lock", 0o1777)
        os.chmod("/run/lock", 0o1777)
        os.mkdir(FABRIC)
        bind(FABRIC_STASH, FABRIC)
        for number, path in enumerate(self.cfg.get("shared", [])):
            stash = f"{SHARED_STASH}/{number}"
            if not os.path.ismount(stash):
                continue
            os.makedirs(path, exist_ok=True)   # in the fresh tmpfs, not in the node's disk
            bind(stash, path, readonly=True)
            self.boot_mounts.append(path)

    def unmount_boot_mounts(self):
        while self.boot_mounts:
            target = self.boot_mounts.pop()
            try:
                umount(target, MNT_DETACH)
            except OSError as exc:
                log(f"warning: {exc}")

    def run_sim(self, tool, *args):
        path = f"{SIM}/{tool}"
        if not os.path.exists(path):
            log(f"skipping {tool} {' '.join(args)}: {path} does not exist (simulators not installed)")
            return
        argv = [path, *args] if os.access(path, os.X_OK) else ["/usr/bin/python3", "-B", path, *args]
        try:
            result = subprocess.run(argv, env=ENV, stdin=subprocess.DEVNULL, timeout=120, cwd="/")
        except subprocess.TimeoutExpired:
            log(f"{tool} {' '.join(args)} timed out after 120s")
            return
        if result.returncode != 0:
            log(f"{tool} {' '.join(args)} failed with exit code {result.returncode}")

    def kill_everything(self):
        """Like a real reboot: every process of the node ends, SSH sessions included."""
        self.stop_blackhole()
        self.sshd = None
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 10
        while node_pids() and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.02)
        self.reap()
        if node_pids():
            log(f"warning: processes survived the reboot kill: {node_pids()}")

    # -- sshd ---------------------------------------------------------------------------------
    def start_sshd(self):
        if self.faults.get("sshd-down"):
            self.start_blackhole()
            return
        self.sshd = os.posix_spawn(SSHD[0], SSHD, ENV, setsid=True)

    def stop_sshd(self):
        """Freeze the listener and every session it forked, then kill them all at once.

        Killing the listener first would reparent its sessions to PID 1 and lose the tree.
        """
        if self.sshd is None:
            return
        listener, self.sshd = self.sshd, None
        tree = {listener}
        while True:
            for pid in tree:
                signal_quietly(pid, signal.SIGSTOP)
            parents = parent_map()
            grown = tree | {pid for pid, parent in parents.items() if parent in tree}
            if grown == tree:
                break
            tree = grown
        for pid in tree:
            signal_quietly(pid, signal.SIGKILL)
        self.reap()

    def start_blackhole(self):
        """sshd-down: the address still accepts TCP but never sends a banner, like a hung host."""
        if self.blackhole is not None:
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        for _ in range(50):
            try:
                sock.bind((self.cfg["address"], int(self.cfg["port"])))
                break
            except OSError:
                time.sleep(0.05)
        sock.listen(16)
        self.blackhole = sock
        log("fault sshd-down: connections are accepted and never answered")

    def stop_blackhole(self):
        if self.blackhole is not None:
            self.blackhole.close()
            self.blackhole = None

    # -- events -------------------------------------------------------------------------------
    def read_faults(self):
        try:
            with open(RUNTIME + "/faults.json") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return {}

    def apply_faults(self):
        self.faults = self.read_faults()
        if self.hung and not self.faults.get("reboot-hang"):
            log("fault reboot-hang cleared: booting")
            self.boot(reboot=False)
            return
        if self.faults.get("sshd-down") and self.blackhole is None and not self.hung:
            self.stop_sshd()
            self.start_blackhole()
        elif not self.faults.get("sshd-down") and self.blackhole is not None:
            self.stop_blackhole()
            log("fault sshd-down cleared: starting sshd")
            self.start_sshd()
        self.publish()

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.sshd:
                self.sshd = None
                self.sshd_failures += 1
                log(f"sshd exited ({status:#x}); restarting")
                time.sleep(min(5.0, 0.2 * self.sshd_failures))
                if self.blackhole is None and not self.hung:
                    self.start_sshd()
                self.publish()

    def serve(self):
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
        for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD):
            signal.signal(signum, lambda *_: None)
        self.boot(reboot=False)
        while True:
            ready, _, _ = select.select([wake_read], [], [], 5.0)
            signals = set(os.read(wake_read, 512)) if ready else set()
            try:
                self.reap()
                if signal.SIGUSR1 in signals:
                    self.boot(reboot=True)
                if signal.SIGUSR2 in signals:
                    self.apply_faults()
            except Exception:  # PID 1 must survive its own bugs: a dead PID 1 kills the node
                log("error:\n" + traceback.format_exc())


def main():
    global CONFIG
    with open(sys.argv[1]) as handle:
        CONFIG = json.load(handle)
    with open(CONFIG["pid_file"] + ".tmp", "w") as handle:
        handle.write(os.readlink("/proc/self") + "\n")   # the machine's /proc: the host pid
    os.rename(CONFIG["pid_file"] + ".tmp", CONFIG["pid_file"])
    socket.sethostname(CONFIG["name"])
    build_root(CONFIG)
    # sys_time stays in PID 1's permitted set only, raised for one write at each boot: the offsets
    # of the boot's time namespace (Node.new_clocks).
    drop_capabilities(CONFIG["drop_caps"], keep_permitted=("sys_time",))
    Node(CONFIG).serve()


CONFIG = {}
if __name__ == "__main__":
    try:
        main()
    except Exception:
        log("fatal:\n" + traceback.format_exc())
        sys.exit(1)
