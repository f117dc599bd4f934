"""Fixtures for the simulator tests: a node image in a temporary directory, no namespaces.

The simulators run exactly as installed in a node (``python3 -B -S <root>/usr/lib/gpuconf-lab/
sim/<tool>.py``) with ``GPUCONF_SIM_ROOT`` prefixing every path, so these tests need neither
root nor a lab, and can never touch the machine's kernel, services or dpkg. Processes the
simulated daemons leave behind are killed after each test.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuconf_lab.sim.install import SIM_DIR, install_image
from gpuconf_lab.sim.nvidia_packages import name as package_name
from gpuconf_lab.sim.packages import Package, all_packages

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
TARGETS = ("multi-user.target", "network-online.target", "network.target", "syslog.target",
           "sockets.target", "remote-fs-pre.target")


class Node:
    """One simulated node rooted at ``root``; ``run`` calls a simulator like its shim does."""

    def __init__(self, root: Path, fabric: Path, profile: str = "a100", name: str = "node1", index: int = 0):
        self.root, self.fabric = root, fabric
        (root / "etc/gpuconf-lab").mkdir(parents=True, exist_ok=True)
        (root / "etc/gpuconf-lab/node.json").write_text(json.dumps(
            {"name": name, "lab": "test", "profile": profile, "index": index}))

    def env(self, **extra) -> dict:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GPUCONF_SIM_ROOT": str(self.root),
               "GPUCONF_SIM_FABRIC": str(self.fabric), "LANG": "C.UTF-8", "TZ": "UTC"}
        env.update(extra)
        return env

    def run(self, module: str, *args: str, check: bool = False, timeout: float = 30, **env) -> subprocess.CompletedProcess:
        script = self.root / SIM_DIR.lstrip("/") / f"{module}.py"
        done = subprocess.run([PYTHON, "-B", "-S", str(script), *args], env=self.env(**env), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise AssertionError(f"{module} {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
        return done

    def tool(self, path: str, *args: str, **env) -> subprocess.CompletedProcess:
        """Run a shim by its node path (``/usr/sbin/modprobe``), as a user would."""
        return subprocess.run(["/bin/sh", str(self.root / path.lstrip("/")), *args], env=self.env(**env),
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)

    def boot(self) -> None:
        """Boot, or reboot: like the runtime's PID 1, end the node's processes and start from
        an empty /run and /tmp."""
        kill_leftovers(self.root)
        for volatile in ("run", "tmp"):
            shutil.rmtree(self.root / volatile, ignore_errors=True)
            (self.root / volatile).mkdir()
        self.run("boot", "prepare", check=True)
        self.run("boot", "start", check=True)

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")

    def read(self, absolute: str) -> str:
        return self.path(absolute).read_text()

    def write(self, absolute: str, text: str, mode: int = 0o644) -> None:
        target = self.path(absolute)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)

    def install_files(self, package: Package) -> None:
        """Unpack a package's files (not its scripts: those need a real dpkg, see test_repo)."""
        for path, (content, mode) in package.files.items():
            target = self.path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content if isinstance(content, bytes) else content.encode())
            target.chmod(mode)
        for path, link in package.symlinks.items():
            target = self.path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.is_symlink():
                target.symlink_to(link)

    def install(self, name: str, version: str | None = None) -> Package:
        """Unpack package ``name`` (its first version in the repository unless ``version``)."""
        package = next(p for p in repository() if p.name == name and
                       (version is None or version in (p.version, p.version.split("-")[0])))
        self.install_files(package)
        return package

    def install_driver(self, version: str = "535.104.05", open_modules: bool = False) -> None:
        """What ``apt-get install nvidia-driver-<branch>[-open]=<version>-1`` unpacks and its DKMS
        postinst does."""
        branch = version.split(".")[0]
        for kind in ("nvidia-kernel-common", "nvidia-utils"):
            self.install(package_name(kind, branch), version)
        self.install(package_name("nvidia-dkms", branch, open_modules), version)
        self.run("dkms", "add", "-m", "nvidia", "-v", version, check=True)
        self.run("dkms", "install", "-m", "nvidia", "-v", version, check=True)

    def blacklist_nouveau(self, update_initramfs: bool = True) -> None:
        self.write("/etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau\noptions nouveau modeset=0\n")
        if update_initramfs:
            self.run("initramfs", "update-initramfs", "-u", check=True)

    def lsmod(self) -> set[str]:
        return {line.split()[0] for line in self.read("/run/gpuconf-lab/proc/modules").splitlines()}

    def smi(self, *args: str, version: str = "535.104.05", **env) -> subprocess.CompletedProcess:
        return self.run("nvsmi", version, *args, **env)

    def systemctl(self, *args: str, **env) -> subprocess.CompletedProcess:
        return self.run("systemctl", *args, **env)


@functools.lru_cache(maxsize=1)
def repository() -> tuple[Package, ...]:
    return tuple(all_packages())


def kill_leftovers(root: Path) -> None:
    """Kill every process a simulated daemon of this test root left running."""
    marker = f"GPUCONF_SIM_ROOT={root}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            continue
        if marker in environ:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="session")
def image(tmp_path_factory) -> Path:
    """One installed image, copied for each node (installing takes longer than copying)."""
    root = tmp_path_factory.mktemp("image") / "root"
    root.mkdir()
    for target in TARGETS:
        (root / "lib/systemd/system").mkdir(parents=True, exist_ok=True)
        (root / f"lib/systemd/system/{target}").write_text(f"[Unit]\nDescription={target}\n")
    for directory in ("var/tmp", "tmp", "var/log", "etc/docker", "var/lib/dpkg"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    install_image(root)
    return root


@pytest.fixture(scope="session")
def booted(image, tmp_path_factory):
    """Freshly booted copies of the image, one per profile, made on first use."""
    templates: dict[tuple, Path] = {}

    def template(profile: str, driver: str | None = None) -> Path:
        key = (profile, driver)
        if key not in templates:
            base = tmp_path_factory.mktemp(f"booted-{profile}-{driver or 'nodriver'}")
            root = base / "root"
            shutil.copytree(image, root, symlinks=True)
            (base / "fabric").mkdir()
            node = Node(root, base / "fabric", profile)
            node.boot()
            if driver:
                node.install_driver(driver)
                node.blacklist_nouveau()
                node.boot()
            templates[key] = root
        return templates[key]

    return template


@pytest.fixture
def make_node(image, booted, tmp_path):
    fabric = tmp_path / "fabric"
    fabric.mkdir()
    made = []

    def make(profile: str = "a100", name: str = "node1", index: int = 0, boot: bool = True,
             driver: str | None = None) -> Node:
        """A node right after its first boot, or (``driver``) after installing that driver,
        blacklisting nouveau in the initramfs and rebooting. Copied from booted templates."""
        root = tmp_path / name
        shutil.copytree(booted(profile, driver) if boot else image, root, symlinks=True)
        node = Node(root, fabric, profile, name, index)
        made.append(node)
        return node

    yield make
    for node in made:
        kill_leftovers(node.root)
    time.sleep(0.01)


@pytest.fixture
def node(make_node) -> Node:
    """A freshly booted A100 node."""
    return make_node("a100")
