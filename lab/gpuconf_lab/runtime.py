"""What the host side of the lab agrees on: where state lives, how nodes are named and addressed.

Everything a lab makes on the machine lives under one state directory (`/var/lib/gpuconf`
unless GPUCONF_LAB_ROOT says otherwise), so that `lab down` can remove it all and a node can be
given an empty tmpfs over it: the machine's `/` is every node's lower layer, and without that
mask a node could read its neighbours' upper directories.

The paths inside a node that the simulators rely on are fixed by docs/lab-contract.md.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

STATE_ROOT = Path(os.environ.get("GPUCONF_LAB_ROOT", "/var/lib/gpuconf"))
LABS_DIR = STATE_ROOT / "labs"
# The image cache is shared by every lab of the machine, and a build deletes the images of other
# source hashes: a checkout whose lab sources differ can keep its own cache (GPUCONF_LAB_IMAGES).
IMAGES_DIR = Path(os.environ.get("GPUCONF_LAB_IMAGES") or STATE_ROOT / "images")

# Nodes share the machine's loopback: each gets its own 127.77.<lab slot>.<n> address. Port 22
# is avoided because a host sshd on 0.0.0.0:22 would make binding 127.77.x.y:22 fail.
ADDRESS_PREFIX = "127.77"
SSH_PORT = 2222
MAX_NODES = 254
PROFILES = ("a100", "h100", "h200", "b200", "gb200", "t4")
# The node OS: "debian" (Debian 12, apt), "el9" (Rocky Linux 9.4) or "el10" (Rocky Linux 10.0), the
# EL ones with rpm and dnf (see image_el.py); node OS -> EL major version.
OSES = ("debian", "el9", "el10")
EL_MAJORS = {"el9": "9", "el10": "10"}
USER = "gpuadmin"

NODE_PYTHON = "/usr/bin/python3"
INIT_SCRIPT = Path(__file__).with_name("init.py")

# Inside a node (see docs/lab-contract.md).
SIM_DIR = "/usr/lib/gpuconf-lab/sim"
NODE_RUNTIME_DIR = "/usr/lib/gpuconf-lab/runtime"   # read-only bind of the node's runtime dir
NODE_FABRIC_STASH = "/usr/lib/gpuconf-lab/fabric"   # where PID 1 keeps the fabric dir between boots
NODE_SHARED_STASH = "/usr/lib/gpuconf-lab/shared"   # where PID 1 keeps the controller's paths between boots
# What a node mounts fresh at every boot (init.py): the machine's files there are not a node's.
NODE_VOLATILE = ("/run", "/tmp")
NODE_JSON = "etc/gpuconf-lab/node.json"
REPO_IN_IMAGE = "/var/lib/gpuconf-lab-repo"

# Capabilities no process in a node may ever hold: loading modules, rebooting, setting the
# clock, reading the kernel log and raw I/O would all reach the real machine.
DROPPED_CAPS = ("sys_module", "sys_rawio", "sys_boot", "sys_time", "syslog")
NODE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/root",
    "PYTHONDONTWRITEBYTECODE": "1",
}

# Debian packages the runtime calls on the host; named in errors so a fresh machine can be fixed.
HOST_TOOLS = {
    "unshare": "util-linux", "nsenter": "util-linux", "setpriv": "util-linux",
    "mount": "mount", "sshd": "openssh-server", "ssh-keygen": "openssh-client",
    "sudo": "sudo", "useradd": "passwd", "apt-get": "apt", "dpkg-deb": "dpkg",
}
HOST_TOOL_PATHS = {"sshd": "/usr/sbin/sshd"}
# What EL 9 nodes need on the machine: they run its real rpm and dnf (scripts/system-deps.sh).
EL9_HOST_TOOLS = {"rpm": "rpm", "rpmbuild": "rpm", "dnf": "dnf", "createrepo_c": "createrepo-c",
                  "modifyrepo_c": "createrepo-c"}
EL9_HOST_FILES = {"/usr/lib/python3/dist-packages/dnf-plugins/versionlock.py": "dnf-plugins-core"}

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


class LabError(Exception):
    """A lab operation that cannot be done; the message says what and what to do."""


@dataclass(frozen=True)
class NodeSpec:
    """One node of a lab: `index` is its 0-based position in the lab, unique within it."""

    name: str
    profile: str
    index: int
    address: str
    os: str = "debian"

    def to_json(self) -> dict:
        return {"name": self.name, "profile": self.profile, "index": self.index, "address": self.address,
                "os": self.os}


@dataclass(frozen=True)
class NodePaths:
    """A node's directories on the host. Only `upper` and `work` are wiped by `lab reset`."""

    root: Path

    @property
    def upper(self) -> Path:
        return self.root / "upper"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def mnt(self) -> Path:
        return self.root / "root"

    @property
    def runtime(self) -> Path:
        """Host keys, sshd_config, authorized_keys, faults: survives reset, read-only in the node."""
        return self.root / "runtime"

    @property
    def config(self) -> Path:
        return self.root / "init.json"

    @property
    def console(self) -> Path:
        return self.root / "console.log"

    @property
    def pid_file(self) -> Path:
        return self.root / "init.pid"

    @property
    def launcher_pid_file(self) -> Path:
        return self.root / "launcher.pid"


@dataclass(frozen=True)
class LabPaths:
    """A lab's directories on the host."""

    name: str

    @property
    def root(self) -> Path:
        return LABS_DIR / self.name

    @property
    def state(self) -> Path:
        return self.root / "lab.json"

    @property
    def image(self) -> Path:
        """Mount point of this lab's tmpfs copy of the image layer."""
        return self.root / "image"

    def image_el(self, node_os: str) -> Path:
        """Mount point of this lab's tmpfs copy of an EL layer (`el9`, `el10`: only when it has such nodes)."""
        return self.root / f"image-{node_os}"

    def lowers(self, node_os: str) -> list[Path]:
        """A node's overlay lower layers above the machine's `/`, top first."""
        return ([self.image_el(node_os)] if node_os in EL_MAJORS else []) + [self.image]

    @property
    def fabric(self) -> Path:
        return self.root / "fabric"

    @property
    def ssh(self) -> Path:
        return self.root / "ssh"

    @property
    def client_key(self) -> Path:
        return self.ssh / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.ssh / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.ssh / "config"

    def node(self, name: str) -> NodePaths:
        return NodePaths(self.root / "nodes" / name)


def require_root_linux(action: str) -> None:
    """Refuse early, in one line, where namespaces and mounts cannot work."""
    if not sys.platform.startswith("linux"):
        raise LabError(f"gpuconf lab {action} needs Linux (namespaces and overlayfs); this is {sys.platform}")
    if os.geteuid() != 0:
        raise LabError(f"gpuconf lab {action} needs root (it mounts overlays and creates namespaces): "
                       f"run it with sudo")


def require_tools() -> None:
    missing = [f"{tool} (Debian package {package})" for tool, package in HOST_TOOLS.items()
               if not (shutil.which(tool) or os.access(HOST_TOOL_PATHS.get(tool, "/nonexistent"), os.X_OK))]
    if not os.access(NODE_PYTHON, os.X_OK):
        missing.append(f"{NODE_PYTHON} (Debian package python3)")
    if missing:
        raise LabError("gpuconf lab needs these programs on the machine: " + ", ".join(missing)
                       + "; install them with apt-get install")


def require_el9_tools() -> None:
    missing = [f"{tool} (Debian package {package})" for tool, package in EL9_HOST_TOOLS.items()
               if not shutil.which(tool)]
    missing += [f"{path} (Debian package {package})" for path, package in EL9_HOST_FILES.items()
                if not os.path.exists(path)]
    if missing:
        raise LabError("EL nodes run the machine's real rpm and dnf, and these are missing: " + ", ".join(missing)
                       + "; run scripts/system-deps.sh (or apt-get install rpm dnf dnf-plugins-core createrepo-c)")


def check_name(name: str, what: str = "lab name") -> str:
    if not NAME_RE.match(name):
        raise LabError(f"invalid {what} '{name}': use lowercase letters, digits and '-', "
                       f"starting with a letter, at most 31 characters")
    return name


def parse_profiles(spec: str, nodes: int | None, node_os: str = "debian") -> dict[str, int]:
    """`a100` (with --nodes N, default 1) or a mix with its own counts, such as `a100=4,t4=1`.

    Every node runs `node_os` unless its entry names one: `a100@el9=2,a100=1` is two EL 9 nodes
    and one Debian node. Keys are the profile, or `PROFILE@OS` for a node OS other than Debian."""
    if node_os not in OSES:
        raise LabError(f"unknown node OS '{node_os}': choose from {', '.join(OSES)}")
    parts = [part.strip() for part in spec.split(",") if part.strip()]
    mixed = any("=" in part for part in parts)
    if mixed and nodes is not None:
        raise LabError("give either --nodes N with one profile, or counts in --profile (a100=4,t4=1), not both")
    if not mixed and len(parts) != 1:
        raise LabError(f"'{spec}' names several profiles without counts: write e.g. a100=4,t4=1")
    counts: dict[str, int] = {}
    for part in parts:
        name, _, count = part.partition("=")
        profile, _, entry_os = name.partition("@")
        entry_os = entry_os or node_os
        if profile not in PROFILES:
            raise LabError(f"unknown profile '{profile}': choose from {', '.join(PROFILES)}")
        if entry_os not in OSES:
            raise LabError(f"unknown node OS '{entry_os}' in '{part}': choose from {', '.join(OSES)}")
        if mixed and (not count.isdigit() or int(count) < 1):
            raise LabError(f"bad node count in '{part}': use a positive number, e.g. {name}=2")
        key = profile if entry_os == "debian" else f"{profile}@{entry_os}"
        counts[key] = counts.get(key, 0) + (int(count) if mixed else (nodes if nodes is not None else 1))
    total = sum(counts.values())
    if total < 1 or total > MAX_NODES:
        raise LabError(f"a lab has 1 to {MAX_NODES} nodes, not {total}")
    return counts


def plan_nodes(profiles: dict[str, int], slot: int) -> list[NodeSpec]:
    """Names like a100-01 (Debian), a100-el9-01 (EL 9) and a100-el10-01, numbered per profile and OS;
    addresses 127.77.<slot>.<index + 1>."""
    specs: list[NodeSpec] = []
    for profile in PROFILES:
        for node_os in OSES:
            key = profile if node_os == "debian" else f"{profile}@{node_os}"
            prefix = profile if node_os == "debian" else f"{profile}-{node_os}"
            for number in range(1, profiles.get(key, 0) + 1):
                index = len(specs)
                specs.append(NodeSpec(f"{prefix}-{number:02d}", profile, index,
                                      f"{ADDRESS_PREFIX}.{slot}.{index + 1}", node_os))
    known = {profile if node_os == "debian" else f"{profile}@{node_os}" for profile in PROFILES for node_os in OSES}
    unknown = set(profiles) - known
    if unknown:
        raise LabError(f"unknown profile(s) {', '.join(sorted(unknown))}: choose from {', '.join(PROFILES)}"
                       f" (with @OS for another node OS: {', '.join(OSES)})")
    if not specs or len(specs) > MAX_NODES:
        raise LabError(f"a lab has 1 to {MAX_NODES} nodes, not {len(specs)}")
    return specs


def hidden_dirs() -> list[str]:
    """Machine directories masked with an empty tmpfs inside every node: the lab's state, and the
    image cache wherever GPUCONF_LAB_IMAGES puts it."""
    hidden = [STATE_ROOT]
    if STATE_ROOT not in (IMAGES_DIR, *IMAGES_DIR.parents):
        hidden.append(IMAGES_DIR)
    return [str(path) for path in hidden]


def controller_paths(project: Path) -> list[str]:
    """The checkout and the Python environments the controller runs from, where a node would not
    see them by itself (under /tmp or /run, which every node mounts fresh at boot).

    A node runs the machine's gpuconf in local mode (image builds, the drift timer) and reads the
    lab's inventory in the checkout, so these are bound read-only at the same path inside every
    node, and nothing else of the machine's /tmp is shown."""
    candidates = [Path(os.path.abspath(path)) for path in (project, sys.prefix, sys.base_prefix)]
    volatile = [Path(directory) for directory in NODE_VOLATILE]
    needed = [path for path in candidates if any(v in path.parents for v in volatile) and path.is_dir()]
    return sorted({str(path) for path in needed
                   if not any(other in path.parents for other in needed)})


def controller_copy(project: Path) -> list[str]:
    """Where the controller's gpuconf lives on the machine: its checkout and the Python environments
    it runs from (the interpreter's own prefix too, unless it is the system's). A lab that lends
    nothing (`lab up --no-controller-copy`) masks each with an empty tmpfs in every node, so that
    what runs gpuconf there is what gpuconf_agent installed."""
    import gpuconf

    candidates = [project, Path(sys.prefix), Path(sys.base_prefix), Path(gpuconf.__file__).resolve().parents[1]]
    system = {Path("/"), Path("/usr"), Path("/usr/local")}
    found = {Path(os.path.abspath(path)) for path in candidates if path.is_dir() and Path(path) not in system}
    return sorted(str(path) for path in found if not any(other in path.parents for other in found))


def find_project_root(start: Path | None = None) -> Path:
    """The directory holding pyproject.toml above `start`, else `start` (the cwd). The lab's own
    distribution (lab/ of a gpuconf checkout) is not a project: its inventories are the checkout's."""
    start = (start or Path.cwd()).resolve()
    for directory in (start, *start.parents):
        if (directory / "pyproject.toml").is_file() and not (directory / "gpuconf_lab").is_dir():
            return directory
    return start


def launch_in_namespaces(argv: list[str], console: Path, launcher_pid_file: Path,
                         env: dict[str, str]) -> subprocess.Popen:
    """Start `argv` as PID 1 of new mount, UTS and PID namespaces, in its own session so that it
    outlives this process (a node's init, the Slurm controller): output to `console`, the
    launcher's pid to `launcher_pid_file`."""
    with open(console, "ab") as out:
        process = subprocess.Popen(
            ["unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--propagation", "private", *argv],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, cwd="/", env=env)
    launcher_pid_file.write_text(f"{process.pid}\n")
    return process


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def process_matches(pid: int, needle: str) -> bool:
    """True when `pid` is alive (not a zombie) and its command line mentions `needle`.

    Pids are checked before any signal is sent so that a recycled pid is never killed.
    """
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and needle in cmdline
