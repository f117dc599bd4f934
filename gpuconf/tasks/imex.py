"""IMEX channels: the character devices through which CUDA processes import memory from the
other nodes of a multi-node NVLink domain (GB200/GB300 NVL72).

A channel is `/dev/nvidia-caps-imex-channels/channel<N>`, a character device with the
`nvidia-caps-imex-channels` major of `/proc/devices`. The nvidia module creates channel0 at
load only when loaded with `NVreg_CreateImexChannel0=1`; one made by hand (`mknod`) is gone
after the next reboot. So the channel is made now when the driver is loaded, and the option
goes to modprobe.d, and into the initramfs too when the nvidia module loads from there
(`nvidia-modprobe -i` is deprecated). Source: ../shared/reference/nvidia-stack-2026.md section 5.
"""
from __future__ import annotations

from pydantic import Field

from gpuconf.facts.base import Fact, file_state
from gpuconf.facts.imex import parse_proc_devices
from gpuconf.facts.initramfs import initramfs_members
from gpuconf.tasks.base import (
    Change,
    Facts,
    Params,
    TaskType,
    Unknown,
    Verdict,
    drift,
    in_sync,
    make_directory,
    remove,
    run,
    write_file,
)
from gpuconf.tasks.initramfs import initramfs_fact

CHANNELS = "/dev/nvidia-caps-imex-channels"
CHANNEL0 = f"{CHANNELS}/channel0"
MAJOR_NAME = "nvidia-caps-imex-channels"
OPTION = "NVreg_CreateImexChannel0=1"
OPTIONS_LINE = f"options nvidia {OPTION}"
PROC_DEVICES = file_state("/proc/devices")
CHANNEL0_STATE = file_state(CHANNEL0, with_content=False)


# The nvidia module's members in the running kernel's initramfs, by name only (it is megabytes)
NVIDIA_IN_INITRAMFS = initramfs_members("initramfs-nvidia:@running", None, "*/nvidia.ko*", sorted, names_only=True)


class ImexChannelParams(Params):
    path: str = Field("/etc/modprobe.d/nvidia-imex-channels.conf", pattern=r"^/etc/modprobe\.d/[\w.-]+\.conf$",
                      description="the modprobe.d file that carries `options nvidia NVreg_CreateImexChannel0=1`")


class ImexChannel(TaskType[ImexChannelParams]):
    """IMEX channel 0 exists now and after every reboot: `options nvidia
    NVreg_CreateImexChannel0=1` in modprobe.d (`path`), in the initramfs too when the
    nvidia module loads from it, and `/dev/nvidia-caps-imex-channels/channel0` made now with
    the major of `/proc/devices` when the driver is loaded (else the module makes it at its
    next load)."""

    name = "imex_channel"
    Params = ImexChannelParams
    host_facts = frozenset({"kernel"})

    def reads(self, params: ImexChannelParams) -> list[Fact]:
        return [file_state(params.path), PROC_DEVICES, CHANNEL0_STATE, initramfs_fact(None), NVIDIA_IN_INITRAMFS]

    def check(self, params: ImexChannelParams, facts: Facts) -> Verdict:
        changes = []
        wanted = f"# IMEX channel 0 at every load of nvidia (gpuconf, role imex)\n{OPTIONS_LINE}\n"
        conf = facts[file_state(params.path)]
        if conf.text != wanted:
            changes.append(Change(f"{params.path}: {OPTIONS_LINE} (channel0 at every load of nvidia)",
                                  [write_file(params.path, wanted, mode=0o644)], before=conf.text, after=wanted))
        initramfs = self._initramfs(facts)
        if initramfs:
            changes.append(initramfs)
        channel = facts[CHANNEL0_STATE]
        if not channel.exists or channel.kind != "other":
            changes.append(self._channel(facts, channel.exists))
        if not changes:
            return in_sync(f"{CHANNEL0} present; {params.path} creates it at every load of nvidia")
        return drift(*changes)

    @staticmethod
    def _initramfs(facts: Facts) -> Change | None:
        """The option must be in the initramfs when the nvidia module loads from there."""
        if not facts[NVIDIA_IN_INITRAMFS]:
            return None
        kernel = facts.host_text("kernel")
        if not kernel:
            raise Unknown("the running kernel release is not known")
        members = facts[initramfs_fact(None)] or {}
        if any(line.strip() == OPTIONS_LINE for text in members.values() for line in text.splitlines()):
            return None
        rebuild = run(facts.platform.initramfs_rebuild(kernel), timeout=600)
        return Change(f"initramfs for {kernel} loads nvidia without {OPTION}: {rebuild.command}", [rebuild])

    @staticmethod
    def _channel(facts: Facts, exists: bool) -> Change:
        proc = facts[PROC_DEVICES]
        major = parse_proc_devices(proc.text or "").get(MAJOR_NAME) if proc.exists else None
        if major is None:
            return Change(f"{CHANNEL0}: made by the nvidia module at its next load (no {MAJOR_NAME} in /proc/devices: "
                          "the driver is not loaded)", [], reboot=True)
        replace = [remove(CHANNEL0)] if exists else []
        what = "is not a character device: replace it" if exists else "missing: create it"
        return Change(f"{CHANNEL0} {what} (char {major}:0)",
                      [*replace, make_directory(CHANNELS, mode=0o755),
                       run(["mknod", "-m", "0666", CHANNEL0, "c", str(major), "0"], timeout=30)])
