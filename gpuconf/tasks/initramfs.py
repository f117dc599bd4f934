"""The initramfs of a kernel carries the modprobe configuration it boots with.

A `blacklist nouveau` in /etc/modprobe.d counts at boot only once it is in the
initramfs; `update-initramfs -u` (Debian family) or `dracut -f` (RHEL family)
copies it there. The check reads the files under etc/modprobe.d/ inside
/boot/initrd.img-KERNEL or /boot/initramfs-KERNEL.img (newc cpio, plain or
compressed, read by the remote runner with no process) and rebuilds only when a
line is missing.
"""
from __future__ import annotations

from pydantic import Field

from gpuconf.facts.base import Fact
from gpuconf.facts.initramfs import initramfs_members
from gpuconf.tasks.base import Change, Facts, Params, TaskType, Unknown, Verdict, drift, in_sync, run


def initramfs_fact(kernel: str | None) -> Fact[dict[str, str] | None]:
    """The modprobe.d files inside the initramfs of `kernel` (None: the running one), or None
    when it does not exist; read by the remote runner itself: no zcat, no cpio process."""
    return initramfs_members(f"initramfs:{kernel or '@running'}", kernel, "etc/modprobe.d/*", dict)


class InitramfsParams(Params):
    contains_lines: list[str] = Field(min_length=1)
    kernel: str | None = Field(None, pattern=r"^[A-Za-z0-9._+~-]+$")


class Initramfs(TaskType[InitramfsParams]):
    """Every line of `contains_lines` is in the modprobe configuration inside
    the initramfs of the running kernel (or `kernel`); otherwise
    `update-initramfs -u -k KERNEL` (or `dracut -f --kver KERNEL` on the RHEL
    family) rebuilds it. The new initramfs takes effect at the next boot."""

    name = "initramfs"
    Params = InitramfsParams
    host_facts = frozenset({"kernel"})

    def reads(self, params: InitramfsParams) -> list[Fact]:
        return [initramfs_fact(params.kernel)]

    def check(self, params: InitramfsParams, facts: Facts) -> Verdict:
        kernel = params.kernel or facts.host_text("kernel")
        if not kernel:
            raise Unknown("the running kernel release is not known")
        files = facts[initramfs_fact(params.kernel)]
        platform = facts.platform
        path, tool = platform.initramfs_image(kernel), platform.initramfs
        rebuild = [run(platform.initramfs_rebuild(kernel), timeout=600)]
        if files is None:
            return drift(Change(f"{path} is missing: {tool}", rebuild, reboot=True))
        present = {line.strip() for text in files.values() for line in text.splitlines()}
        missing = [line for line in params.contains_lines if line.strip() not in present]
        if not missing:
            return in_sync(f"initramfs for {kernel} has {', '.join(params.contains_lines)}")
        return drift(Change(f"initramfs for {kernel} lacks {', '.join(missing)}: {rebuild[0].command}",
                            rebuild, reboot=True))
