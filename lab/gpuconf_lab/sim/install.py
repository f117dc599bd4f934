"""Install the simulators into a node image (runs on the machine, called by the lab runtime).

``install_image(root)`` writes, into ``root`` (a mounted overlay of the machine's ``/``):

* the simulator sources at ``/usr/lib/gpuconf-lab/sim/`` (plus ``profiles.py``), with the
  ``boot`` and ``fault`` entry points the runtime calls;
* a shim at each real tool path (``/usr/sbin/modprobe``, ``/usr/bin/systemctl``, ...) that
  execs ``/usr/bin/python3 -B -S <sim>.py``. ``-B`` so that no ``.pyc`` is ever written inside a
  node (tests digest the overlay's upper directory to prove checks write nothing); ``-S``
  because the simulators use the standard library only and start faster without site;
* the default kernel's module tree, headers and initramfs, built from ``root``'s own
  ``/etc/modprobe.d`` (a fresh image has no nouveau blacklist);
* ``machine-units.json``: the unit files the machine already had. The simulated systemd never
  executes those (so a node can never start the machine's postgres or sshd); it reports the
  enabled ones as running, like the services of a freshly booted cloud image.

Existing tool files are unlinked before the shim is written: most are symlinks into
``/usr/bin/kmod`` or ``/usr/bin/systemctl``, and writing through them would clobber the target.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

SIM_SOURCE = Path(__file__).resolve().parent
PROFILES_SOURCE = SIM_SOURCE.parent / "profiles.py"
SIM_DIR = "/usr/lib/gpuconf-lab/sim"
MACHINE_UNITS = "/usr/lib/gpuconf-lab/machine-units.json"
HOST_ONLY = {"install.py", "packages.py", "nvidia_packages.py", "elf.py", "__init__.py", "rpm_packages.py",
             "rpm_system.py"}
DEFAULT_KERNEL = "6.1.0-18-amd64"

# tool path -> (simulator module, first argument or None)
TOOLS = {
    "/usr/sbin/modprobe": ("kmod", "modprobe"),
    "/usr/sbin/rmmod": ("kmod", "rmmod"),
    "/usr/sbin/insmod": ("kmod", "insmod"),
    "/usr/sbin/depmod": ("kmod", "depmod"),
    "/usr/sbin/modinfo": ("kmod", "modinfo"),
    "/usr/bin/kmod": ("kmod", "kmod"),
    "/usr/sbin/update-initramfs": ("initramfs", "update-initramfs"),
    "/usr/bin/lsinitramfs": ("initramfs", "lsinitramfs"),
    "/usr/bin/unmkinitramfs": ("initramfs", "unmkinitramfs"),
    "/usr/bin/systemctl": ("systemctl", None),
    "/usr/bin/journalctl": ("journalctl", "journalctl"),
    "/usr/bin/dmesg": ("journalctl", "dmesg"),
    "/usr/sbin/reboot": ("power", "reboot"),
    "/usr/sbin/shutdown": ("power", "shutdown"),
    "/usr/sbin/poweroff": ("power", "poweroff"),
    "/usr/sbin/halt": ("power", "halt"),
    "/usr/bin/uname": ("uname", None),
    "/usr/bin/lspci": ("lspci", None),
    "/usr/bin/mokutil": ("mokutil", None),    # the image's, as on a UEFI cloud image: no package
    "/usr/sbin/dmidecode": ("dmidecode", None),  # the board's firmware tables, not the machine's
    "/usr/bin/mount": ("mounts", "mount"),     # the simulated kernel's mounts: never a real one
    "/usr/bin/umount": ("mounts", "umount"),
    "/usr/bin/findmnt": ("mounts", "findmnt"),
    f"{SIM_DIR}/boot": ("boot", None),
    f"{SIM_DIR}/fault": ("fault", None),
}


def shim_text(module: str, *args: str, pass_self: bool = False) -> str:
    """A tool shim that runs simulator ``module`` with fixed leading ``args`` (and its own path
    first when ``pass_self``: nvcc finds its toolkit from where it was started)."""
    fixed = "".join(f" '{arg}'" for arg in args) + (' "$0"' if pass_self else "")
    return ("#!/bin/sh\n"
            "# gpuconf lab: this tool is simulated inside lab nodes (lab/gpuconf_lab/sim).\n"
            f'exec /usr/bin/python3 -B -S "${{GPUCONF_SIM_ROOT:-}}{SIM_DIR}/{module}.py"{fixed} "$@"\n')


def write_file(root: Path, absolute: str, text: str, mode: int = 0o644) -> None:
    """Write ``text`` at node path ``absolute``, replacing (never writing through) a symlink."""
    target = root / absolute.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        target.unlink()
    target.write_text(text)
    target.chmod(mode)


def install_sources(root: Path) -> None:
    dest = root / SIM_DIR.lstrip("/")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for source in sorted(SIM_SOURCE.glob("*.py")):
        if source.name not in HOST_ONLY:
            shutil.copyfile(source, dest / source.name)
    shutil.copyfile(PROFILES_SOURCE, dest / "profiles.py")


# tools that are shell scripts of their own, not shims of a simulator module
SHELL_TOOLS = {"/usr/bin/lsmod": "lsmod.sh", "/usr/sbin/lsmod": "lsmod.sh"}


def install_shims(root: Path) -> None:
    for tool_path, (module, first) in TOOLS.items():
        args = (first,) if first else ()
        write_file(root, tool_path, shim_text(module, *args), 0o755)
    for tool_path, script in SHELL_TOOLS.items():
        write_file(root, tool_path, (SIM_SOURCE / script).read_text(), 0o755)


def machine_unit_names(root: Path) -> list[str]:
    """The unit files under `root` (the machine's own `/`)."""
    names = set()
    for directory in ("usr/lib/systemd/system", "lib/systemd/system", "etc/systemd/system"):
        base = root / directory
        if not base.is_dir():
            continue
        for entry in base.rglob("*"):
            if entry.name.endswith((".service", ".socket", ".timer", ".target", ".mount", ".path")):
                names.add(entry.name)
    return sorted(names)


def record_machine_units(root: Path, target: Path | None = None) -> None:
    """Unit names present before the lab added anything (kept across re-installs)."""
    target = target or root / MACHINE_UNITS.lstrip("/")
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(machine_unit_names(root), indent=0) + "\n")


def run_sim(root: Path, module: str, *args: str) -> None:
    """Run an installed simulator against ``root`` (prefix mode), as root, from the machine."""
    env = dict(os.environ, GPUCONF_SIM_ROOT=str(root))
    script = root / SIM_DIR.lstrip("/") / f"{module}.py"
    subprocess.run(["/usr/bin/python3", "-B", "-S", str(script), *args], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def install_image(root: Path, kernel: str = DEFAULT_KERNEL) -> None:
    """Install every simulator, the default kernel and its initramfs into image ``root``."""
    root = Path(root)
    install_sources(root)
    install_shims(root)
    record_machine_units(root)
    for directory in ("var/lib/gpuconf-lab", "etc/gpuconf-lab", "etc/modprobe.d", "etc/modules-load.d"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    run_sim(root, "kernels", "install", kernel)
