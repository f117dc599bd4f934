"""The simulated kernel's character devices: ``/proc/devices`` and the IMEX channel devices.

``/proc/devices`` lists a driver's majors while it is loaded; the nvidia module registers
``nvidia``, ``nvidiactl``, ``nvidia-caps-imex-channels`` and, on NVSwitch boards,
``nvidia-nvswitch`` (``tests/fixtures/real/imex/proc-devices-*``). The runtime binds
``/run/gpuconf-lab/proc/devices`` over ``/proc/devices``; it is rewritten in place.

IMEX channels are ``/dev/nvidia-caps-imex-channels/channel<N>`` with the
``nvidia-caps-imex-channels`` major. The module creates ``channel0`` at load only when loaded
with ``NVreg_CreateImexChannel0=1`` (``options nvidia NVreg_CreateImexChannel0=1`` in
modprobe.d); otherwise someone must ``mknod`` it. A node's ``/dev`` outlives the simulated
reboot (the runtime builds it once), so ``boot prepare`` removes the channel directory, as a
fresh devtmpfs would have none: a channel made by hand is gone after a reboot.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import stat

import state

PROC_DEVICES = f"{state.RUN}/proc/devices"
CHANNELS = "/dev/nvidia-caps-imex-channels"
CHANNEL0_PARAM = "NVreg_CreateImexChannel0"
IMEX_MAJOR = 234            # as in the real capture; a dynamic major on a real kernel
NVIDIA_MAJOR = 195
NVSWITCH_MAJOR = 509
NVLINK_MAJOR = 237
UVM_MAJOR = 511             # nvidia-uvm's, as its kernel log line says
BASE_CHAR = ((1, "mem"), (4, "/dev/vc/0"), (4, "tty"), (4, "ttyS"), (5, "/dev/tty"), (5, "/dev/console"),
             (5, "/dev/ptmx"), (7, "vcs"), (10, "misc"), (13, "input"), (21, "sg"), (128, "ptm"), (136, "pts"),
             (180, "usb"), (189, "usb_device"), (226, "drm"), (249, "bsg"), (250, "watchdog"), (253, "rtc"))
BASE_BLOCK = ((7, "loop"), (8, "sd"), (9, "md"), (11, "sr"), (65, "sd"), (253, "device-mapper"),
              (254, "mdp"), (259, "blkext"))


def render(loaded: set[str] | None = None) -> None:
    """Rewrite /proc/devices for the modules loaded now."""
    if loaded is None:
        import modules

        loaded = modules.loaded_names()
    char = list(BASE_CHAR)
    if "nvidia" in loaded:
        char += [(NVIDIA_MAJOR, "nvidia"), (NVIDIA_MAJOR, "nvidiactl"), (NVLINK_MAJOR, "nvidia-nvlink"),
                 (IMEX_MAJOR, "nvidia-caps-imex-channels")]
        if state.profile().has_nvswitch:
            char.append((NVSWITCH_MAJOR, "nvidia-nvswitch"))
    if "nvidia_uvm" in loaded:
        char.append((UVM_MAJOR, "nvidia-uvm"))
    text = "Character devices:\n" + "".join(f"{major:3d} {name}\n" for major, name in sorted(char))
    text += "\nBlock devices:\n" + "".join(f"{major:3d} {name}\n" for major, name in BASE_BLOCK)
    state.write_in_place(PROC_DEVICES, text)


def nvidia_loaded(params: list[str]) -> None:
    """The nvidia module just loaded with ``params``: channel0 if it was asked for."""
    if f"{CHANNEL0_PARAM}=1" in params:
        make_channel(0)


def make_channel(number: int) -> None:
    """What the module does for a channel it creates: the directory and the char device."""
    directory = state.path(CHANNELS)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    target = f"{directory}/channel{number}"
    if os.path.lexists(target):
        return
    try:
        os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(IMEX_MAJOR, number))
        os.chmod(target, 0o666)   # mknod is subject to the umask
    except PermissionError:
        if not state.TEST_MODE:
            raise
        with open(target, "w"):   # tests outside a node run unprivileged: a stand-in file
            pass


def boot_reset() -> None:
    """A fresh boot: no channel devices (a real /dev starts empty), no nvidia majors."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(state.path(CHANNELS))
    render(set())
