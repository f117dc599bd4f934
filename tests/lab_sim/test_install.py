"""The image: shims at the real tool paths, no bytecode, and read-only commands that write nothing."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from gpuconf_lab.sim.install import TOOLS, install_image

VOLATILE = ("run", "sys", "proc", "tmp")
READ_ONLY = [
    ("kmod", "lsmod"), ("kmod", "modinfo", "nvidia"), ("kmod", "modprobe", "-n", "-v", "ib_umad"),
    ("nvsmi", "535.104.05"), ("nvsmi", "535.104.05", "-q"), ("nvsmi", "535.104.05", "-L"),
    ("nvsmi", "535.104.05", "--query-gpu=index,persistence_mode,temperature.gpu", "--format=csv"),
    ("nvsmi", "535.104.05", "nvlink", "-s"),
    ("systemctl", "is-active", "ssh"), ("systemctl", "status", "nvidia-persistenced"),
    ("systemctl", "show", "nvidia-persistenced"), ("systemctl", "is-enabled", "nvidia-persistenced"),
    ("systemctl", "list-units"), ("systemctl", "list-timers"), ("journalctl", "journalctl", "-u", "opensm"),
    ("journalctl", "dmesg", "-T"), ("journalctl", "journalctl", "-k"), ("dkms", "status"), ("ib", "ibstat"),
    ("ib", "ibv_devinfo"), ("ib", "ibstatus"), ("lspci", "-nn"), ("uname", "-r"),
    ("initramfs", "lsinitramfs", "/boot/initrd.img-6.1.0-18-amd64"),
]


def digest(root: Path) -> dict[str, str]:
    """Every path outside the volatile mounts, with its content hash (or link target)."""
    found = {}
    for directory, dirs, files in os.walk(root):
        relative = Path(directory).relative_to(root)
        if relative.parts and relative.parts[0] in VOLATILE:
            dirs[:] = []
            continue
        for name in dirs + files:
            path = Path(directory) / name
            key = str(relative / name)
            if path.is_symlink():
                found[key] = "-> " + os.readlink(path)
            elif path.is_file():
                found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[key] = "dir"
    return found


def test_every_tool_is_a_shim_at_its_real_path(image):
    for tool_path, (module, _first) in TOOLS.items():
        shim = image / tool_path.lstrip("/")
        assert shim.is_file() and not shim.is_symlink() and os.access(shim, os.X_OK), tool_path
        text = shim.read_text()
        assert f'exec /usr/bin/python3 -B -S "${{GPUCONF_SIM_ROOT:-}}/usr/lib/gpuconf-lab/sim/{module}.py"' in text
        assert (image / f"usr/lib/gpuconf-lab/sim/{module}.py").is_file()
    assert (image / "usr/lib/gpuconf-lab/sim/profiles.py").is_file()
    assert not (image / "usr/lib/gpuconf-lab/sim/install.py").exists()


def test_installing_replaces_symlinks_instead_of_writing_through_them(tmp_path):
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/sbin").mkdir(parents=True)
    (root / "usr/bin/real-kmod").write_text("REAL")
    (root / "usr/sbin/rmmod").symlink_to("../bin/real-kmod")
    (root / "lib/systemd/system").mkdir(parents=True)
    (root / "lib/systemd/system/machine-db.service").write_text("[Service]\nExecStart=/bin/true\n")
    install_image(root)
    assert (root / "usr/bin/real-kmod").read_text() == "REAL"
    assert not (root / "usr/sbin/rmmod").is_symlink()
    assert "machine-db.service" in json.loads((root / "usr/lib/gpuconf-lab/machine-units.json").read_text())
    kernel = root / "lib/modules/6.1.0-18-amd64"
    assert (kernel / "kernel/drivers/gpu/drm/nouveau/nouveau.ko").is_file()
    assert (kernel / "kernel/drivers/infiniband/hw/mlx5/mlx5_ib.ko").is_file()
    assert (root / "boot/initrd.img-6.1.0-18-amd64").is_file()


def test_shims_run_the_simulators(node):
    done = node.tool("/usr/sbin/modprobe", "ib_umad")
    assert done.returncode == 0, done.stderr
    assert "ib_umad" in node.tool("/usr/bin/lsmod").stdout
    assert node.tool("/usr/bin/uname", "-r").stdout == "6.1.0-18-amd64\n"


def test_read_only_commands_write_nothing_outside_run(node):
    node.install_driver()
    node.install("nvidia-persistenced")
    node.install("opensm")
    node.blacklist_nouveau()
    node.boot()
    node.run("kmod", "modprobe", "mlx5_ib", check=True)
    before = digest(node.root)
    for command in READ_ONLY:
        node.run(*command)
        node.run(*command, GPUCONF_SIM_USER="gpuadmin")
    after = digest(node.root)
    assert after == before
    assert not list(node.root.rglob("__pycache__")) and not list(node.root.rglob("*.pyc"))
